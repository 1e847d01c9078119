"""Reading results/speedups.parquet and results/crossovers.parquet the same way in every
stage: which verdicts are in doubt, and whether the tables were computed against the
baseline a report is about to name. Their columns are ``SPEEDUPS_SCHEMA`` and
``CROSSOVERS_SCHEMA`` (``numbench.contract``)."""

from __future__ import annotations

import pandas as pd


def in_doubt(speedups: pd.DataFrame) -> pd.Series:
    """Per row, whether its verdict is in doubt (``settled`` false); nothing is in doubt in
    speedups from before the ``settled`` column, which have nothing to say either way."""
    if "settled" not in speedups:
        return pd.Series(False, index=speedups.index)
    return ~speedups["settled"].astype(bool)


def check_baseline(baseline_library: str, baseline_device: str, *tables: pd.DataFrame) -> None:
    """Raise ValueError unless every row of ``tables`` (speedups, crossovers) was computed
    against this baseline: a report must not name one baseline and show another's numbers."""
    found = set()
    for table in tables:
        found |= set(zip(table["baseline_library"], table["baseline_device"], strict=True))
    if found - {(baseline_library, baseline_device)}:
        against = ", ".join(f"{lib} on {dev}" for lib, dev in sorted(found))
        raise ValueError(
            f"the tables were computed against {against}, not the baseline given "
            f"({baseline_library} on {baseline_device}): recompute them"
        )
