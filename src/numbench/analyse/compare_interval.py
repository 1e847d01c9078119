"""The interval of ``numbench compare``'s ratio, run-to-run variance included.

Each side's own interval of its median (``ci_low_s``/``ci_high_s``, a two-level bootstrap
over the cell's processes) is read as a normal interval on the log scale, with standard error
``log(high / low) / (2 * 1.96)``. Alone it leaves out what changes from one run to the next:
a cell has 2 to 4 processes (rounds), too few to measure their own spread (the bootstrap over
two processes is about their range, often far narrower than the spread), so two runs of the
same code were called "slower" on cells whose processes merely agreed within each run.

So each side's standard error is

    se_side = sqrt(max(se_own, s_p / sqrt(n))^2 + RUN_SD^2)

``s_p`` is the side's typical between-process standard deviation of the log median, measured
in that side's own table over its ``ok`` cells of the device with 2 or more processes
(``process_medians_s``): ``numbench.stats.typical_sd`` of each cell's variance of the log of
its process medians, each scaled by the median of its chi-square law, as the speedups' round
floor does (``numbench.analyse.speedups``). ``n`` is the cell's processes (its process
medians, else ``n_processes``, else 1). A side with fewer than ``MIN_SPREAD_CELLS`` such cells
on a device (a small grid, or a table from before ``process_medians_s``) takes
``DEFAULT_PROCESS_SD``. ``RUN_SD`` is what a run cannot see within itself: the machine a few
percent faster or slower from one run to the next, a shift shared by all its cells. A cell
whose own interval is wider keeps it, ``RUN_SD`` added.

The ratio's interval is ``ratio * exp(+-1.96 * hypot(se_old, se_new))``; ``ci_floor`` is the
relative half-width the floors alone give (``sqrt(s_p^2 / n + RUN_SD^2)`` per side: the least
a cell's can be), and ``floored`` whether a side's ``s_p / sqrt(n)`` was above its own standard
error. A/A false-alarm rate: see docs/history.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from numbench.contract.compare import SPREAD_DEFAULT, SPREAD_MEASURED
from numbench.formatting import missing
from numbench.stats import Z95, typical_sd

#: s_p (standard deviation of the log of a process median) where a side cannot measure it:
#: the median over four runs of the default grid (docs/history.md, "Versions and the
#: regression gate")
DEFAULT_PROCESS_SD = 0.035
#: the fewest cells with 2 or more processes a side needs on a device to measure its s_p
MIN_SPREAD_CELLS = 10
#: what moves between two runs that neither run sees within itself (log scale, per side).
#: Two things, seen on runs of identical code (docs/history.md, "Versions and the regression
#: gate"): the whole machine a few percent faster or slower, and single cells that land in
#: another mode from one run to the next with both runs' own intervals narrow (JAX
#: ``batched_matmul`` 1 there). The second sets the value: that move, log 0.258, is 1.96
#: standard deviations of a difference of two sides at 0.093 each, rounded up to 0.1
RUN_SD = 0.1
#: where a side's s_p came from
MEASURED, DEFAULT = SPREAD_MEASURED, SPREAD_DEFAULT


def process_medians(value) -> list[float]:
    """The per-process medians recorded as JSON text; [] when absent or not a list of
    positive finite numbers (a table from elsewhere is data)."""
    if missing(value) or not isinstance(value, str):
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        return []
    if not isinstance(parsed, list):
        return []
    out = []
    for v in parsed:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return []
        if not (math.isfinite(v) and v > 0):
            return []
        out.append(float(v))
    return out


def processes(row: Mapping) -> int:
    """The number of processes behind a cell's median: the process medians recorded, else
    ``n_processes``, else 1 (an old table: the floor is then the widest)."""
    n = len(process_medians(row.get("process_medians_s")))
    if n:
        return n
    recorded = row.get("n_processes")
    if not missing(recorded) and isinstance(recorded, int | float | np.number) and recorded >= 1:
        return int(recorded)
    return 1


def process_spread(frame: pd.DataFrame) -> dict[str, dict]:
    """Per device of the side's ``ok`` cells: ``{"sd": s_p, "cells": cells measured it,
    "source": "measured" or "default"}``."""
    ok = frame[frame["status"] == "ok"]
    out = {}
    for device, part in ok.groupby("device", sort=True):
        variances, dfs = [], []
        for value in part.get("process_medians_s", pd.Series(dtype=object)):
            logs = np.log(process_medians(value))
            if logs.size >= 2:
                variances.append(float(np.var(logs, ddof=1)))
                dfs.append(logs.size - 1)
        if len(variances) >= MIN_SPREAD_CELLS:
            out[str(device)] = {"sd": typical_sd(variances, dfs), "cells": len(variances)}
            out[str(device)]["source"] = MEASURED
        else:
            out[str(device)] = {"sd": DEFAULT_PROCESS_SD, "cells": len(variances)}
            out[str(device)]["source"] = DEFAULT
    return out


def log_se(median: float, lo: float, hi: float) -> float:
    """Standard error of log(median) read from a 95% interval."""
    if not all(np.isfinite(v) and v > 0 for v in (median, lo, hi)):
        return float("nan")
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


def side_se(own: float, sd: float, n: int, run_sd: float) -> float:
    """A side's standard error of its log median: its own, or its process floor
    ``sd / sqrt(n)`` where larger, with the run-to-run term added."""
    return math.hypot(max(own, sd / math.sqrt(max(n, 1))), run_sd)


def ratio_interval(
    old: Mapping, new: Mapping, floors: tuple[tuple[float, int], tuple[float, int]] | None
) -> dict[str, float | bool]:
    """``ratio`` (new / old median), ``ci_low``, ``ci_high``, ``ci_floor`` (the relative
    half-width of the floors alone: the least a cell's can be) and ``floored`` (whether a
    side's process floor was above its own standard error, and so widened the interval).
    ``floors``: each side's (s_p, processes); None for each side's own interval alone."""
    ratio = new["median_s"] / old["median_s"]
    own = [log_se(s["median_s"], s["ci_low_s"], s["ci_high_s"]) for s in (old, new)]
    run_sd = RUN_SD if floors is not None else 0.0
    floors = floors or ((0.0, 1), (0.0, 1))
    least = math.hypot(*(side_se(0.0, sd, n, run_sd) for sd, n in floors))
    out = {"ratio": ratio, "ci_floor": float(np.expm1(Z95 * least)), "floored": False}
    if not all(np.isfinite(own)):
        return {**out, "ci_low": float("nan"), "ci_high": float("nan")}
    se = math.hypot(*(side_se(o, sd, n, run_sd) for o, (sd, n) in zip(own, floors, strict=True)))
    out["floored"] = any(
        o < sd / math.sqrt(max(n, 1)) for o, (sd, n) in zip(own, floors, strict=True)
    )
    return {**out, "ci_low": ratio * math.exp(-Z95 * se), "ci_high": ratio * math.exp(Z95 * se)}


def overall_ratio(ratios) -> dict[str, float | int | None]:
    """The median ratio over the cells compared, and how many: a shift of the whole
    machine between the runs shows here, and moves every cell's ratio alike."""
    logs = np.log([r for r in ratios if not missing(r) and np.isfinite(r) and r > 0])
    return {
        "median_ratio": float(np.exp(np.median(logs))) if logs.size else None,
        "median_ratio_cells": len(logs),
    }
