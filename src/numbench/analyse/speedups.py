"""results/speedups.parquet and results/crossovers.parquet: every non-baseline ``ok`` cell
against the baseline, and where each library's speedup curve crosses 1.

speedup = baseline median / library median, for the same host, operation, size, dtype and
threads.

Where the cell ran baseline processes beside its own (``paired``: every cell but the
baseline's, unless the config turns pairing off), both medians come from the cell's own
file, measured round by round seconds apart, and the interval is a paired two-level
bootstrap: the same rounds are drawn for both sides, then the samples within each process.
Otherwise the baseline cell's samples are used and each side's processes are drawn on their
own. ``significant`` is true when the 95% interval excludes 1; ``verdict`` also asks for a
speedup beyond the practical ``margin`` (``numbench.stats.verdict``).

A cell whose baseline did not measure (mismatch, failed, ...) keeps its row with a null
speedup: no claim can be made, and the summary says why.

The round floor. A paired cell has 2 to ``replicates.max`` rounds, most of them 2, too few to measure its own round-to-round
spread: the bootstrap over two rounds is about their range, often far narrower than the
spread itself (docs/history.md, "Reproducibility: fourteen run pairs", pair 2). So no
paired interval is narrower, in log terms, than ``1.96 * s0 / sqrt(n)``: ``s0`` is the
grid's typical round-to-round standard deviation of the log speedup, measured in this run
over the paired cells of one device with 2 or more rounds, ``n`` the cell's rounds. It is
``numbench.stats.typical_sd`` of the cells' round variances: each scaled by the median of
its chi-square law, so that 2-round cells (1 degree of freedom, most of the grid) count at
their true spread. The plain median of the cells' standard deviations, used before, is
0.674 of the spread where every cell has 2 rounds, and its intervals held a second run's
speedup less often than a 95% interval should (docs/history.md, "Reproducibility: fourteen
run pairs"). A cell whose own
rounds spread more keeps its wider bootstrap interval. This is a variance floor in the
spirit of SAM's fudge factor s0 (Tusher, Tibshirani and Chu, 2001) and of limma's moderated
variances: a cell's spread is not believed to be smaller than the grid's typical one on the
evidence of 2 rounds. ``ci_floor`` gives each row's floor
(relative half-width), and ``floored`` whether it widened the interval.

Settled verdicts. ``settled`` is true when the (floored) interval holds neither the margin
nor 1 / margin: wholly faster, wholly slower or wholly the same speed, so the verdict would
change only if the speedup moved beyond its interval. A verdict that is not settled is in
doubt, and a second run may well give the other one: it is the same test the stopping rule
asks of a paired cell before it stops adding rounds (``numbench.measure.replicates``).
``repeat_chance`` puts a figure on it: the chance that a rerun gives the same verdict, from
the interval (``numbench.stats.repeat_chance``); the sum over the rows is the number of
verdicts a rerun is expected to repeat, which the summary states.

The crossovers (results/crossovers.parquet): the size from which a library beats the
baseline, read off its speedups. One row per (library, device, operation, dtype, threads, host), from that group's speedups.

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

* ``settled`` is true when every size's verdict is settled (above): no interval
  holds the margin or 1 / margin, so the kind would change only if a speedup moved beyond its
  interval. A kind that rests on a verdict in doubt is not settled.

The crossovers are the speedups read along the size axis, by the verdicts decided here, so
both live in one module; each is still its own table, written by its own rule.
"""

from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa

from numbench.cells import CURVE, KEY_WITH_HOST, SORT
from numbench.contract import (
    BASELINE,
    CROSSOVERS_SCHEMA,
    MEASURED,
    SPEEDUPS_SCHEMA,
    write_atomic,
)
from numbench.contract.conclusions import check_baseline, in_doubt  # noqa: F401 - re-exported
from numbench.stats import (
    Z95,
    ratio_ci,
    repeat_chance,
    round_variance,
    typical_sd,
    verdict,
    verdict_settled,
)

CELL_KEY = list(KEY_WITH_HOST)


def is_significant(ci_low: float, ci_high: float) -> bool:
    """True when the interval lies wholly above or wholly below 1."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return False
    return bool(ci_low > 1.0 or ci_high < 1.0)


def cell_seed(key: tuple) -> int:
    """A stable seed per cell, so the same samples always give the same interval."""
    return zlib.crc32("/".join(map(str, key)).encode())


def group_samples(samples: pd.DataFrame) -> dict[tuple, dict[str, list[np.ndarray]]]:
    """cell key -> role -> samples per replicate process (in replicate order)."""
    out: dict[tuple, dict[str, list[np.ndarray]]] = {}
    if samples.empty:
        return out
    samples = samples.sort_values(CELL_KEY + ["role", "replicate"], kind="stable")
    for key, part in samples.groupby(CELL_KEY + ["role", "replicate"], sort=False):
        cell = tuple(key[:-2])
        cell = (*cell[:3], int(cell[3]), cell[4], int(cell[5]), *cell[6:])
        out.setdefault(cell, {}).setdefault(key[-2], []).append(part["seconds"].to_numpy())
    return out


def round_floor(spreads: list[tuple[float, int]]) -> float:
    """s0: the typical round-to-round standard deviation of the log speedup, from each
    cell's (variance of its rounds' log ratios, rounds - 1); 0 when no cell has 2 rounds.
    ``numbench.stats.typical_sd``: the median of standard deviations would understate it,
    most cells having 2 rounds."""
    return typical_sd([v for v, _ in spreads], [d for _, d in spreads])


def floored(
    point: float, lo: float, hi: float, s0: float, rounds: int
) -> tuple[float, float, float]:
    """(ci_low, ci_high, floor): the interval widened, where narrower, to
    ``point * exp(+-1.96 * s0 / sqrt(rounds))``; ``floor`` is that relative half-width."""
    if not (np.isfinite(point) and point > 0 and rounds > 0 and s0 > 0):
        return lo, hi, 0.0
    h = Z95 * s0 / np.sqrt(rounds)
    return min(lo, point * np.exp(-h)), max(hi, point * np.exp(h)), float(np.expm1(h))


def floor_spread(floor: float | None, rounds: int) -> float | None:
    """The round spread ``s0`` that a speedup row's ``ci_floor`` was made with: ``floored``'s
    floor, ``expm1(1.96 * s0 / sqrt(rounds))``, inverted; None for no floor."""
    if floor is None or not math.isfinite(floor) or floor <= 0 or rounds < 1:
        return None
    return math.log1p(floor) * math.sqrt(rounds) / Z95


def compute_speedups(
    benchmarks: pd.DataFrame,
    samples: pd.DataFrame,
    baseline_library: str,
    baseline_device: str,
    margin: float,
) -> pd.DataFrame:
    """One row per non-baseline ``ok`` cell of ``benchmarks``, in SPEEDUPS_SCHEMA order."""
    groups = group_samples(samples)
    ok = benchmarks[benchmarks["status"] == "ok"]
    is_base = (ok["library"] == baseline_library) & (ok["device"] == baseline_device)
    unstable = {
        (*k[:3], int(k[3]), k[4], int(k[5]), k[6]): bool(u)
        for *k, u in zip(*(ok[c] for c in CELL_KEY), ok["unstable"].fillna(False), strict=True)
    }
    measured = []
    spreads: dict[str, list[tuple[float, int]]] = {}
    for r in ok[~is_base].itertuples(index=False):
        key = (r.library, r.device, r.operation, int(r.size), r.dtype, int(r.threads), r.host)
        base_key = (baseline_library, baseline_device, *key[2:])
        own = groups.get(key, {})
        paired = bool(own.get(BASELINE)) and len(own[BASELINE]) == len(own.get(MEASURED, []))
        base = own[BASELINE] if paired else groups.get(base_key, {}).get(MEASURED)
        lib = own.get(MEASURED)
        if not lib or not base or (not paired and base_key not in unstable):
            point = lo = hi = float("nan")
        else:
            point, lo, hi = ratio_ci(base, lib, paired=paired, seed=cell_seed(key))
        if paired and np.isfinite(point) and len(lib) >= 2:
            spreads.setdefault(r.device, []).append(round_variance(base, lib))
        measured.append((r, key, base_key, paired, point, lo, hi, len(lib or [])))
    s0 = {device: round_floor(v) for device, v in spreads.items()}
    rows = []
    for r, key, base_key, paired, point, lo, hi, rounds in measured:
        # the floor is the paired rounds' (an unpaired interval draws each side on its own)
        new_lo, new_hi, floor = floored(
            point, lo, hi, s0.get(r.device, 0.0) if paired else 0.0, rounds
        )
        widened = bool(new_lo < lo or new_hi > hi)
        lo, hi = new_lo, new_hi
        chance = repeat_chance(point, lo, hi, margin)
        rows.append(
            {
                "library": r.library,
                "device": r.device,
                "operation": r.operation,
                "size": int(r.size),
                "dtype": r.dtype,
                "threads": int(r.threads),
                "host": r.host,
                "baseline_library": baseline_library,
                "baseline_device": baseline_device,
                "speedup": None if np.isnan(point) else point,
                "speedup_ci_low": None if np.isnan(lo) else lo,
                "speedup_ci_high": None if np.isnan(hi) else hi,
                "significant": is_significant(lo, hi),
                "verdict": verdict(point, lo, hi, margin),
                "margin": margin,
                "paired": paired,
                "unstable": unstable.get(key, False) or unstable.get(base_key, False),
                "ci_floor": floor,
                "floored": widened,
                "settled": verdict_settled(point, lo, hi, margin, 0.0),
                "repeat_chance": None if np.isnan(chance) else chance,
            }
        )
    table = pa.Table.from_pylist(rows, schema=SPEEDUPS_SCHEMA)
    return table.to_pandas().sort_values(list(SORT), kind="stable")


def write_speedups(
    benchmarks: str | os.PathLike,
    samples: str | os.PathLike,
    output: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
    margin: float,
) -> pd.DataFrame:
    result = compute_speedups(
        pd.read_parquet(benchmarks),
        pd.read_parquet(samples),
        baseline_library,
        baseline_device,
        margin,
    )
    write_atomic(pa.Table.from_pandas(result, schema=SPEEDUPS_SCHEMA, preserve_index=False), output)
    return result


# -- the crossovers -----------------------------------------------------------------------------
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
