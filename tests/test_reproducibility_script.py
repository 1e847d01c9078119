"""benchmarks/reproducibility.py's figures on constructed samples (the script itself runs the
default grid twice, far too long for a test)."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from reproducibility import baseline_spread  # noqa: E402


def samples(process_scale: list[float], sample_scale: float, rng) -> pd.DataFrame:
    rows = []
    for replicate, level in enumerate(process_scale):
        for role in ("baseline", "measured"):
            for x in np.exp(np.log(1e-3 * level) + sample_scale * rng.standard_normal(40)):
                rows.append(
                    dict(
                        library="torch",
                        device="cpu",
                        operation="sort",
                        size=1000,
                        dtype="float64",
                        threads=1,
                        role=role,
                        replicate=replicate,
                        seconds=float(x),
                    )
                )
    return pd.DataFrame(rows)


def test_baseline_spread_tells_processes_from_samples():
    rng = np.random.default_rng(3)
    # four rounds whose processes ran at 1.0, 1.2, 0.9 and 1.1 of one speed, 1% within each
    between, within = baseline_spread(samples([1.0, 1.2, 0.9, 1.1], 0.01, rng))
    assert abs(between - np.std(np.log([1.0, 1.2, 0.9, 1.1]), ddof=1)) < 0.01
    assert 0.008 < within < 0.012
    # identical processes: between is down to what the samples leave in their medians
    between, within = baseline_spread(samples([1.0, 1.0, 1.0, 1.0], 0.01, rng))
    assert between < 0.005 and 0.008 < within < 0.012


def test_baseline_spread_without_paired_processes_is_nan():
    rng = np.random.default_rng(4)
    unpaired = samples([1.0, 1.1], 0.01, rng)
    unpaired = unpaired[unpaired["role"] == "measured"]
    assert all(np.isnan(baseline_spread(unpaired)))
