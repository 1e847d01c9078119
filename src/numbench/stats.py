"""Summary statistics of a cell's samples, with a bootstrap confidence interval of the median."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


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

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(0 if seed is None else seed)


def bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` resamples (with replacement) of ``samples``."""
    idx = rng.integers(0, samples.size, size=(resamples, samples.size))
    return np.median(samples[idx], axis=1)


def median_ci(
    samples, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the median."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size == 1:
        return float(x[0]), float(x[0])
    meds = bootstrap_medians(x, resamples, _rng(seed))
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def summarize(samples, seed: int = 0) -> Summary:
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        nan = float("nan")
        return Summary(nan, nan, nan, nan, nan, nan, nan, 0)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    lo, hi = median_ci(x, seed=seed)
    return Summary(
        median_s=float(med),
        iqr_s=float(q3 - q1),
        min_s=float(x.min()),
        mean_s=float(x.mean()),
        std_s=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        ci_low_s=lo,
        ci_high_s=hi,
        n_samples=int(x.size),
    )
