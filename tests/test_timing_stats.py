"""The timer and the statistics, on functions whose cost is known."""

from __future__ import annotations

import time

import numpy as np
import pytest

from numbench.stats import (
    Z95,
    chi2_median,
    median_ci,
    repeat_chance,
    summarize,
    typical_sd,
    verdict,
)
from numbench.timing import Timer, TimingSettings


class FakeClock:
    """A clock that advances only when the timed function runs: exact, repeatable timings."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_fn(clock: FakeClock, cost_s: float, first_extra_s: float = 0.0):
    calls = {"n": 0}

    def fn():
        calls["n"] += 1
        clock.now += cost_s + (first_extra_s if calls["n"] == 1 else 0.0)
        return calls["n"]

    return fn, calls


def test_first_call_is_timed_alone_and_kept_out_of_samples():
    clock = FakeClock()
    fn, _ = make_fn(clock, cost_s=1e-3, first_extra_s=2.0)
    m = Timer(fn, clock=clock).measure(TimingSettings(0.01, 3, 5, 0.05))
    assert m.first_call_s == pytest.approx(2.001)
    assert all(s == pytest.approx(1e-3) for s in m.samples_s)


def test_calibration_reaches_min_sample_time():
    clock = FakeClock()
    fn, _ = make_fn(clock, cost_s=1e-6)
    loops = Timer(fn, clock=clock).calibrate(0.02)
    assert loops * 1e-6 >= 0.02
    assert loops * 1e-6 < 0.02 * 2.5  # not wildly past the target


def test_sampling_stops_at_budget_after_min_samples():
    clock = FakeClock()
    fn, _ = make_fn(clock, cost_s=0.1)
    m = Timer(fn, clock=clock).measure(TimingSettings(0.01, 3, 1000, 0.25))
    # each sample is one 0.1 s call: 0.25 s of budget is spent after 3 samples
    assert len(m.samples_s) == 3
    m = Timer(fn, clock=clock).measure(TimingSettings(0.01, 2, 4, 100.0))
    assert len(m.samples_s) == 4  # max_samples bounds it when the budget is large


def test_sync_is_called_on_every_timed_call():
    clock = FakeClock()
    fn, calls = make_fn(clock, cost_s=1e-3)
    synced = []
    Timer(fn, sync=synced.append, clock=clock).measure(TimingSettings(0.005, 2, 2, 1.0))
    assert len(synced) == calls["n"]


def test_real_clock_measures_a_sleep():
    m = Timer(time.sleep, (0.002,)).measure(TimingSettings(0.004, 3, 3, 0.01))
    assert 0.0019 < np.median(m.samples_s) < 0.01


def test_settings_reject_bad_values():
    with pytest.raises(ValueError):
        TimingSettings(min_sample_time_s=0.01, min_samples=5, max_samples=2, budget_s=1.0)
    with pytest.raises(ValueError):
        TimingSettings(min_sample_time_s=0, min_samples=1, max_samples=2, budget_s=1.0)


def test_summary_statistics():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median_s == 3.0
    assert s.min_s == 1.0
    assert s.iqr_s == pytest.approx(2.0)
    assert s.n_samples == 5
    assert s.ci_low_s <= s.median_s <= s.ci_high_s


def test_median_ci_covers_the_true_median_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = median_ci(rng.normal(10, 1, 20))
    large = median_ci(rng.normal(10, 1, 2000))
    assert small[0] < 10 < small[1]
    assert large[0] < 10 < large[1]
    assert (large[1] - large[0]) < (small[1] - small[0])


def test_summary_of_no_samples_is_empty():
    assert summarize([]).n_samples == 0


@pytest.mark.parametrize(
    "df, median",
    # known values: (Phi^-1(0.75))^2 for 1 df, 2 ln 2 for 2 df, tables for the rest
    [
        (1, 0.454936423119572),
        (2, 1.3862943611198906),
        (3, 2.365973884375338),
        (10, 9.34181776559197),
    ],
)
def test_chi2_median_matches_the_known_values(df, median):
    assert chi2_median(df) == pytest.approx(median, rel=1e-9)


def test_chi2_median_rejects_no_degrees_of_freedom():
    with pytest.raises(ValueError, match="df > 0"):
        chi2_median(0)


def test_typical_sd_recovers_the_spread_of_two_round_cells_where_the_median_sd_does_not():
    """4000 cells of 2 rounds and 4000 of 3, all with a round spread of 3%: the median of the
    standard deviations sees about 0.674 of it from the 2-round cells; typical_sd sees 3%."""
    rng = np.random.default_rng(7)
    two = rng.normal(0.0, 0.03, (4000, 2)).var(axis=1, ddof=1)
    three = rng.normal(0.0, 0.03, (4000, 3)).var(axis=1, ddof=1)
    assert np.median(np.sqrt(two)) == pytest.approx(0.674 * 0.03, rel=0.05)
    assert typical_sd(two, [1] * len(two)) == pytest.approx(0.03, rel=0.04)
    both = typical_sd(np.r_[two, three], [1] * len(two) + [2] * len(three))
    assert both == pytest.approx(0.03, rel=0.04)
    assert typical_sd([], []) == 0.0
    assert typical_sd([float("nan")], [1]) == 0.0


def test_repeat_chance_on_the_margin_far_from_it_and_undefined():
    assert repeat_chance(1.1, 1.05, 1.15, 1.1) == pytest.approx(0.5)  # faster, on the margin
    assert repeat_chance(1 / 1.1, 1 / 1.15, 1 / 1.05, 1.1) == pytest.approx(0.5)  # slower
    assert repeat_chance(2.0, 1.9, 2.1, 1.1) > 0.999
    assert repeat_chance(1.0, 0.97, 1.03, 1.1) > 0.999  # the same speed, well inside
    # nearer the margin, or with a wider interval, a verdict repeats less often
    assert repeat_chance(1.06, 1.03, 1.09, 1.1) > repeat_chance(1.08, 1.05, 1.11, 1.1)
    assert repeat_chance(1.3, 1.25, 1.35, 1.1) > repeat_chance(1.3, 1.1, 1.5, 1.1)
    for bad in ((np.nan, 1.0, 1.2), (1.1, 0.0, 1.2), (1.1, 1.2, 1.0), (1.1, 1.0, np.inf)):
        assert np.isnan(repeat_chance(*bad, 1.1))


def test_repeat_chance_predicts_how_often_a_rerun_repeats_a_verdict():
    """Cells spread over 0.7x to 1.4x, each run with a log error of s and an interval of
    +-Z95 * s: the mean chance A's intervals give is the share of B's verdicts that repeat A's
    (0.87 here; had the rerun's error been left out of the difference, it would read 0.91)."""
    rng = np.random.default_rng(1)
    n, s, margin = 20000, 0.04, 1.1
    mu = rng.uniform(np.log(0.7), np.log(1.4), n)
    a, b = mu + rng.normal(0, s, n), mu + rng.normal(0, s, n)

    def verdicts(x):
        return [verdict(np.exp(v), np.exp(v - Z95 * s), np.exp(v + Z95 * s), margin) for v in x]

    seen = np.mean([va == vb for va, vb in zip(verdicts(a), verdicts(b), strict=True)])
    chance = [repeat_chance(np.exp(v), np.exp(v - Z95 * s), np.exp(v + Z95 * s), margin) for v in a]
    assert 0.8 < seen < 0.95
    assert np.mean(chance) == pytest.approx(seen, abs=0.01)
