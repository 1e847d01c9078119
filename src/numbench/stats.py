"""Statistics of a cell's samples, taken in several fresh processes.

A cell's samples come in groups, one group per worker process. Processes of the same cell
differ (allocator state, memory layout, JIT code placement, the machine's drift), often by
more than the samples inside one process do, so an interval from the pooled samples alone is
far too narrow. The intervals here are a two-level bootstrap (Kalibera and Jones, "Rigorous
Benchmarking in Reasonable Time", ISMM 2013): each resample draws the processes with
replacement, then the samples within each drawn process with replacement, and takes the
median of everything drawn. When the processes agree, this is about as wide as the one-level
interval of the pooled samples; when they disagree (a bimodal cell), it widens to cover them.

The statistic is the median of the pooled samples; each process contributes its own samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
#: the normal quantile of a two-sided 95% interval
Z95 = 1.959963984540054
#: A cell is *unstable* when its process medians spread (max / min) by more than this...
UNSTABLE_MIN_SPREAD = 1.10
#: ... and by more than this many times the processes' own relative IQR (their noise).
UNSTABLE_NOISE_FACTOR = 3.0


def as_groups(groups) -> list[np.ndarray]:
    """Finite samples of each process; processes without any are dropped."""
    out = []
    for g in groups:
        x = np.asarray(g, dtype=float)
        x = x[np.isfinite(x)]
        if x.size:
            out.append(x)
    return out


def _padded(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(samples padded with NaN into one row per process, sample count per process)."""
    counts = np.array([g.size for g in groups])
    table = np.full((len(groups), counts.max()), np.nan)
    for i, g in enumerate(groups):
        table[i, : g.size] = g
    return table, counts


def bootstrap_draws(
    groups: list[np.ndarray], resamples: int, rng: np.random.Generator, chosen: np.ndarray
) -> np.ndarray:
    """The pooled samples of each resample, NaN-padded: shape (resamples, processes * max n).

    ``chosen[b, j]`` is the process drawn in slot j of resample b (the first level); within
    each drawn process its own number of samples is drawn with replacement (the second).
    """
    table, counts = _padded(groups)
    width = table.shape[1]
    n = counts[chosen]  # (resamples, slots)
    u = rng.random((resamples, chosen.shape[1], width))
    idx = np.floor(u * n[..., None]).astype(int)
    drawn = table[chosen[..., None], idx]
    drawn[np.arange(width)[None, None, :] >= n[..., None]] = np.nan
    return drawn.reshape(resamples, -1)


def choose_processes(n_processes: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, n_processes, size=(resamples, n_processes))


def two_level_medians(groups, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` two-level resamples of ``groups`` (one array per process)."""
    groups = as_groups(groups)
    chosen = choose_processes(len(groups), resamples, rng)
    return np.nanmedian(bootstrap_draws(groups, resamples, rng, chosen), axis=1)


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def median_ci(
    groups, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Two-level percentile bootstrap interval of the pooled median of ``groups``."""
    groups = as_groups(groups)
    if not groups:
        return float("nan"), float("nan")
    pooled = np.concatenate(groups)
    if pooled.size == 1:
        return float(pooled[0]), float(pooled[0])
    meds = two_level_medians(groups, resamples, np.random.default_rng(seed))
    return percentile_interval(meds, confidence)


@dataclass(frozen=True)
class Summary:
    median_s: float
    iqr_s: float
    min_s: float
    mean_s: float
    std_s: float
    ci_low_s: float
    ci_high_s: float
    n_samples: int
    #: worker processes the samples came from
    n_processes: int
    #: max / min of the per-process medians (1 with one process)
    process_spread: float
    #: the processes disagree far beyond their own spread (see ``is_unstable``)
    unstable: bool
    #: the per-process medians, as JSON (seconds)
    process_medians_s: str

    def as_dict(self) -> dict[str, float | int | bool | str]:
        return asdict(self)


def is_unstable(groups: list[np.ndarray]) -> tuple[float, bool]:
    """(spread, unstable): the spread of the process medians (max / min), and whether it
    exceeds both ``UNSTABLE_MIN_SPREAD`` and ``UNSTABLE_NOISE_FACTOR`` times the processes'
    own median relative IQR. One process cannot disagree with itself."""
    if len(groups) < 2:
        return 1.0, False
    medians = np.array([np.median(g) for g in groups])
    if medians.min() <= 0:
        return float("inf"), True
    spread = float(medians.max() / medians.min())
    noise = float(
        np.median([(np.subtract(*np.quantile(g, [0.75, 0.25]))) / np.median(g) for g in groups])
    )
    return spread, bool(
        spread > UNSTABLE_MIN_SPREAD and spread - 1.0 > UNSTABLE_NOISE_FACTOR * noise
    )


def summarize(groups, seed: int = 0) -> Summary:
    """Statistics of a cell's samples given per process (a flat list is one process)."""
    if len(groups) and np.ndim(groups[0]) == 0:
        groups = [groups]
    groups = as_groups(groups)
    if not groups:
        nan = float("nan")
        return Summary(nan, nan, nan, nan, nan, nan, nan, 0, 0, nan, False, "[]")
    x = np.concatenate(groups)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    lo, hi = median_ci(groups, seed=seed)
    spread, unstable = is_unstable(groups)
    medians = [float(np.median(g)) for g in groups]
    return Summary(
        median_s=float(med),
        iqr_s=float(q3 - q1),
        min_s=float(x.min()),
        mean_s=float(x.mean()),
        std_s=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        ci_low_s=lo,
        ci_high_s=hi,
        n_samples=int(x.size),
        n_processes=len(groups),
        process_spread=spread,
        unstable=unstable,
        process_medians_s="[" + ", ".join(f"{m:.6g}" for m in medians) + "]",
    )


def ratio_ci(
    numerator,
    denominator,
    paired: bool,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(ratio, ci_low, ci_high) of ``median(numerator) / median(denominator)``, each given as
    samples per process, with a two-level bootstrap interval.

    ``paired``: process i of one side was measured beside process i of the other (seconds
    apart, in the same job): the same processes are drawn on both sides, so what the two
    shared (a slow minute of the machine) cancels in the ratio. Otherwise each side's
    processes are drawn on their own.
    """
    num, den = as_groups(numerator), as_groups(denominator)
    if not num or not den:
        return float("nan"), float("nan"), float("nan")
    point = float(np.median(np.concatenate(num)) / np.median(np.concatenate(den)))
    rng = np.random.default_rng(seed)
    if paired and len(num) == len(den):
        chosen = choose_processes(len(num), resamples, rng)
        top = np.nanmedian(bootstrap_draws(num, resamples, rng, chosen), axis=1)
        bottom = np.nanmedian(bootstrap_draws(den, resamples, rng, chosen), axis=1)
    else:
        top = two_level_medians(num, resamples, rng)
        bottom = two_level_medians(den, resamples, rng)
    lo, hi = percentile_interval(top / bottom, confidence)
    return point, lo, hi


def chi2_median(df: float) -> float:
    """The median of the chi-square distribution with ``df`` degrees of freedom (df > 0).

    Solved from the regularized lower incomplete gamma function P(df/2, x/2) = 1/2 by
    bisection, with its power series (no SciPy needed where the aggregate runs)."""
    if not df > 0:
        raise ValueError(f"need df > 0, got {df}")
    a = df / 2.0

    def lower(x: float) -> float:  # P(a, x)
        term = total = 1.0 / a
        n = 0
        while term > 1e-17 * total:
            n += 1
            term *= x / (a + n)
            total += term
        return total * np.exp(-x + a * np.log(x) - math.lgamma(a))

    lo, hi = 0.0, max(2.0 * a, 1.0)
    while lower(hi) < 0.5:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if lower(mid) < 0.5:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * hi:
            break
    return 2.0 * (lo + hi) / 2.0


def round_log_ratios(base: Sequence, lib: Sequence) -> np.ndarray:
    """log(median baseline / median library) of each paired round: the samples of the
    rounds' baseline processes and of their library processes, in round order."""
    return np.array([np.log(np.median(b) / np.median(x)) for b, x in zip(base, lib, strict=True)])


def round_variance(base: Sequence, lib: Sequence) -> tuple[float, int]:
    """The variance of the paired rounds' log ratios (``round_log_ratios``) and its degrees
    of freedom, rounds - 1: one cell's term of ``typical_sd``."""
    ratios = round_log_ratios(base, lib)
    return float(np.var(ratios, ddof=1)), len(ratios) - 1


def typical_sd(variances: Sequence[float], dfs: Sequence[int]) -> float:
    """The typical standard deviation behind many small-sample variances (0 if none).

    Each ``s2`` over ``df`` degrees of freedom, when the true variance is sigma^2, is
    sigma^2 * chi2(df) / df, whose median is sigma^2 * chi2_median(df) / df. Dividing each by
    that factor gives terms whose median is sigma^2 whatever their df, so the square root of
    the median of the scaled terms estimates sigma. The plain median of standard deviations
    does not: from 2 rounds (1 df) it is 0.674 sigma, a third too small."""
    kept = [(float(v), d) for v, d in zip(variances, dfs, strict=True) if d > 0 and np.isfinite(v)]
    scale = {d: chi2_median(d) / d for d in {d for _, d in kept}}  # a few dfs, many cells
    terms = [v / scale[d] for v, d in kept]
    return float(np.sqrt(np.median(terms))) if terms else 0.0


def relative_half_width(point: float, lo: float, hi: float) -> float:
    """Half the interval's width relative to its point (inf when undefined)."""
    if not (np.isfinite(point) and np.isfinite(lo) and np.isfinite(hi)) or point <= 0:
        return float("inf")
    return (hi - lo) / 2.0 / point


FASTER, SAME, SLOWER = "faster", "same", "slower"
#: the margin is a factor: 1 is "any significant change", below 1 means nothing
MIN_MARGIN = 1.0


class CompareError(ValueError):
    """A result set that cannot be compared; the message names it and why."""


def check_margin(margin: float, name: str = "--margin") -> float:
    """``margin`` as a float, if it is a finite number of at least ``MIN_MARGIN``."""
    try:
        value = float(margin)
    except (TypeError, ValueError):
        raise CompareError(f"{name} = {margin!r} is not a number") from None
    if not math.isfinite(value) or value < MIN_MARGIN:
        raise CompareError(f"{name} = {margin} must be a finite number >= {MIN_MARGIN:g}")
    return value


def verdict(ratio: float, ci_low: float, ci_high: float, margin: float) -> str:
    """``faster``, ``same`` or ``slower`` for a ratio where above 1 is faster.

    Faster needs both: an interval wholly above 1 (statistical) and a ratio of at least
    ``margin`` (practical, as asv's ``compare --factor``); slower likewise below 1 and at most
    1 / margin. Anything else, a 1.03x whatever its interval included, is the same speed.
    """
    if not all(np.isfinite(v) for v in (ratio, ci_low, ci_high)):
        return SAME
    if ci_low > 1.0 and ratio >= margin:
        return FASTER
    if ci_high < 1.0 and ratio <= 1.0 / margin:
        return SLOWER
    return SAME


def verdict_settled(point: float, lo: float, hi: float, margin: float, floor: float) -> bool:
    """True when every speedup in the interval ``(lo, hi)``, widened to at least
    ``point * exp(+-floor)``, gives the same verdict: it holds neither ``margin`` nor
    ``1 / margin`` (wholly faster, wholly slower, or wholly the same speed)."""
    if not all(math.isfinite(v) for v in (point, lo, hi)) or point <= 0:
        return False
    lo, hi = min(lo, point * math.exp(-floor)), max(hi, point * math.exp(floor))
    return not any(lo <= edge <= hi for edge in (margin, 1.0 / margin))


def could_settle(point: float, rounds: int, round_sd: float, margin: float) -> bool:
    """Whether ``rounds`` rounds could settle a verdict whose speedup is ``point``: the
    narrowest interval they can show about it, ``point * exp(+-1.96 * round_sd /
    sqrt(rounds))``, holds neither ``margin`` nor ``1 / margin`` (``verdict_settled``).
    Where even that interval holds one, no number of rounds up to ``rounds`` settles the
    verdict unless the point itself moves by more than that floor. True for a point that is
    not finite (nothing is known yet)."""
    if not math.isfinite(point) or point <= 0:
        return True
    return verdict_settled(point, point, point, margin, Z95 * round_sd / math.sqrt(rounds))


def repeat_chance(ratio: float, ci_low: float, ci_high: float, margin: float) -> float:
    """The chance that a rerun gives this ratio's ``verdict`` again, judged from its own
    interval (NaN where the interval is not finite and positive).

    The interval gives the standard error of the log ratio, s = log(high / low) / (2 * Z95).
    A rerun's log ratio differs from this one's by about N(0, 2 s^2) (both carry an error
    of s); with an interval of the same width, it is faster where it reaches both log
    ``margin`` and Z95 * s (its interval then clears 1), slower at minus that, the same
    speed between. A ratio on the margin repeats half the time whatever its interval; one
    far from both edges, almost always."""
    if not all(math.isfinite(v) and v > 0 for v in (ratio, ci_low, ci_high)) or ci_high <= ci_low:
        return float("nan")
    s = math.log(ci_high / ci_low) / (2 * Z95)
    edge = max(math.log(margin), Z95 * s)
    x, spread = math.log(ratio), math.sqrt(2.0) * s

    def below(t: float) -> float:  # P(rerun's log ratio < t)
        return 0.5 * math.erfc(-(t - x) / (spread * math.sqrt(2.0)))

    slower, faster = below(-edge), 1.0 - below(edge)
    return {FASTER: faster, SLOWER: slower, SAME: 1.0 - faster - slower}[
        verdict(ratio, ci_low, ci_high, margin)
    ]
