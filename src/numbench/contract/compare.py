"""What ``numbench compare`` hands its wording: a ``Comparison`` (``numbench.analyse.compare``
makes it, ``numbench.report.compare_text`` words it as Markdown), and the words its table and
spreads use for a cell on one side only and for where a side's spread came from."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: a cell on one side only
ONLY_OLD, ONLY_NEW = "only in old", "only in new"
#: where a side's typical spread between processes came from: its own cells, or the default
SPREAD_MEASURED, SPREAD_DEFAULT = "measured", "default"


@dataclass(frozen=True)
class Comparison:
    """Two result sets compared cell by cell.

    ``table``: one row per cell (``numbench.analyse.compare.compare``); ``counts``: cells per
    change; ``differences``: what differs between the two sides as a whole; ``spreads``: each
    side's s_p per device (``{"sd", "cells", "source"}``); ``overall``: the median ratio over
    the cells compared (``median_ratio``, ``median_ratio_cells``); ``run_sd`` and
    ``min_spread_cells``: the interval's stated between-run term and the fewest cells a side
    needs to measure its own s_p."""

    table: pd.DataFrame
    margin: float
    old_name: str
    new_name: str
    counts: dict[str, int]
    differences: list[dict] | None
    spreads: dict[str, dict[str, dict]] | None
    overall: dict
    run_sd: float
    min_spread_cells: int
