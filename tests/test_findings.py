"""The summary's findings as data: which typed facts the tables give, before any wording."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from conftest import MARGIN, constructed_results

from numbench.analyse.findings import crossover, decide, fastest_at
from numbench.contract.facts import (
    BusyCell,
    Crossover,
    DoubtfulVerdict,
    Firmness,
    LargestSlowdown,
    LargestSpeedup,
    NoBaseline,
    NoisyCell,
    NotMeasured,
    Tie,
    Timed,
    UnmeasuredCell,
    Winner,
)
from numbench.report.sentences import firmness_line


@pytest.fixture(scope="module")
def findings():
    return decide(*constructed_results(), "numpy", "cpu", MARGIN)


def cells(*rows) -> pd.DataFrame:
    """ok cells of fft at n = 1000: (library, median, CI low, CI high)."""
    return pd.DataFrame(
        [
            {
                "library": lib,
                "device": "cpu",
                "operation": "fft",
                "size": 1000,
                "status": "ok",
                "median_s": median,
                "ci_low_s": low,
                "ci_high_s": high,
            }
            for lib, median, low, high in rows
        ]
    )


def test_a_runner_up_within_the_winners_noise_is_a_tie():
    fact = fastest_at(cells(("numpy", 1.0, 0.9, 1.1), ("jax", 1.05, 1.0, 1.2)), "fft", 1000, MARGIN)
    assert fact == Tie("fft", 1000, Timed("numpy", "cpu", 1.0), (Timed("jax", "cpu", 1.05),))


def test_a_clear_winner_is_a_winner_with_its_lead():
    fact = fastest_at(cells(("jax", 2.0, 1.9, 2.1), ("numpy", 1.0, 0.9, 1.1)), "fft", 1000, MARGIN)
    assert isinstance(fact, Winner)
    assert fact.fastest.library == "numpy" and fact.runner_up.library == "jax"
    assert fact.lead == pytest.approx(2.0)
    alone = fastest_at(cells(("numpy", 1.0, 0.9, 1.1)), "fft", 1000, MARGIN)
    assert alone == Winner("fft", 1000, Timed("numpy", "cpu", 1.0))
    assert fastest_at(cells(("numpy", 1.0, 0.9, 1.1)), "fft", 10, MARGIN) == NotMeasured("fft", 10)


def test_fastest_per_operation_at_both_ends(findings):
    by_end = {(f.operation, f.size): f for f in findings.fastest}
    assert list(by_end) == [("fft", 1000), ("fft", 100_000), ("sort", 1000), ("sort", 100_000)]
    assert by_end[("fft", 1000)].fastest.library == "jax"
    assert by_end[("fft", 100_000)].fastest.library == "torch"


def test_crossovers_are_crossover_facts_with_their_kind(findings):
    assert all(isinstance(c, Crossover) for c in findings.crossovers)
    # clear claims first: crosses, always_faster, then never_faster
    kinds = [(c.library, c.operation, c.kind) for c in findings.crossovers]
    assert kinds == [
        ("torch", "fft", "crosses"),
        ("jax", "fft", "always_faster"),
        ("torch", "sort", "never_faster"),
    ]
    crosses = findings.crossovers[0]
    assert (crosses.below_size, crosses.above_size) == (1000, 10_000)
    assert crosses.ci_low <= crosses.crossover_size <= crosses.ci_high
    assert 3000 <= crosses.crossover_size <= 3300  # 10^3.5 = 3,162
    assert [p.size for p in crosses.points] == [1000, 10_000, 100_000]
    assert crosses.last.speedup == pytest.approx(4.0, rel=0.03)
    never = findings.crossovers[2]
    assert never.crossover_size is None and never.slower == (1000, 10_000, 100_000)


def test_a_crossing_back_names_the_size_where_it_falls_behind():
    from test_crossovers import curve

    from numbench.analyse.speedups import find_crossovers

    speedups = curve([2.0, (1.0, 0.9, 1.1), 0.5, 3.0], sizes=[10, 100, 1000, 10_000])
    fact = crossover(next(find_crossovers(speedups).itertuples()), speedups)
    assert fact.kind == "crosses_back"
    assert (fact.faster, fact.slower, fact.tied) == ((10, 10_000), (1000,), (100,))
    assert fact.back_size == 1000
    assert fact.crossover_size is None


def test_largest_speedups_and_slowdowns(findings):
    assert findings.speedups and all(isinstance(s, LargestSpeedup) for s in findings.speedups)
    first = findings.speedups[0]
    assert (first.library, first.operation, first.size) == ("torch", "fft", 100_000)
    assert first.ci_low < first.speedup < first.ci_high
    values = [s.speedup for s in findings.speedups]
    assert values == sorted(values, reverse=True) and min(values) > 1
    assert findings.slowdowns and all(isinstance(s, LargestSlowdown) for s in findings.slowdowns)
    assert max(s.speedup for s in findings.slowdowns) < 1


def test_warnings_are_facts_with_their_reason(findings):
    noisy = [w for w in findings.warnings if isinstance(w, NoisyCell)]
    assert [(w.library, w.operation, w.size) for w in noisy] == [("numpy", "sort", 100_000)]
    assert noisy[0].iqr_s > 0.1 * noisy[0].median_s
    bad = [w for w in findings.warnings if isinstance(w, UnmeasuredCell)]
    assert UnmeasuredCell("mismatch", "jax", "cpu", "sort", 10_000, "rel_error 1e-3 > 1e-10") in bad
    assert (
        UnmeasuredCell("unsupported", "jax", "cpu", "sort", 1000, "jax has no stable sort here")
        in bad
    )
    assert not [w for w in findings.warnings if isinstance(w, NoBaseline)]


def test_a_speedup_without_its_baseline_cell_is_a_no_baseline_warning():
    bench, speedups, crossovers = constructed_results()
    speedups = speedups.copy()
    gap = (speedups["operation"] == "fft") & (speedups["size"] == 1000)
    speedups.loc[gap, ["speedup", "speedup_ci_low", "speedup_ci_high"]] = float("nan")
    speedups.loc[gap, "significant"] = False
    found = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    orphans = [w for w in found.warnings if isinstance(w, NoBaseline)]
    assert sorted((w.library, w.size) for w in orphans) == [("jax", 1000), ("torch", 1000)]


def test_a_cell_measured_on_a_busy_machine_is_a_busy_warning():
    bench, speedups, crossovers = constructed_results()
    assert not [w for w in decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).warnings
                if isinstance(w, BusyCell)]  # fmt: skip
    bench = bench.copy()
    bench["cpu_taken"], bench["set_aside"] = 0.02, 0
    busy = (bench["library"] == "torch") & (bench["operation"] == "sort") & (bench["size"] == 1000)
    bench.loc[busy, ["cpu_taken", "set_aside"]] = [0.45, 4]
    bench.loc[(bench["library"] == "jax") & (bench["size"] == 1000), "cpu_taken"] = 0.1  # at
    found = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert [w for w in found.warnings if isinstance(w, BusyCell)] == [
        BusyCell("torch", "cpu", "sort", 1000, 0.45, 4)
    ]


def test_the_baseline_given_is_used_even_without_speedups():
    bench, speedups, crossovers = constructed_results()
    found = decide(bench, speedups.iloc[0:0], crossovers.iloc[0:0], "torch", "gpu", MARGIN)
    assert (found.baseline_library, found.baseline_device) == ("torch", "gpu")
    assert found.speedups == () and found.slowdowns == () and found.crossovers == ()


def test_tables_computed_against_another_baseline_are_refused():
    with pytest.raises(ValueError, match="computed against numpy on cpu, not the baseline"):
        decide(*constructed_results(), "numpy", "gpu", MARGIN)


def test_gpu_notice_facts():
    assert decide(*constructed_results(), "numpy", "cpu", MARGIN).gpu_notice is None
    none_found = decide(*constructed_results(gpu="unavailable"), "numpy", "cpu", MARGIN).gpu_notice
    assert none_found.none_found and none_found.gpu_cells == 6
    assert none_found.hosts == ("testhost",) and none_found.cpu_baseline == "numpy"
    (torch,) = none_found.skipped
    assert (torch.library, torch.count, torch.reason) == ("torch", 6, "no CUDA device found")
    assert torch.sizes == (("fft", (1000, 10_000, 100_000)), ("sort", (1000, 10_000, 100_000)))
    gaps = decide(*constructed_results(gpu="ok"), "numpy", "cpu", MARGIN).gpu_notice
    assert not gaps.none_found and gaps.skipped_cells == 5 and gaps.gpu_cells == 6


def test_facts_are_frozen(findings):
    with pytest.raises(dataclasses.FrozenInstanceError):
        findings.crossovers[0].kind = "never_faster"
    with pytest.raises(dataclasses.FrozenInstanceError):
        findings.baseline_library = "jax"


def test_a_speedup_whose_interval_holds_the_margin_is_a_doubtful_verdict(findings):
    assert not [w for w in findings.warnings if isinstance(w, DoubtfulVerdict)]
    bench, speedups, crossovers = constructed_results()
    speedups = speedups.copy()
    doubt = (speedups["library"] == "torch") & (speedups["size"] == 10_000)
    speedups.loc[doubt & (speedups["operation"] == "fft"), "settled"] = False
    found = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    [w] = [w for w in found.warnings if isinstance(w, DoubtfulVerdict)]
    row = speedups[doubt & (speedups["operation"] == "fft")].iloc[0]
    assert (w.library, w.operation, w.size, w.verdict, w.margin) == (
        "torch",
        "fft",
        10_000,
        "faster",
        MARGIN,
    )
    assert (w.speedup, w.ci_low, w.ci_high) == (
        row["speedup"],
        row["speedup_ci_low"],
        row["speedup_ci_high"],
    )
    # speedups from before the column say nothing either way
    old = decide(bench, speedups.drop(columns="settled"), crossovers, "numpy", "cpu", MARGIN)
    assert not [w for w in old.warnings if isinstance(w, DoubtfulVerdict)]


def test_firmness_counts_settled_verdicts_and_sums_their_chances_to_repeat():
    bench, speedups, crossovers = constructed_results()
    speedups = speedups.copy()
    measured = speedups["speedup"].notna()
    speedups["repeat_chance"] = np.where(measured, 0.9, np.nan)
    speedups.loc[measured & (speedups["library"] == "torch"), "settled"] = False
    f = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).firmness
    torch = int((measured & (speedups["library"] == "torch")).sum())
    assert f == Firmness(
        int(measured.sum()), int(measured.sum()) - torch, pytest.approx(0.9 * measured.sum())
    )
    assert torch > 0
    # from before repeat_chance: the settled count alone; from before settled: nothing
    old = decide(bench, speedups.drop(columns="repeat_chance"), crossovers, "numpy", "cpu", MARGIN)
    assert old.firmness.expected is None and old.firmness.settled == f.settled
    older = speedups.drop(columns=["repeat_chance", "settled"])
    assert decide(bench, older, crossovers, "numpy", "cpu", MARGIN).firmness is None


def test_firmness_counts_the_doubtful_verdicts_whose_cell_stopped_before_max_in_vain():
    """Of the torch verdicts, all made in doubt: 1.04 at 2 of 4 rounds with round_sd 0.08
    (4 rounds' floor 0.078 about it reaches 1.1) counts; 1.0 at 2 rounds (4 rounds could
    settle it the same speed), 1.04 at 4 of 4, 1.04 capped, and 2.0 and 4.0 (4 rounds could
    settle them faster) do not."""
    bench, speedups, crossovers = constructed_results()
    speedups, bench = speedups.copy(), bench.copy()
    settings = '{"margin": 1.1, "max": 4, "min": 2, "round_sd": 0.08}'
    bench["replicate_settings"] = settings
    bench["replicates"] = 2
    bench["capped"] = False
    torch = speedups.index[speedups["library"] == "torch"]
    speedups.loc[torch, ["settled", "paired"]] = [False, True]
    where = {  # (operation, size) -> speedup, the cell's rounds, capped
        ("sort", 1000): (1.04, 2, False),
        ("sort", 10_000): (1.0, 2, False),
        ("sort", 100_000): (1.04, 4, False),
        ("fft", 1000): (1.04, 2, True),
    }
    for (op, size), (speedup, rounds, capped) in where.items():
        s = (speedups["library"] == "torch") & (speedups["operation"] == op)
        speedups.loc[s & (speedups["size"] == size), "speedup"] = speedup
        b = (bench["library"] == "torch") & (bench["operation"] == op) & (bench["size"] == size)
        bench.loc[b, ["replicates", "capped"]] = [rounds, capped]
    f = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).firmness
    assert f.short == 1
    line = firmness_line(f, MARGIN)
    assert "1 of them stopped before `replicates.max` rounds, which could not have" in line
    assert "at the run's round spread" in line
    # the run's own round spread (the rows' floor) decides where the table has one: at 0.1 a
    # speedup of 1.0 is beyond what 4 rounds could settle (floor 0.098 > log 1.1 = 0.095);
    # the floor of 2 rounds at 0.1 is expm1(1.96 * 0.1 / sqrt(2)) = 0.1487
    same = (speedups["library"] == "torch") & (speedups["operation"] == "sort")
    speedups.loc[same & (speedups["size"] == 10_000), "ci_floor"] = 0.1487
    assert decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).firmness.short == 2
    # cells from before their settings were recorded say nothing either way
    bench["replicate_settings"], bench["capped"] = None, False
    older = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert older.firmness.short is None
    assert "stopped before" not in firmness_line(older.firmness, MARGIN)
