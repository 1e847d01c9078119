"""results/crossovers.parquet: the size from which a library beats the baseline.

One row per (library, device, operation, dtype, threads, host), from that group's speedups.

How noise is handled (the rule the tests pin down):

* Each size is read through its verdict (``numbench.stats.verdict``). It is **faster** when
  the whole speedup interval lies above 1 and the speedup reaches the margin, **slower**
  likewise below, and a **tie** otherwise (a 1.03x is a tie, whatever its interval).
* Ties neither make nor break a claim: the kind is decided by the faster and slower sizes only,
  in size order.

  - fewer than two sizes with a speedup, or no size other than ties: ``insufficient``
  - only faster sizes (ties allowed anywhere): ``always_faster``
  - only slower sizes (ties allowed anywhere): ``never_faster``
  - slower sizes, then faster sizes, never slower again: ``crosses``
  - a faster size followed later by a slower size: ``crosses_back``

* For ``crosses``, the crossover lies between the last slower size and the first faster size
  after it. Inside that range, the crossover is the last place where the point speedup rises
  through 1 (so it stays above 1 from there on), interpolated on log-log axes between the two
  bracketing sizes (``below_size``, ``above_size``). ``ci_low`` and ``ci_high`` are the same
  construction applied to the upper and to the lower bound of the speedup interval: where the
  optimistic and the pessimistic speedup curves rise through 1. Every other kind has null
  sizes: it is reported in words, never as a number.

* ``settled`` is true when every size's verdict is settled (``numbench.analyse.speedups``): no interval
  holds the margin or 1 / margin, so the kind would change only if a speedup moved beyond its
  interval. A kind that rests on a verdict in doubt is not settled.
"""

from __future__ import annotations

import math
import os

import pandas as pd
import pyarrow as pa

from numbench.cells import CURVE
from numbench.contract import CROSSOVERS_SCHEMA, write_atomic

GROUP_COLUMNS = list(CURVE)
FASTER, SLOWER, TIE = "faster", "slower", "tie"


#: A size's state is its speedup's verdict (interval *and* margin): "same" is a tie.
VERDICT_STATES = {"faster": FASTER, "slower": SLOWER, "same": TIE}


def log_crossing(n1: float, s1: float, n2: float, s2: float) -> float:
    """The size where the line through (log n1, log s1), (log n2, log s2) meets log s = 0."""
    l1, l2 = math.log(s1), math.log(s2)
    if l1 == l2:
        return math.sqrt(n1 * n2)
    t = -l1 / (l2 - l1)
    return math.exp(math.log(n1) + t * (math.log(n2) - math.log(n1)))


def last_rise(sizes: list[int], values: list[float], start: int, stop: int) -> tuple[int, float]:
    """In ``sizes[start..stop]``, the last adjacent pair (i, i+1) where ``values`` rise from
    <= 1 to > 1, and the log-log crossing there. If none does (a bound of the interval can sit
    above 1 throughout), the range's own ends bracket it: the crossing is clamped to them."""
    for i in range(stop - 1, start - 1, -1):
        if values[i] <= 1.0 < values[i + 1]:
            return i, log_crossing(sizes[i], values[i], sizes[i + 1], values[i + 1])
    if values[stop] <= 1.0:  # never rises above 1 within the range: the range's upper end
        return stop - 1, float(sizes[stop])
    return start, float(sizes[start])  # above 1 throughout: the range's lower end


def classify(group: pd.DataFrame) -> dict:
    """The crossover row of one (library, device, operation, dtype, threads, host) group."""
    g = group.dropna(subset=["speedup", "speedup_ci_low", "speedup_ci_high"])
    g = g[g["speedup"] > 0].sort_values("size")
    out = {
        "crossover_size": None,
        "kind": "insufficient",
        "ci_low": None,
        "ci_high": None,
        "below_size": None,
        "above_size": None,
        # speedups from before the column: unknown
        "settled": bool(len(g) and g["settled"].astype(bool).all()) if "settled" in g else None,
    }
    if len(g) < 2:
        return out
    sizes = [int(s) for s in g["size"]]
    point = [float(v) for v in g["speedup"]]
    lo = [float(v) for v in g["speedup_ci_low"]]
    hi = [float(v) for v in g["speedup_ci_high"]]
    states = [VERDICT_STATES[v] for v in g["verdict"]]
    decided = [(i, s) for i, s in enumerate(states) if s != TIE]
    if not decided:
        return out
    kinds = [s for _, s in decided]
    if all(s == FASTER for s in kinds):
        out["kind"] = "always_faster"
        return out
    if all(s == SLOWER for s in kinds):
        out["kind"] = "never_faster"
        return out
    first_faster = kinds.index(FASTER)
    if SLOWER in kinds[first_faster:]:
        out["kind"] = "crosses_back"
        return out
    start = decided[first_faster - 1][0]  # the last slower size
    stop = decided[first_faster][0]  # the first faster size after it
    i, crossing = last_rise(sizes, point, start, stop)
    _, optimistic = last_rise(sizes, hi, start, stop)
    _, pessimistic = last_rise(sizes, lo, start, stop)
    out.update(
        kind="crosses",
        crossover_size=crossing,
        ci_low=min(optimistic, pessimistic, crossing),
        ci_high=max(optimistic, pessimistic, crossing),
        below_size=sizes[i],
        above_size=sizes[i + 1],
    )
    return out


def find_crossovers(speedups: pd.DataFrame) -> pd.DataFrame:
    """One row per (library, device, operation, dtype, threads, host) of ``speedups``."""
    rows = []
    for key, group in speedups.groupby(GROUP_COLUMNS, sort=True, dropna=False):
        row = dict(zip(GROUP_COLUMNS, key, strict=True))
        row["baseline_library"] = group["baseline_library"].iloc[0]
        row["baseline_device"] = group["baseline_device"].iloc[0]
        row.update(classify(group))
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=CROSSOVERS_SCHEMA)
    return table.to_pandas()


def write_crossovers(speedups: str | os.PathLike, output: str | os.PathLike) -> pd.DataFrame:
    result = find_crossovers(pd.read_parquet(speedups))
    write_atomic(
        pa.Table.from_pandas(result, schema=CROSSOVERS_SCHEMA, preserve_index=False), output
    )
    return result
