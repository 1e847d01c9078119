"""A run with no other programs is called quiet only when the machine was steady too: the
sentinel's middle spread (``numbench.machine.contract.UNSTEADY_SENTINEL_SPREAD``) and the
share of unstable cells (``UNSTABLE_RUN_FRACTION``) decide it, in ``numbench.machine.analyse``;
``numbench.machine.report`` words it. Every table here is made by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from summarise import through_table

from numbench.cells import KEY_WITH_HOST
from numbench.contract.facts import Findings
from numbench.machine.analyse import machine_quality
from numbench.machine.report import machine_line


def cells(sentinel_ms: list[float], unstable: int = 0, other: float = 0.01) -> pd.DataFrame:
    """One ok NumPy sort cell per sentinel time (ms), others taking ``other`` of the CPUs,
    the first ``unstable`` cells unstable."""
    n = len(sentinel_ms)
    return pd.DataFrame(
        {
            "library": "numpy",
            "device": "cpu",
            "operation": "sort",
            "size": [1000 * (i + 1) for i in range(n)],
            "dtype": "float64",
            "threads": 1,
            "host": "h",
            "status": "ok",
            "unstable": [i < unstable for i in range(n)],
            "other_cpu_share": other,
            "steal_share": 0.0,
            "sentinel_s": [ms / 1000 for ms in sentinel_ms],
        }
    )


#: no speedups: every cell is NumPy's own (the verdicts are not what these tests are about)
NO_SPEEDUPS = pd.DataFrame(
    {c: pd.Series([], dtype=object) for c in KEY_WITH_HOST}
    | {"speedup": pd.Series([], dtype=float)}
)
#: ten cells at 10 ms, ten at 17 ms: 1.70x between the 10th and 90th percentile cells
MOVED = [10.0] * 10 + [17.0] * 10


def test_a_machine_whose_speed_moved_1_7x_with_no_other_programs_is_not_called_quiet():
    m = machine_quality(cells(MOVED, unstable=9), NO_SPEEDUPS)
    assert m.quiet is True  # no other programs: the old rule's answer stands beside it
    assert m.sentinel_middle_spread == pytest.approx(1.7)
    assert m.speed_moved is True and m.mostly_unstable is False and m.unsteady
    line = machine_line(m)
    assert "Quiet machine" not in line
    assert line.startswith(
        "**Unsteady machine**: no other programs took the CPUs, but the machine's own speed "
        "moved 1.70x during the run"
    )
    assert "9 of 20 cells unstable" in line and "verdicts stay in doubt" in line


def test_a_steady_machine_with_no_other_programs_is_still_quiet():
    steady = [10.0, 10.1, 10.2, 10.3, 10.4] * 4  # 1.04x at most
    m = machine_quality(cells(steady, unstable=2), NO_SPEEDUPS)
    assert m.speed_moved is False and not m.unsteady
    assert machine_line(m).startswith("**Quiet machine**")


def test_the_middle_spread_leaves_out_a_single_slow_cell():
    """One cell's sentinel through a hiccup sets slowest over fastest alone, not the middle."""
    one_slow = [10.0] * 19 + [30.0]
    m = machine_quality(cells(one_slow), NO_SPEEDUPS)
    assert m.sentinel_spread == pytest.approx(3.0)
    assert m.sentinel_middle_spread == pytest.approx(1.0)
    assert m.speed_moved is False
    assert machine_line(m).startswith("**Quiet machine**")


def test_the_threshold_s_edge_1_2x_is_steady_and_just_past_it_is_not():
    at_edge = machine_quality(cells([10.0] * 10 + [12.0] * 10), NO_SPEEDUPS)
    assert at_edge.sentinel_middle_spread == pytest.approx(1.2)
    assert at_edge.speed_moved is False
    past = machine_quality(cells([10.0] * 10 + [12.01] * 10), NO_SPEEDUPS)
    assert past.sentinel_middle_spread == pytest.approx(1.201)
    assert past.speed_moved is True
    assert machine_line(past).startswith("**Unsteady machine**")


def test_most_cells_unstable_is_unsteady_even_on_a_steady_sentinel():
    steady = [10.0] * 20
    assert machine_quality(cells(steady, unstable=10), NO_SPEEDUPS).mostly_unstable is False
    m = machine_quality(cells(steady, unstable=11), NO_SPEEDUPS)
    assert m.mostly_unstable is True and m.speed_moved is False
    line = machine_line(m)
    assert line.startswith("**Unsteady machine**: no other programs took the CPUs, but most")
    assert "(11 of 20, past 50%" in line and "moved" not in line.split(". What")[0]


def test_a_busy_run_stays_busy_whatever_its_sentinel():
    m = machine_quality(cells(MOVED, other=0.5), NO_SPEEDUPS)
    assert m.quiet is False and m.speed_moved is True
    assert machine_line(m).startswith("**Busy machine**")


def test_an_unwatched_unsteady_run_says_both():
    bench = cells(MOVED).drop(columns=["other_cpu_share", "steal_share"])
    line = machine_line(machine_quality(bench, NO_SPEEDUPS))
    assert line.startswith("**Unsteady machine**: other programs were not watched")


def test_the_steadiness_survives_the_findings_table():
    m = machine_quality(cells(MOVED, unstable=15), NO_SPEEDUPS)
    findings = Findings("numpy", "cpu", 1.1, False, None, (), (), (), (), (), machine=m)
    again = through_table(findings).machine
    assert again == m and again.speed_moved is True and again.mostly_unstable is True
