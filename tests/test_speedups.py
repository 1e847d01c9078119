"""Speedups against the baseline and their bootstrap confidence intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import samples_frame

from numbench.analyse.speedups import compute_speedups, is_significant
from numbench.contract import SPEEDUPS_SCHEMA
from numbench.stats import ratio_ci, repeat_chance

MARGIN = 1.1


def speedup_ci(base, lib, seed=0):
    """One process on each side, unpaired: the one-level interval of the ratio."""
    return ratio_ci([base], [lib], paired=False, seed=seed)


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
        "threads": 1,
        "host": host,
        "status": status,
        "unstable": False,
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
    out = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN)
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
    again = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN)
    pd.testing.assert_frame_equal(out, again)


def test_a_cell_without_a_usable_baseline_has_a_null_speedup():
    bench = pd.DataFrame(
        [bench_row("numpy", "sort", 10, status="failed"), bench_row("torch", "sort", 10)]
    )
    samples = {("torch", "cpu", "sort", 10, "float64", "h1"): noisy(1e-5, 10, 1)}
    out = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN)
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
    out = compute_speedups(bench, samples_frame(samples), "torch", "cpu", MARGIN)
    # jax on host a against torch on host a; nothing to compare torch on b with
    assert len(out) == 1
    row = out.iloc[0]
    assert (row["library"], row["host"], row["baseline_library"]) == ("jax", "a", "torch")
    assert row["speedup"] == pytest.approx(0.5, rel=0.05)


def test_paired_rounds_cancel_what_both_sides_shared():
    """Drift: each round of a paired cell ran on a machine of another speed (x1, x1.5, x0.7,
    x1.3), hitting both sides of the round alike. Paired, the ratio's interval stays tight
    around the true 2x; unpaired, the same samples give a much wider interval."""
    rng = np.random.default_rng(3)
    slow = [1.0, 1.5, 0.7, 1.3]
    base = [2e-3 * f * np.exp(rng.normal(0, 0.01, 15)) for f in slow]
    lib = [1e-3 * f * np.exp(rng.normal(0, 0.01, 15)) for f in slow]
    point, lo, hi = ratio_ci(base, lib, paired=True, seed=1)
    _, ulo, uhi = ratio_ci(base, lib, paired=False, seed=1)
    assert 1.9 < lo <= point <= hi < 2.1
    assert (uhi - ulo) > 5 * (hi - lo)


def test_a_paired_cell_takes_its_own_baseline_processes():
    key = ("torch", "cpu", "fft", 10, "float64", "h1")
    base_key = ("numpy", "cpu", "fft", 10, "float64", "h1")
    bench = pd.DataFrame([bench_row("numpy", "fft", 10), bench_row("torch", "fft", 10)])
    # the baseline cell was measured on a slow minute (3x); the pairs beside torch were not
    samples = {base_key: [noisy(3e-5, 10, 1)], key: [noisy(5e-6, 10, 2), noisy(5e-6, 10, 3)]}
    paired = {key: [noisy(1e-5, 10, 4), noisy(1e-5, 10, 5)]}
    out = compute_speedups(bench, samples_frame(samples, paired), "numpy", "cpu", MARGIN)
    row = out.iloc[0]
    assert bool(row["paired"]) and row["speedup"] == pytest.approx(2.0, rel=0.05)
    unpaired = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN).iloc[0]
    assert not bool(unpaired["paired"]) and unpaired["speedup"] == pytest.approx(6.0, rel=0.05)


@pytest.mark.parametrize(
    "ratio, lo, hi, expected",
    [
        (1.5, 1.3, 1.7, "faster"),
        (1.05, 1.02, 1.08, "same"),  # significant, but within the margin
        (1.2, 0.95, 1.5, "same"),  # beyond the margin, but the interval holds 1
        (0.5, 0.4, 0.6, "slower"),
        (0.95, 0.93, 0.97, "same"),
        (float("nan"), 1.0, 2.0, "same"),
    ],
)
def test_verdict_needs_the_interval_and_the_margin(ratio, lo, hi, expected):
    from numbench.stats import verdict

    assert verdict(ratio, lo, hi, MARGIN) == expected


def test_speedups_carry_the_verdict_and_the_margin():
    bench = pd.DataFrame([bench_row("numpy", "fft", 10), bench_row("torch", "fft", 10)])
    samples = {
        ("numpy", "cpu", "fft", 10, "float64", "h1"): noisy(1.05e-5, 30, 1),
        ("torch", "cpu", "fft", 10, "float64", "h1"): noisy(1e-5, 30, 2),
    }
    out = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN).iloc[0]
    assert out["margin"] == MARGIN and out["verdict"] == "same"
    strict = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", 1.0).iloc[0]
    assert strict["verdict"] == ("faster" if strict["speedup_ci_low"] > 1 else "same")


def _flat(median: float, seed: int, n: int = 12) -> np.ndarray:
    return median * np.exp(np.random.default_rng(seed).normal(0.0, 0.001, n))


def test_the_round_floor_widens_intervals_narrower_than_the_grids_round_spread():
    """Three paired cells of two rounds: one whose rounds agree exactly (its bootstrap is far
    narrower than the grid's round-to-round spread), one spreading as the grid typically does
    (2.0x and 2.2x), and one far more (2x and 4x). The first is floored to the typical spread;
    the last keeps its own, wider interval; an unpaired speedup is never floored."""
    rounds = {10: (2.0, 2.0), 100: (2.0, 2.2), 1000: (2.0, 4.0)}
    bench = [bench_row("numpy", "sort", n) for n in rounds]
    bench += [bench_row("torch", "sort", n) for n in rounds]
    samples, paired = {}, {}
    for i, (n, ratios) in enumerate(rounds.items()):
        key = ("torch", "cpu", "sort", n, "float64", "h1")
        samples[key] = [_flat(1e-3, 10 * i + r) for r in range(2)]
        paired[key] = [_flat(1e-3 * q, 10 * i + r + 5) for r, q in enumerate(ratios)]
        samples[("numpy", "cpu", "sort", n, "float64", "h1")] = [_flat(2e-3, 99 + i)]
    out = compute_speedups(
        pd.DataFrame(bench), samples_frame(samples, paired), "numpy", "cpu", MARGIN
    ).set_index("size")
    # the middle of the three cells' round variances, scaled by the median of chi-square
    # with 1 degree of freedom (0.4549): a 1-df variance is that fraction of the spread's
    s0 = np.std(np.log([2.0, 2.2]), ddof=1) / np.sqrt(0.454936423119572)
    floor = np.expm1(1.959963984540054 * s0 / np.sqrt(2))
    assert out["ci_floor"].to_numpy() == pytest.approx([floor] * 3, rel=0.01)  # 0.1% noise
    agreeing = out.loc[10]
    assert bool(agreeing["floored"])
    got = agreeing["ci_floor"]
    assert agreeing["speedup_ci_high"] / agreeing["speedup"] == pytest.approx(1 + got)
    assert agreeing["speedup"] / agreeing["speedup_ci_low"] == pytest.approx(1 + got)
    wide = out.loc[1000]
    assert not bool(wide["floored"]) and wide["speedup_ci_high"] / wide["speedup"] > 1 + floor
    unpaired = compute_speedups(
        pd.DataFrame(bench), samples_frame(samples), "numpy", "cpu", MARGIN
    ).set_index("size")
    assert (unpaired["ci_floor"] == 0).all() and not unpaired["floored"].any()


def test_settled_says_whether_the_interval_holds_the_margin():
    """Twice as fast and a tight interval: settled. The same speed, with an interval well
    inside 1 / margin to margin: settled too. A speedup of 1.1 whose interval holds the margin
    1.1: in doubt, whatever its verdict. A cell without a baseline has no speedup: not settled."""
    ratios = {10: 2.0, 100: 1.0, 1000: 1.1}
    bench = [bench_row("numpy", "fft", n) for n in ratios] + [
        bench_row("torch", "fft", n) for n in ratios
    ]
    bench.append(bench_row("torch", "fft", 10_000))
    samples = {}
    for i, (n, ratio) in enumerate(ratios.items()):
        samples[("numpy", "cpu", "fft", n, "float64", "h1")] = noisy(1e-3 * ratio, 40, i)
        samples[("torch", "cpu", "fft", n, "float64", "h1")] = noisy(1e-3, 40, i + 50)
    samples[("torch", "cpu", "fft", 10_000, "float64", "h1")] = noisy(1e-3, 40, 99)
    out = compute_speedups(pd.DataFrame(bench), samples_frame(samples), "numpy", "cpu", MARGIN)
    out = out.set_index("size")
    assert out.loc[10, "verdict"] == "faster" and bool(out.loc[10, "settled"])
    assert out.loc[100, "verdict"] == "same" and bool(out.loc[100, "settled"])
    at_margin = out.loc[1000]
    assert at_margin["speedup_ci_low"] <= MARGIN <= at_margin["speedup_ci_high"]
    assert not bool(at_margin["settled"])
    assert np.isnan(out.loc[10_000, "speedup"]) and not bool(out.loc[10_000, "settled"])
    # the chance to repeat: near 1 far from the margin, near a half on it, null without one
    for n in (10, 100, 1000):
        row = out.loc[n]
        expected = repeat_chance(
            row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"], MARGIN
        )
        assert row["repeat_chance"] == pytest.approx(expected)
    assert out.loc[10, "repeat_chance"] > 0.99 and out.loc[100, "repeat_chance"] > 0.99
    assert 0.2 < out.loc[1000, "repeat_chance"] < 0.8
    assert np.isnan(out.loc[10_000, "repeat_chance"])
