"""Compare two result sets cell by cell: versions, machines, before and after.

Modelled on ``asv compare`` and ``pyperf compare_to``: for every cell measured ``ok`` on both
sides, the ratio of the medians (new / old, above 1 is slower), its 95% interval, and a
verdict with the same margin rule as the speedups (``numbench.stats.verdict``): *faster*
and *slower* need the interval to exclude 1 **and** the ratio to pass the margin; anything
else is the same speed. A cell ``ok`` in old and anything else in new (``crashed``,
``failed``, ``timeout``, ``mismatch``...) is *broken*: a regression, listed first and counted
by the gate with the slowdowns. Cells present on one side only, or not ``ok`` in old, are
listed, not dropped.

Like pyperf, it says where the two sides were not measured alike. A cell is *alike* when
both sides agree on every column of ``SETTING_COLUMNS`` that they record (library version,
BLAS, CPU model, device, timing and replicate settings, pairing, parameters, the hash of
the operation's code...); otherwise
its ``differs`` names the columns, and the ratio stands but may measure the change of
setting as well as the change being judged. Above the table, ``environment_differences``
lists what differs between the two sides as a whole (hosts, CPU models, library versions,
settings). Comparing two library versions is a legitimate use: the differences say so
rather than hide it.

The ratio's interval includes run-to-run variance. Each side's own interval of its median
(``ci_low_s``/``ci_high_s``, a two-level bootstrap over the cell's processes) is read as a
normal interval on the log scale, with standard error ``log(high / low) / (2 * 1.96)``. Alone
it leaves out what changes from one run to the next: a cell has 2 to 4 processes (rounds), too
few to measure their own spread (the bootstrap over two processes is about their range, often
far narrower than the spread), so two runs of the same code were called "slower" on cells
whose processes merely agreed within each run.

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
error; the s_p used per side and device is stated above the table. A ``benchmarks.parquet``
alone is enough: no samples are needed. A/A false-alarm rate: see docs/history.md.

Either side is a ``results/`` folder or a ``benchmarks.parquet`` file, possibly from another
host: its text is data (``numbench.compare.report`` escapes it in the Markdown; the JSON
escapes itself). ``comparison`` gives the ``Comparison`` (below) that the Markdown is worded
from, and ``comparison_json`` its JSON.
Bad input gets a ``CompareError`` (``numbench.stats``, with ``check_margin``) naming the
file and the problem; the command turns it into a message and exit status 2.
``--fail-on-slowdown`` makes the command exit 1 when any cell is slower or broken.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from numbench.cells import KEY
from numbench.contract.conclusions import BROKEN, NOT_COMPARABLE
from numbench.formatting import missing
from numbench.stats import (
    FASTER,
    SAME,
    SLOWER,
    Z95,
    CompareError,
    check_margin,
    typical_sd,
    verdict,
)

# -- what ``numbench compare`` hands its wording: a ``Comparison`` (``comparison`` makes it,
# ``numbench.compare.report`` words it as Markdown), and the words its table and spreads use for
# a cell on one side only and for where a side's spread came from

#: a cell on one side only
ONLY_OLD, ONLY_NEW = "only in old", "only in new"
#: where a side's typical spread between processes came from: its own cells, or the default
SPREAD_MEASURED, SPREAD_DEFAULT = "measured", "default"


@dataclass(frozen=True)
class Comparison:
    """Two result sets compared cell by cell.

    ``table``: one row per cell (``numbench.compare.runs.compare``); ``counts``: cells per
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


#: a cell's key in either side's table (``numbench.cells.KEY``)
CELL = list(KEY)
#: exit status of ``--fail-on-slowdown`` when a cell got slower or broke
EXIT_SLOWER = 1

#: changes the gate counts: ``--fail-on-slowdown`` fails on any of them
REGRESSIONS = (BROKEN, SLOWER)

#: Columns of benchmarks.parquet that say how and on what a cell was measured: a cell whose
#: two sides differ in one of them was not measured alike. ``timing_settings`` and
#: ``replicate_settings`` are compared where the tables carry them.
SETTING_COLUMNS = (
    "library_version",
    "blas",
    "cpu_model",
    "device_name",
    "params",
    "tolerance",
    "allocator",
    "paired_with",
    "lockstep",
    "timing_settings",
    "replicate_settings",
    "operation_hash",
)
#: Columns that describe a side as a whole; with ``SETTING_COLUMNS`` (the library version
#: per library) they make the environment differences printed above the table.
ENVIRONMENT_COLUMNS = ("host", "cpu_model", "cpu_count", "ram_gb", "platform", "python_version")
#: setting columns read per library rather than for the whole side
PER_LIBRARY_COLUMNS = ("library_version", "blas")
#: setting columns read per operation: the hash of its code (``numbench.operations.loading``),
#: shown by its first ``HASH_SHOWN`` digits
PER_OPERATION_COLUMNS = ("operation_hash",)
HASH_SHOWN = 12
#: what the interval of one side's cell is made of
SIDE_COLUMNS = ("median_s", "ci_low_s", "ci_high_s", "process_medians_s", "n_processes")


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


def benchmarks_path(where: str | os.PathLike) -> Path:
    path = Path(where)
    if path.is_dir():
        path = path / "benchmarks.parquet"
        if not path.exists():
            raise CompareError(
                f"{where} has no benchmarks.parquet: is it a numbench results/ folder?"
            )
    elif not path.exists():
        raise CompareError(f"{where} does not exist")
    return path


def load(where: str | os.PathLike) -> pd.DataFrame:
    """A side's benchmarks table, checked for what comparing needs."""
    path = benchmarks_path(where)
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader error: the file is unusable
        raise CompareError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    needed = CELL + ["status", "median_s", "ci_low_s", "ci_high_s"]
    missing_columns = [c for c in needed if c not in df.columns]
    if missing_columns:
        raise CompareError(f"{path} is not a numbench benchmarks table: it lacks {missing_columns}")
    if df.empty:
        raise CompareError(f"{path} holds no cells")
    numeric = ["size", "threads", "median_s", "ci_low_s", "ci_high_s"]
    wrong = [c for c in numeric if not pd.api.types.is_numeric_dtype(df[c])]
    if wrong:
        raise CompareError(f"{path}: the columns {wrong} must hold numbers")
    twice = df[df.duplicated(CELL, keep=False)]
    if not twice.empty:
        first = ", ".join(f"{c}={twice.iloc[0][c]}" for c in CELL)
        raise CompareError(f"{path} holds {len(twice)} rows for repeated cells (first: {first})")
    return df


def _same(a, b) -> bool:
    """Two recorded values agree (two missing values agree too)."""
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b


def _differs(r: dict, columns: list[str]) -> list[str]:
    return [c for c in columns if not _same(r[f"{c}_old"], r[f"{c}_new"])]


def spreads_of(old: pd.DataFrame, new: pd.DataFrame) -> dict[str, dict[str, dict]]:
    """Each side's s_p per device (``process_spread``)."""
    return {"old": process_spread(old), "new": process_spread(new)}


def compare(
    old: pd.DataFrame, new: pd.DataFrame, margin: float, run_to_run: bool = True
) -> pd.DataFrame:
    """One row per cell of either side: its status on each side, ``ratio`` = new / old
    median with its interval, ``change`` (broken, slower, faster, same, not comparable,
    only in old / new), and ``alike`` with ``differs``, the setting columns whose values
    differ between the two sides of the cell. ``ci_floor`` and ``floored``: the run-to-run
    floor of the interval (``ratio_interval``); ``run_to_run=False`` leaves it out (each
    side's own interval alone, the rule before it, kept for contrast)."""
    margin = check_margin(margin, "margin")
    spreads = spreads_of(old, new)
    settings = [c for c in SETTING_COLUMNS if c in old.columns or c in new.columns]
    old = old.reindex(columns=list(dict.fromkeys([*old.columns, *settings, *SIDE_COLUMNS])))
    new = new.reindex(columns=list(dict.fromkeys([*new.columns, *settings, *SIDE_COLUMNS])))
    both = old.merge(new, on=CELL, how="outer", suffixes=("_old", "_new"), indicator=True)
    if not (both["_merge"] == "both").any():
        raise CompareError("the two result sets share no cell: their grids do not overlap")
    rows = []
    for r in both.to_dict("records"):
        row = {c: r[c] for c in CELL}
        row.update(status_old=r["status_old"], status_new=r["status_new"])
        row.update(ratio=None, ci_low=None, ci_high=None, ci_floor=None, floored=None)
        row.update(alike=None, differs=[])
        if r["_merge"] != "both":
            row["change"] = ONLY_OLD if r["_merge"] == "left_only" else ONLY_NEW
            rows.append(row)
            continue
        row["differs"] = _differs(r, settings)
        row["alike"] = not row["differs"]
        if r["status_old"] == "ok" and r["status_new"] != "ok":
            row["change"] = BROKEN
        elif r["status_old"] != "ok" or r["status_new"] != "ok":
            row["change"] = NOT_COMPARABLE
        else:
            o, n = ({k: r.get(f"{k}_{side}") for k in SIDE_COLUMNS} for side in ("old", "new"))
            floors = tuple(
                (spreads[side][r["device"]]["sd"], processes(cell))
                for side, cell in (("old", o), ("new", n))
            )
            got = ratio_interval(o, n, floors if run_to_run else None)
            ratio, lo, hi = got["ratio"], got["ci_low"], got["ci_high"]
            # a speedup of new over old is old / new: above 1 is faster
            speed = verdict(1 / ratio, 1 / hi, 1 / lo, margin) if np.isfinite(lo) else SAME
            row.update(got, change=speed)
            row.update(old_median_s=o["median_s"], new_median_s=n["median_s"])
        rows.append(row)
    out = pd.DataFrame(rows)
    # sorted by change: the broken cells first, then the largest slowdowns, then the largest
    # speedups, then the rest
    rank = {BROKEN: 0, SLOWER: 1, FASTER: 2}
    out["_rank"] = [rank.get(c, 3) for c in out["change"]]
    out["_key"] = [
        -(v or 0) if c == SLOWER else (v or 0) if c == FASTER else 0
        for v, c in zip(out["ratio"], out["change"], strict=True)
    ]
    out = out.sort_values(["_rank", "_key"] + CELL, kind="stable")
    return out.drop(columns=["_rank", "_key"]).reset_index(drop=True)


def counts(table: pd.DataFrame) -> dict[str, int]:
    return {k: int(v) for k, v in table["change"].value_counts().items()}


def regressions(table: pd.DataFrame) -> pd.DataFrame:
    """The cells the gate fails on: broken (``ok`` no more) or slower beyond the margin."""
    return table[table["change"].isin(REGRESSIONS)]


# -- the two environments -----------------------------------------------------------------------
def _values(frame: pd.DataFrame, column: str) -> list[str]:
    if column not in frame:
        return []
    return sorted({str(v) for v in frame[column] if not missing(v) and str(v) != ""})


def environment_differences(old: pd.DataFrame, new: pd.DataFrame) -> list[dict]:
    """What differs between the two sides as a whole, as pyperf's ``compare_to`` prints it:
    one entry per column (per library for versions and BLAS) whose values differ, with
    each side's values."""
    out = []

    def add(what: str, a: list[str], b: list[str]) -> None:
        if a != b:
            out.append({"what": what, "old": a, "new": b})

    for column in ENVIRONMENT_COLUMNS:
        add(column, _values(old, column), _values(new, column))
    for column in PER_LIBRARY_COLUMNS:
        for lib in sorted(set(old["library"]) & set(new["library"])):
            a = _values(old[old["library"] == lib], column)
            b = _values(new[new["library"] == lib], column)
            add(f"{column} ({lib})", a, b)
    for column in PER_OPERATION_COLUMNS:
        for op in sorted(set(old["operation"]) & set(new["operation"])):
            a = [v[:HASH_SHOWN] for v in _values(old[old["operation"] == op], column)]
            b = [v[:HASH_SHOWN] for v in _values(new[new["operation"] == op], column)]
            add(f"{column} ({op})", a, b)
    for column in SETTING_COLUMNS:
        if column not in (*ENVIRONMENT_COLUMNS, *PER_LIBRARY_COLUMNS, *PER_OPERATION_COLUMNS):
            add(column, _values(old, column), _values(new, column))
    return out


# -- output -------------------------------------------------------------------------------------
def _plain(value):
    """A value JSON can hold: NaN and NA are null, numpy scalars Python's."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if missing(value) or (isinstance(value, float | np.floating) and not math.isfinite(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def to_json(
    table: pd.DataFrame,
    margin: float,
    old_name: str,
    new_name: str,
    differences: list[dict],
    spreads: dict[str, dict[str, dict]] | None = None,
) -> str:
    """The same table and differences for a CI job: one JSON document."""
    columns = [*CELL, "status_old", "status_new", "change", "ratio", "ci_low", "ci_high"]
    columns += ["ci_floor", "floored", "old_median_s", "new_median_s", "alike", "differs"]
    cells = [{c: _plain(r.get(c)) for c in columns} for r in table.to_dict("records")]
    document = {
        "old": old_name,
        "new": new_name,
        "margin": margin,
        "counts": counts(table),
        "regressions": len(regressions(table)),
        "environment_differences": differences,
        "process_sd": spreads,
        "run_sd": RUN_SD,
        **overall_ratio(table["ratio"]),
        "cells": cells,
    }
    return json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False)


def comparison(old: str | os.PathLike, new: str | os.PathLike, margin: float) -> Comparison:
    """The two result sets compared, with all their wording needs
    (``numbench.compare.report.markdown``); ``to_json`` writes the same for a CI job."""
    margin = check_margin(margin)
    old_frame, new_frame = load(old), load(new)
    table = compare(old_frame, new_frame, margin)
    return Comparison(
        table=table,
        margin=margin,
        old_name=str(old),
        new_name=str(new),
        counts=counts(table),
        differences=environment_differences(old_frame, new_frame),
        spreads=spreads_of(old_frame, new_frame),
        overall=overall_ratio(table["ratio"]),
        run_sd=RUN_SD,
        min_spread_cells=MIN_SPREAD_CELLS,
    )


def comparison_json(c: Comparison) -> str:
    """``to_json`` of a ``Comparison``."""
    return to_json(c.table, c.margin, c.old_name, c.new_name, c.differences, c.spreads)
