"""Speedups against the baseline and their bootstrap confidence intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from numbench.speedups import compute_speedups, is_significant, speedup_ci
from numbench.tables import SPEEDUPS_SCHEMA


def noisy(median: float, n: int, seed: int) -> np.ndarray:
    """Timing-like samples: a median with 3% log-normal noise."""
    return median * np.exp(np.random.default_rng(seed).normal(0.0, 0.03, n))


@pytest.mark.parametrize("seed", range(5))
def test_equal_distributions_give_a_ci_containing_one(seed):
    base, lib = noisy(1e-3, 30, seed), noisy(1e-3, 30, seed + 100)
    point, lo, hi = speedup_ci(base, lib, seed=seed)
    assert lo <= 1.0 <= hi
    assert lo <= point <= hi
    assert not is_significant(lo, hi)


def test_identical_samples_give_a_ci_around_one():
    x = noisy(2e-3, 20, 7)
    point, lo, hi = speedup_ci(x, x)
    assert point == pytest.approx(1.0)
    assert lo < 1.0 < hi


@pytest.mark.parametrize("seed", range(5))
def test_a_twofold_shift_gives_a_ci_excluding_one(seed):
    base, lib = noisy(2e-3, 30, seed), noisy(1e-3, 30, seed + 100)
    point, lo, hi = speedup_ci(base, lib, seed=seed)
    assert point == pytest.approx(2.0, rel=0.05)
    assert 1.0 < lo < point < hi
    assert is_significant(lo, hi)
    # and the other way round: twice as slow
    point, lo, hi = speedup_ci(lib, base, seed=seed)
    assert hi < 1.0 and is_significant(lo, hi)


def test_ci_widens_with_noise():
    quiet = speedup_ci(noisy(1e-3, 30, 1), noisy(1e-3, 30, 2))
    loud_base = 1e-3 * np.exp(np.random.default_rng(1).normal(0.0, 0.3, 30))
    loud_lib = 1e-3 * np.exp(np.random.default_rng(2).normal(0.0, 0.3, 30))
    loud = speedup_ci(loud_base, loud_lib)
    assert loud[2] - loud[1] > 3 * (quiet[2] - quiet[1])


def test_is_significant_needs_finite_bounds():
    assert not is_significant(float("nan"), 2.0)
    assert is_significant(1.01, 1.5) and is_significant(0.5, 0.99)
    assert not is_significant(0.9, 1.1)


def bench_row(library, operation, size, status="ok", device="cpu", host="h1"):
    return {
        "library": library,
        "device": device,
        "operation": operation,
        "size": size,
        "dtype": "float64",
        "host": host,
        "status": status,
    }


def test_compute_speedups_pairs_cells_with_their_baseline():
    rows = [
        bench_row("numpy", "fft", 10),
        bench_row("numpy", "fft", 100),
        bench_row("torch", "fft", 10),
        bench_row("torch", "fft", 100),
        bench_row("jax", "fft", 10, status="mismatch"),
        bench_row("jax", "fft", 100),
    ]
    bench = pd.DataFrame(rows)
    samples = {
        ("numpy", "cpu", "fft", 10, "float64", "h1"): noisy(1e-5, 20, 1),
        ("numpy", "cpu", "fft", 100, "float64", "h1"): noisy(3e-4, 20, 2),
        ("torch", "cpu", "fft", 10, "float64", "h1"): noisy(2e-5, 20, 3),
        ("torch", "cpu", "fft", 100, "float64", "h1"): noisy(1e-4, 20, 4),
        ("jax", "cpu", "fft", 10, "float64", "h1"): noisy(1e-6, 20, 5),
        ("jax", "cpu", "fft", 100, "float64", "h1"): noisy(1e-4, 20, 6),
    }
    out = compute_speedups(bench, samples, "numpy", "cpu")
    assert list(out.columns) == SPEEDUPS_SCHEMA.names
    # one row per non-baseline ok cell: the mismatch and the baseline cells are not there
    assert sorted(zip(out["library"], out["size"], strict=True)) == [
        ("jax", 100),
        ("torch", 10),
        ("torch", 100),
    ]
    torch = out[out["library"] == "torch"].set_index("size")
    assert torch.loc[10, "speedup"] == pytest.approx(0.5, rel=0.05)
    assert torch.loc[100, "speedup"] == pytest.approx(3.0, rel=0.05)
    assert torch["significant"].all()
    assert (out["baseline_library"] == "numpy").all()
    # the same inputs give the same intervals (seeded per cell)
    again = compute_speedups(bench, samples, "numpy", "cpu")
    pd.testing.assert_frame_equal(out, again)


def test_a_cell_without_a_usable_baseline_has_a_null_speedup():
    bench = pd.DataFrame(
        [bench_row("numpy", "sort", 10, status="failed"), bench_row("torch", "sort", 10)]
    )
    samples = {("torch", "cpu", "sort", 10, "float64", "h1"): noisy(1e-5, 10, 1)}
    out = compute_speedups(bench, samples, "numpy", "cpu")
    assert len(out) == 1
    assert pd.isna(out["speedup"].iloc[0]) and not out["significant"].iloc[0]


def test_baseline_is_matched_on_host_and_configurable():
    bench = pd.DataFrame(
        [
            bench_row("torch", "matmul", 8, host="a"),
            bench_row("torch", "matmul", 8, host="b"),
            bench_row("jax", "matmul", 8, host="a"),
        ]
    )
    samples = {
        ("torch", "cpu", "matmul", 8, "float64", "a"): noisy(1e-3, 10, 1),
        ("torch", "cpu", "matmul", 8, "float64", "b"): noisy(5e-4, 10, 2),
        ("jax", "cpu", "matmul", 8, "float64", "a"): noisy(2e-3, 10, 3),
    }
    out = compute_speedups(bench, samples, "torch", "cpu")
    # jax on host a against torch on host a; nothing to compare torch on b with
    assert len(out) == 1
    row = out.iloc[0]
    assert (row["library"], row["host"], row["baseline_library"]) == ("jax", "a", "torch")
    assert row["speedup"] == pytest.approx(0.5, rel=0.05)
