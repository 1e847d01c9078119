"""Compare two result sets cell by cell: versions, machines, before and after.

Modelled on ``asv compare`` and ``pyperf compare_to``: for every cell measured ``ok`` on both
sides, the ratio of the medians (new / old, above 1 is slower), its 95% interval, and a
verdict with the same margin rule as the speedups (``numbench.stats.verdict``): *faster*
and *slower* need the interval to exclude 1 **and** the ratio to pass the margin; anything
else is the same speed. Cells present on one side only, or not ``ok`` on one side, are
listed, not dropped.

The interval comes from each side's own two-level interval of its median
(``ci_low_s``/``ci_high_s`` in benchmarks.parquet), read as a normal interval on the log
scale: the log ratio's standard error is the root of the sum of both sides' squares. So a
``benchmarks.parquet`` alone is enough: no samples are needed.

Either side is a ``results/`` folder or a ``benchmarks.parquet`` file. Bad input gets a
``CompareError`` naming the file and the problem; the command turns it into a message and
exit status 2. ``--fail-on-slowdown`` makes the command exit 1 when any cell is slower.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from numbench.formatting import md_table
from numbench.stats import FASTER, SAME, SLOWER, Z95, verdict

CELL = ["library", "device", "operation", "size", "dtype", "threads"]
#: exit status of ``--fail-on-slowdown`` when a cell got slower
EXIT_SLOWER = 1


class CompareError(ValueError):
    """A result set that cannot be compared; the message names it and why."""


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
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise CompareError(f"{path} is not a numbench benchmarks table: it lacks {missing}")
    if df.empty:
        raise CompareError(f"{path} holds no cells")
    return df


def log_se(median: float, lo: float, hi: float) -> float:
    """Standard error of log(median) read from a 95% interval."""
    if not all(np.isfinite(v) and v > 0 for v in (median, lo, hi)):
        return float("nan")
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


def ratio_interval(old: pd.Series, new: pd.Series) -> tuple[float, float, float]:
    """(new / old, ci_low, ci_high) from each side's median and interval."""
    ratio = new["median_s"] / old["median_s"]
    se = math.hypot(
        log_se(old["median_s"], old["ci_low_s"], old["ci_high_s"]),
        log_se(new["median_s"], new["ci_low_s"], new["ci_high_s"]),
    )
    if not np.isfinite(se):
        return ratio, float("nan"), float("nan")
    return ratio, ratio * math.exp(-Z95 * se), ratio * math.exp(Z95 * se)


def compare(old: pd.DataFrame, new: pd.DataFrame, margin: float) -> pd.DataFrame:
    """One row per cell of either side: ``ratio`` = new / old median with its interval, and
    ``change``: faster, same, slower, or why there is no ratio (only in old / new, not ok)."""
    both = old.merge(new, on=CELL, how="outer", suffixes=("_old", "_new"), indicator=True)
    if not (both["_merge"] == "both").any():
        raise CompareError("the two result sets share no cell: their grids do not overlap")
    rows = []
    for r in both.to_dict("records"):
        row = {c: r[c] for c in CELL}
        row.update(ratio=None, ci_low=None, ci_high=None)
        if r["_merge"] != "both":
            row["change"] = "only in old" if r["_merge"] == "left_only" else "only in new"
        elif r["status_old"] != "ok" or r["status_new"] != "ok":
            row["change"] = f"not comparable ({r['status_old']} -> {r['status_new']})"
        else:
            o = {k: r[f"{k}_old"] for k in ("median_s", "ci_low_s", "ci_high_s")}
            n = {k: r[f"{k}_new"] for k in ("median_s", "ci_low_s", "ci_high_s")}
            ratio, lo, hi = ratio_interval(pd.Series(o), pd.Series(n))
            # a speedup of new over old is old / new: above 1 is faster
            speed = verdict(1 / ratio, 1 / hi, 1 / lo, margin) if np.isfinite(lo) else SAME
            row.update(ratio=ratio, ci_low=lo, ci_high=hi, change=speed)
            row.update(old_median_s=o["median_s"], new_median_s=n["median_s"])
        rows.append(row)
    out = pd.DataFrame(rows)
    # sorted by change: the largest slowdowns first, then the largest speedups, then the rest
    out["_key"] = [
        -(v or 0) if c == SLOWER else (1e9 + (v or 0) if c == FASTER else 2e9)
        for v, c in zip(out["ratio"], out["change"], strict=True)
    ]
    return out.sort_values(["_key"] + CELL, kind="stable").drop(columns="_key")


def counts(table: pd.DataFrame) -> dict[str, int]:
    return {k: int(v) for k, v in table["change"].value_counts().items()}


def markdown(table: pd.DataFrame, margin: float, old_name: str, new_name: str) -> str:
    c = counts(table)
    head = (
        f"Comparing {new_name} (new) against {old_name} (old): ratio = new median / old "
        f"median, 95% interval; margin {margin:g}x. "
        f"{c.get(SLOWER, 0)} slower, {c.get(FASTER, 0)} faster, {c.get(SAME, 0)} the same"
    )
    others = {k: v for k, v in c.items() if k not in (SLOWER, FASTER, SAME)}
    head += "".join(f", {v} {k}" for k, v in sorted(others.items())) + "."
    rows = []
    for r in table.itertuples():
        ratio = "" if pd.isna(r.ratio) else f"{r.ratio:.3f}"
        ci = "" if pd.isna(r.ci_low) else f"{r.ci_low:.3f} to {r.ci_high:.3f}"
        cell = [r.library, r.device, r.operation, str(r.size), r.dtype, str(int(r.threads))]
        rows.append([*cell, ratio, ci, r.change])
    header = ["library", "device", "operation", "size", "dtype", "threads", "ratio", "95% CI"]
    header.append("change")
    return head + "\n\n" + md_table(header, rows, "lllrlrrrl") + "\n"


def run(old: str | os.PathLike, new: str | os.PathLike, margin: float) -> tuple[pd.DataFrame, str]:
    table = compare(load(old), load(new), margin)
    return table, markdown(table, margin, str(old), str(new))
