"""The crossover finder on constructed speedup curves: every kind, and noise."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from numbench.analyse.speedups import find_crossovers, log_crossing
from numbench.contract import CROSSOVERS_SCHEMA, SPEEDUPS_SCHEMA
from numbench.stats import verdict

SIZES = [10, 100, 1000, 10_000, 100_000]
#: a small margin, so these curves test the kinds; the margin has its own test below
MARGIN = 1.01


def curve(points, sizes=SIZES, half_width=0.05, library="torch", operation="fft", margin=MARGIN):
    """Speedup rows for one group; ``points`` are speedups, or (speedup, low, high)."""
    rows = []
    for size, p in zip(sizes, points, strict=True):
        s, lo, hi = p if isinstance(p, tuple) else (p, p * (1 - half_width), p * (1 + half_width))
        rows.append(
            {
                "library": library,
                "device": "cpu",
                "operation": operation,
                "size": size,
                "dtype": "float64",
                "threads": 1,
                "host": "h",
                "baseline_library": "numpy",
                "baseline_device": "cpu",
                "speedup": s,
                "speedup_ci_low": lo,
                "speedup_ci_high": hi,
                "significant": lo > 1 or hi < 1,
                "verdict": verdict(s, lo, hi, margin),
                "margin": margin,
                "paired": True,
                "unstable": False,
            }
        )
    return pd.DataFrame(rows)


def one(points, **kw) -> dict:
    out = find_crossovers(curve(points, **kw))
    assert len(out) == 1
    return out.iloc[0].to_dict()


def test_log_crossing_is_linear_on_log_log_axes():
    # speedup 0.5 at 100 and 2 at 10_000: a straight line in log-log crosses 1 at 1000
    assert log_crossing(100, 0.5, 10_000, 2.0) == pytest.approx(1000.0)
    # 0.5 at 10 and 4 at 1000: log s rises by log 8 over two decades, 1/3 of the way
    assert log_crossing(10, 0.5, 1000, 4.0) == pytest.approx(10 ** (1 + 2 / 3))


def test_crosses():
    row = one([0.2, 0.5, 2.0, 3.0, 4.0])
    assert row["kind"] == "crosses"
    assert (row["below_size"], row["above_size"]) == (100, 1000)
    assert row["crossover_size"] == pytest.approx(log_crossing(100, 0.5, 1000, 2.0))
    assert row["ci_low"] < row["crossover_size"] < row["ci_high"]
    assert 100 <= row["ci_low"] and row["ci_high"] <= 1000


def test_crossover_ci_comes_from_the_speedup_bounds():
    # the optimistic bound crosses 1 earlier, the pessimistic one later
    row = one([(0.5, 0.4, 0.8), (2.0, 1.25, 4.0), 3.0, 3.0, 3.0])
    assert row["kind"] == "crosses"
    assert row["ci_low"] == pytest.approx(log_crossing(10, 0.8, 100, 4.0))
    assert row["ci_high"] == pytest.approx(log_crossing(10, 0.4, 100, 1.25))
    assert row["crossover_size"] == pytest.approx(log_crossing(10, 0.5, 100, 2.0))


def test_always_faster():
    row = one([1.5, 2.0, 3.0, 3.0, 5.0])
    assert row["kind"] == "always_faster"
    assert pd.isna(row["crossover_size"]) and pd.isna(row["below_size"])


def test_never_faster():
    row = one([0.9, 0.5, 0.3, 0.2, 0.1])
    assert row["kind"] == "never_faster"
    assert pd.isna(row["crossover_size"]) and pd.isna(row["ci_low"])


def test_crosses_back():
    row = one([0.5, 2.0, 3.0, 0.5, 0.4])
    assert row["kind"] == "crosses_back"
    assert pd.isna(row["crossover_size"])


def test_insufficient_with_one_size():
    row = one([3.0], sizes=[100])
    assert row["kind"] == "insufficient"
    assert pd.isna(row["crossover_size"])


def test_insufficient_when_every_size_is_a_tie():
    # point estimates wander across 1 but no interval excludes it: nothing can be claimed
    row = one(
        [(0.95, 0.8, 1.1), (1.05, 0.9, 1.2), (0.97, 0.85, 1.1), (1.02, 0.9, 1.15), (1.0, 0.9, 1.1)]
    )
    assert row["kind"] == "insufficient"


def test_insufficient_when_sizes_lack_a_speedup():
    row = one([2.0, float("nan"), float("nan"), float("nan"), float("nan")])
    assert row["kind"] == "insufficient"


def test_noise_before_the_crossing_does_not_move_it():
    # a tie at 100 whose point estimate is above 1 and a tie at 1000 below 1: the real rise
    # is between 1000 and 10_000, not the spurious one between 10 and 100
    row = one([0.5, (1.04, 0.9, 1.2), (0.97, 0.85, 1.1), 2.0, 3.0])
    assert row["kind"] == "crosses"
    assert (row["below_size"], row["above_size"]) == (1000, 10_000)
    assert 1000 < row["crossover_size"] < 10_000


def test_a_tie_after_the_crossing_is_not_a_crossing_back():
    # the last size's point estimate dips under 1 but its interval contains 1
    row = one([0.5, 0.6, 2.0, 2.5, (0.98, 0.7, 1.3)])
    assert row["kind"] == "crosses"
    assert (row["below_size"], row["above_size"]) == (100, 1000)


def test_ties_do_not_spoil_always_or_never():
    assert one([(1.02, 0.9, 1.15), 1.5, 2.0, 2.0, 2.0])["kind"] == "always_faster"
    assert one([0.5, 0.5, (0.99, 0.8, 1.2), 0.5, 0.5])["kind"] == "never_faster"


def test_a_significant_dip_after_the_crossing_is_a_crossing_back():
    row = one([0.5, 2.0, 2.0, (0.9, 0.85, 0.95), 2.0])
    assert row["kind"] == "crosses_back"


def test_groups_are_kept_apart_and_the_schema_is_kept():
    df = pd.concat(
        [
            curve([0.2, 0.5, 2.0, 3.0, 4.0], library="torch"),
            curve([2.0, 2.0, 2.0, 2.0, 2.0], library="jax"),
            curve([0.5, 0.5, 0.5, 0.5, 0.5], library="torch", operation="sort"),
        ]
    )
    out = find_crossovers(df)
    assert list(out.columns) == CROSSOVERS_SCHEMA.names
    kinds = {(r.library, r.operation): r.kind for r in out.itertuples()}
    assert kinds == {
        ("jax", "fft"): "always_faster",
        ("torch", "fft"): "crosses",
        ("torch", "sort"): "never_faster",
    }


def test_no_speedups_give_no_rows():
    out = find_crossovers(SPEEDUPS_SCHEMA.empty_table().to_pandas())
    assert out.empty and list(out.columns) == CROSSOVERS_SCHEMA.names


def test_sizes_are_sorted_before_classifying():
    df = curve([0.2, 0.5, 2.0, 3.0, 4.0]).iloc[::-1]
    row = find_crossovers(df).iloc[0]
    assert row["kind"] == "crosses" and row["below_size"] == 100
    assert math.isfinite(row["crossover_size"])


def test_a_speedup_within_the_margin_is_a_tie_for_the_kind():
    """1.05x with a tight interval is significant but within a 1.1 margin: a tie, so the
    curve below has no faster size and is never_faster, not crosses."""
    pts = [(0.5, 0.48, 0.52), (0.8, 0.78, 0.82), (1.05, 1.04, 1.06), (1.06, 1.05, 1.07)]
    sizes = SIZES[:4]
    assert one(pts, sizes=sizes, margin=1.1)["kind"] == "never_faster"
    assert one(pts, sizes=sizes, margin=1.01)["kind"] == "crosses"


def test_a_kind_is_settled_only_when_every_verdict_it_rests_on_is():
    frame = curve([0.5, 0.6, 1.5, 2.0, 3.0], margin=1.1)
    frame["settled"] = True
    settled = find_crossovers(frame).iloc[0]
    assert settled["kind"] == "crosses" and bool(settled["settled"])
    frame.loc[frame["size"] == 1000, "settled"] = False  # one interval holds the margin
    in_doubt = find_crossovers(frame).iloc[0]
    assert in_doubt["kind"] == "crosses" and not bool(in_doubt["settled"])
    # speedups from before the column: not known either way
    assert find_crossovers(curve([0.5, 2.0, 3.0, 3.0, 3.0]))["settled"].isna().all()
