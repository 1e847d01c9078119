"""Replicated processes: the two-level bootstrap, the unstable flag, and the replicate loop
(adaptive count, paired rounds in a seeded order, faults) with a constructed worker."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_spec

from numbench.measure.replicates import (
    BASELINE,
    MEASURED,
    CellClock,
    ProcessRun,
    RoundFileError,
    RunSd,
    measure_replicates,
    measure_round,
    read_rounds,
    round_order,
    run_round_sd,
    verdict_settled,
    write_round,
    write_round_sd,
)
from numbench.spec import ProcessReport, ReplicateSettings
from numbench.stats import could_settle, median_ci, summarize

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}

#: replicate settings of a test: the shipped defaults' kind, two to three processes, no spread
REPS = {
    "min": 2,
    "max": 3,
    "target_ci": 0.03,
    "stop_margin": 1.1,
    "early_rounds": 0,
    "round_sd": 0.03,
    "max_cpu_taken": 0.1,
    "lockstep": False,
    "max_cell_s": None,
}


def noisy(median: float, n: int, rng: np.random.Generator, sd: float = 0.02) -> np.ndarray:
    return median * np.exp(rng.normal(0.0, sd, n))


def test_agreeing_processes_give_about_the_one_level_interval():
    rng = np.random.default_rng(1)
    groups = [noisy(1e-3, 20, rng) for _ in range(5)]
    pooled = np.concatenate(groups)
    lo2, hi2 = median_ci(groups)
    lo1, hi1 = median_ci([pooled])  # one process holding every sample: one level
    assert 0.6 < (hi2 - lo2) / (hi1 - lo1) < 1.6
    assert lo2 < np.median(pooled) < hi2


def one_level_interval(samples: np.ndarray, resamples: int = 20_000) -> tuple[float, float]:
    """The textbook percentile bootstrap of the median (samples drawn with replacement),
    written here apart from numbench.stats, with ten times its resamples."""
    draws = np.random.default_rng(99).choice(samples, size=(resamples, samples.size))
    lo, hi = np.quantile(np.median(draws, axis=1), [0.025, 0.975])
    return float(lo), float(hi)


def test_one_process_gets_the_one_level_interval():
    """With one process the first level has nothing to choose: the two-level interval is the
    one-level bootstrap of that process's samples (up to the resampling's own noise)."""
    one = noisy(1e-3, 30, np.random.default_rng(2))
    lo, hi = median_ci([one])
    ref_lo, ref_hi = one_level_interval(one)
    width = ref_hi - ref_lo
    assert width > 0
    assert lo == pytest.approx(ref_lo, abs=0.15 * width)
    assert hi == pytest.approx(ref_hi, abs=0.15 * width)


def test_bimodal_processes_widen_the_interval():
    """Three processes at 1 ms and one at 2 ms: the pooled samples look precise (their
    median sits in the 1 ms mode), the processes do not agree, and the interval must show it."""
    rng = np.random.default_rng(3)
    groups = [noisy(m, 20, rng) for m in (1e-3, 1e-3, 2e-3, 1e-3)]
    lo2, hi2 = median_ci(groups)
    lo1, hi1 = median_ci([np.concatenate(groups)])
    assert (hi2 - lo2) > 3 * (hi1 - lo1)
    assert lo2 < 1.05e-3 and hi2 > 1.4e-3


def test_unstable_flag_and_process_medians():
    rng = np.random.default_rng(4)
    calm = summarize([noisy(1e-3, 20, rng) for _ in range(3)])
    assert not calm.unstable and calm.n_processes == 3 and calm.process_spread < 1.05
    wild = summarize([noisy(m, 20, rng) for m in (1.97e-3, 2.31e-4, 2.87e-4)])
    assert wild.unstable and wild.process_spread > 8
    medians = [float(m) for m in wild.process_medians_s.strip("[]").split(",")]
    assert medians == pytest.approx([1.97e-3, 2.31e-4, 2.87e-4], rel=0.02)
    # disagreement within the processes' own noise is not instability
    loud = summarize([noisy(1e-3, 40, rng, sd=0.3) for _ in range(3)])
    assert not loud.unstable
    assert not summarize([noisy(1e-3, 20, rng)]).unstable  # one process cannot disagree


# -- the replicate loop, with a constructed worker ------------------------------------------
class FakeWorker:
    """Stands in for run_worker: returns constructed samples and records the calls."""

    def __init__(self, medians: dict[str, list[float]], fail: dict | None = None):
        self.medians = {k: itertools.cycle(v) for k, v in medians.items()}
        self.fail = fail or {}
        self.calls: list[str] = []
        self.rng = np.random.default_rng(0)

    def __call__(self, spec) -> ProcessReport:
        self.calls.append(spec.library)
        n = self.calls.count(spec.library)
        if (spec.library, n) in self.fail:
            return ProcessReport(status="failed", error=self.fail[(spec.library, n)])
        median = next(self.medians[spec.library])
        return ProcessReport(status="ok", loops=1, samples_s=list(noisy(median, 10, self.rng)))


class QuietWorker(FakeWorker):
    """Every sample of a process is its median: rounds agree exactly."""

    def __call__(self, spec) -> ProcessReport:
        self.calls.append(spec.library)
        return ProcessReport(status="ok", loops=1, samples_s=[next(self.medians[spec.library])] * 5)


def spec_with(library="torch", paired="numpy/cpu", **reps):
    settings = {**REPS, "min": 2, "max": 6, **reps}
    return make_spec(library, "cpu", "sort", 1000, "x.npz", FAST).replace(
        replicates=ReplicateSettings(**settings), paired_with=paired
    )


def test_agreeing_processes_stop_at_the_minimum():
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]})
    runs, pairing_error = measure_replicates(spec_with(), worker)
    assert pairing_error is None
    assert [r.role for r in runs].count(MEASURED) == 2
    assert [r.role for r in runs].count(BASELINE) == 2


def test_disagreeing_processes_get_more_up_to_the_cap():
    # torch 1 or 1.3 ms against numpy 1.2 ms: the speedup's interval straddles the margin
    worker = FakeWorker({"torch": [1e-3, 1.3e-3], "numpy": [1.2e-3]})
    runs, _ = measure_replicates(spec_with(), worker)
    assert [r.role for r in runs].count(MEASURED) == 6  # the cap
    worker = FakeWorker({"torch": [1e-3, 3e-3]})
    runs, _ = measure_replicates(spec_with(paired=None, max=4), worker)
    assert len(runs) == 4 and {r.role for r in runs} == {MEASURED}


def test_a_settled_verdict_needs_no_more_processes():
    """Processes 3x apart, but every one of them far faster than the baseline: more
    processes could not turn 'faster' into anything else."""
    worker = FakeWorker({"torch": [1e-4, 3e-4], "numpy": [2e-3]})
    runs, _ = measure_replicates(spec_with(), worker)
    assert [r.role for r in runs].count(MEASURED) == 2


def test_a_settled_same_speed_stops_at_the_minimum_however_wide():
    """Speedups of 1.0 and 0.95: wider than target_ci, but every speedup in the interval is
    'the same speed'; the old width rule would have run this cell to the cap."""
    worker = FakeWorker({"torch": [1e-3, 1.05e-3], "numpy": [1e-3]})
    runs, _ = measure_replicates(spec_with(target_ci=0.001), worker)
    assert [r.role for r in runs].count(MEASURED) == 2


def test_a_narrow_interval_near_the_margin_gets_rounds_until_it_settles():
    """A speedup of 1.13 whose rounds agree to the last digit: at 2 rounds the floor
    (1.96 * 0.03 / sqrt(2) = 0.042 in log terms) still reaches the margin's 1.1, at 5 it no
    longer does (0.026 against log 1.13 - log 1.1 = 0.027), so the cell stops at 5 of 6."""
    worker = QuietWorker({"torch": [1e-3], "numpy": [1.13e-3]})
    runs, _ = measure_replicates(spec_with(target_ci=0.5), worker)
    assert [r.role for r in runs].count(MEASURED) == 5


def test_a_verdict_that_max_rounds_could_not_settle_stops_at_the_minimum(capsys):
    """A speedup of 1.09 whose rounds agree: even 6 rounds' floor (0.024 in log terms)
    about it reaches the margin's 1.1 (0.009 away), so rounds 3 to 6 would leave it in doubt;
    the cell stops at 2 and its log says why."""
    worker = QuietWorker({"torch": [1e-3], "numpy": [1.09e-3]})
    runs, _ = measure_replicates(spec_with(target_ci=0.5), worker)
    assert [r.role for r in runs].count(MEASURED) == 2
    said = capsys.readouterr().out
    assert "after 2 rounds: its verdict is in doubt and 6 rounds could not settle it" in said
    assert "speedup 1.09" in said
    # round_sd 0 trusts the rounds' own interval, which holds no margin: settled at min
    worker = QuietWorker({"torch": [1e-3], "numpy": [1.09e-3]})
    runs, _ = measure_replicates(spec_with(round_sd=0.0), worker)
    assert [r.role for r in runs].count(MEASURED) == 2
    assert "after 2 rounds: its verdict is settled" in capsys.readouterr().out


def test_the_run_s_round_spread_replaces_round_sd_in_the_stopping_rule(capsys):
    """A speedup of 1.13 whose rounds agree: at round_sd 0.03 it goes on to 5 rounds (above);
    where the run's cells spread 0.01 a round, 2 rounds' floor (0.014) already clears the
    margin (0.027 away); where they spread 0.1, even 6 rounds' floor (0.080) reaches it, and
    the cell stops at 2 naming the run's spread."""
    worker = QuietWorker({"torch": [1e-3], "numpy": [1.13e-3]})
    runs, _ = measure_replicates(spec_with(target_ci=0.5), worker, run_sd=RunSd(0.01, 25))
    assert [r.role for r in runs].count(MEASURED) == 2
    assert "after 2 rounds: its verdict is settled" in capsys.readouterr().out
    worker = QuietWorker({"torch": [1e-3], "numpy": [1.13e-3]})
    runs, _ = measure_replicates(spec_with(target_ci=0.5), worker, run_sd=RunSd(0.1, 25))
    assert [r.role for r in runs].count(MEASURED) == 2
    said = capsys.readouterr().out
    assert "6 rounds could not settle it" in said
    assert "at the run's round spread over 25 cells 0.1" in said


def paired_runs(ratios: list[float]) -> list[ProcessRun]:
    """One paired round per ratio: a baseline of 1 ms, the library's process ratio times
    faster, each process's samples all alike."""
    runs = []
    for i, ratio in enumerate(ratios):
        for role, t in ((BASELINE, 1e-3), (MEASURED, 1e-3 / ratio)):
            runs.append(ProcessRun(role, i, 0.0, ProcessReport("ok", loops=1, samples_s=[t] * 3)))
    return runs


def test_the_run_s_round_spread_is_its_finished_cells_of_that_device_and_host(tmp_path):
    spec = spec_with()
    # rounds 1.1x apart: log ratios +-0.0477 about their mean, variance 2 * 0.0477^2 / 1
    spread = paired_runs([1.0, 1.1])
    for i in range(19):
        assert write_round_sd(tmp_path, f"c{i}", spec, "here", spread)
    assert run_round_sd(tmp_path, "cpu", "here") is None  # 19 cells: too few to say
    assert not write_round_sd(tmp_path, "one", spec, "here", paired_runs([1.3]))  # 1 round
    write_round_sd(tmp_path, "c19", spec, "here", spread)
    # another host's, another device's and a broken file change nothing
    write_round_sd(tmp_path, "elsewhere", spec, "there", paired_runs([1.0, 3.0]))
    (tmp_path / "gpu.json").write_text('{"device": "gpu", "host": "here", "variance": 9, "df": 1}')
    (tmp_path / "broken.json").write_text("{")
    found = run_round_sd(tmp_path, "cpu", "here")
    # 20 cells of 1 df, each variance 0.00454: the median of chi-square(1) is 0.4549, so the
    # typical sd is sqrt(0.00454 / 0.4549) = 0.0999
    assert found is not None and found.cells == 20
    assert found.sd == pytest.approx(0.0999, abs=5e-4)
    # a cell's own earlier file is left out of its own estimate
    assert run_round_sd(tmp_path, "cpu", "here", but="c19") is None
    assert run_round_sd(tmp_path / "absent", "cpu", "here") is None


@pytest.mark.parametrize(
    ("point", "rounds", "round_sd", "possible"),
    [
        (1.0, 4, 0.08, True),  # floor 0.078 < log 1.1 = 0.095: wholly the same speed
        (1.03, 4, 0.08, False),  # 0.030 + 0.078 reaches the margin
        (0.97, 4, 0.08, False),  # and 1 / margin below
        (1.3, 4, 0.08, True),  # 0.262 - 0.078 clears it: faster
        (1.0, 4, 0.1, False),  # floor 0.098: not even a speedup of exactly 1
        (1.0, 16, 0.1, True),  # 16 rounds: 0.049
        (1.03, 4, 0.0, True),  # no floor: any point off the edges
        (float("nan"), 4, 0.08, True),  # nothing known yet
    ],
)
def test_could_settle(point, rounds, round_sd, possible):
    assert could_settle(point, rounds, round_sd, 1.1) is possible


@pytest.mark.parametrize(
    ("point", "lo", "hi", "floor", "settled"),
    [
        (2.0, 1.5, 2.5, 0.05, True),  # wholly faster
        (0.5, 0.4, 0.6, 0.05, True),  # wholly slower
        (1.0, 0.95, 1.05, 0.05, True),  # wholly the same speed
        (1.0, 0.8, 1.05, 0.05, False),  # holds 1 / margin
        (1.2, 1.05, 1.3, 0.0, False),  # holds the margin
        (1.07, 1.069, 1.071, 0.05, False),  # narrow, but the floor reaches the margin
        (1.07, 1.069, 1.071, 0.0, True),  # without the floor: the same speed
        (float("nan"), 1.0, 1.2, 0.05, False),  # no speedup: never settled
    ],
)
def test_verdict_settled(point, lo, hi, floor, settled):
    assert verdict_settled(point, lo, hi, 1.1, floor) is settled


def test_paired_rounds_alternate_in_a_seeded_order():
    spec = spec_with()
    worker = FakeWorker({"torch": [1e-3, 1.3e-3], "numpy": [1.2e-3]})
    runs, _ = measure_replicates(spec, worker)
    for rep in range(6):
        roles = tuple(r.role for r in runs if r.replicate == rep)
        assert roles == round_order(spec, rep)  # one of each, back to back
    orders = {round_order(spec, rep) for rep in range(20)}
    assert orders == {(BASELINE, MEASURED), (MEASURED, BASELINE)}  # neither always first
    assert [round_order(spec, rep) for rep in range(6)] == [
        round_order(spec_with(), rep) for rep in range(6)
    ]  # seeded: a rerun keeps the order
    started = [r.started_unix for r in runs]
    assert started == sorted(started)


def test_a_fault_in_any_process_ends_the_cell():
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]}, fail={("torch", 2): "boom"})
    runs, _ = measure_replicates(spec_with(), worker)
    own = [r for r in runs if r.role == MEASURED]
    assert [r.report.status for r in own] == ["ok", "failed"]
    assert worker.calls.count("torch") == 2


def test_a_failed_baseline_process_ends_the_pairing_only():
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]}, fail={("numpy", 1): "bad"})
    runs, pairing_error = measure_replicates(spec_with(), worker)
    assert "paired baseline process (numpy/cpu) ended failed: bad" in pairing_error
    assert {r.role for r in runs} == {MEASURED} and len(runs) >= 2


class BusyWorker(QuietWorker):
    """A quiet worker on a busy machine: the CPU share other programs took, ``waits`` per
    call, in call order."""

    def __init__(self, medians, waits):
        super().__init__(medians)
        self.waits = iter(waits)

    def __call__(self, spec) -> ProcessReport:
        report = super().__call__(spec)
        report.cpu_taken = next(self.waits, 0.0)
        return report


def test_a_round_whose_cpu_other_programs_took_is_measured_again(capsys):
    spec = spec_with()
    # other programs took 40% of the first attempt's second process; the next is quiet
    worker = BusyWorker({"torch": [1e-3], "numpy": [2e-3]}, [0.0, 0.4, 0.01, 0.0])
    looked = []  # the others let go: the look before the retry finds the machine quiet
    runs = measure_round(
        spec, 0, worker, spec.paired_spec(), busy_now=lambda n: looked.append(n) or 0.02
    )
    assert len(worker.calls) == 4 and len(runs) == 2
    assert [r.role for r in runs] == list(round_order(spec, 0))  # both sides again, in order
    assert [r.report.cpu_taken for r in runs] == [0.01, 0.0]
    assert {r.report.set_aside for r in runs} == {1}
    said = capsys.readouterr().out
    assert "round 0: other programs took 40% of the " in said and "process's CPU time" in said
    assert "max_cpu_taken = 0.1" in said and "measuring the round again" in said
    assert looked == [spec.threads]  # the look is for the worker's threads


def test_a_busy_machine_gets_two_more_attempts_then_the_round_is_kept():
    """Without a look at the machine (``busy_now=None``), or one that cannot tell."""
    for busy_now in (None, lambda threads: None):
        spec = spec_with()
        worker = BusyWorker({"torch": [1e-3], "numpy": [2e-3]}, [0.5] * 100)
        runs = measure_round(spec, 3, worker, spec.paired_spec(), busy_now=busy_now)
        assert len(worker.calls) == 6 and len(runs) == 2  # 1 + CPU_TAKEN_RETRIES attempts
        assert {r.report.set_aside for r in runs} == {2} and {r.replicate for r in runs} == {3}


def test_a_round_is_kept_as_measured_while_others_still_take_the_cpus(capsys):
    """A disturber that never stops: the look before the retry finds others still taking
    more than the limit, so the round is not measured again and says why."""
    spec = spec_with()
    worker = BusyWorker({"torch": [1e-3], "numpy": [2e-3]}, [0.5] * 100)
    runs = measure_round(spec, 2, worker, spec.paired_spec(), busy_now=lambda threads: 0.37)
    assert len(worker.calls) == 2 and len(runs) == 2  # one attempt, both processes
    assert {r.report.set_aside for r in runs} == {0} and {r.report.cpu_taken for r in runs} == {0.5}
    said = capsys.readouterr().out
    assert "round 2: other programs took 50% of the " in said
    assert (
        "other programs would still take 37% of the worker's CPUs: a retry would time them "
        "too; kept as measured" in said
    )
    assert "kept as measured" in said and "measuring the round again" not in said


@pytest.mark.parametrize(
    "limit, waits, calls",
    [
        (None, [0.9, 0.9], 2),  # the guard off: every round once
        (0.1, [0.1, 0.05], 2),  # at the limit is not over it
        (0.1, [None, None], 2),  # an OS that does not tell
        (0.5, [0.3, 0.6, 0.0, 0.0], 4),  # a higher limit, exceeded
    ],
)
def test_the_cpu_taken_limit(limit, waits, calls):
    spec = spec_with(max_cpu_taken=limit)
    worker = BusyWorker({"torch": [1e-3], "numpy": [2e-3]}, waits)
    measure_round(spec, 0, worker, spec.paired_spec(), busy_now=None)
    assert len(worker.calls) == calls


def test_a_failed_process_is_not_measured_again_for_waiting():
    spec = spec_with()
    calls = []

    def worker(s):
        calls.append(s.library)
        if s.library == "torch":
            return ProcessReport(status="failed", error="boom", cpu_taken=0.9)
        return ProcessReport(status="ok", loops=1, samples_s=[2e-3] * 5, cpu_taken=0.0)

    runs = measure_round(spec, 0, worker, spec.paired_spec())
    assert [r.report.status for r in runs if r.role == MEASURED] == ["failed"]
    assert calls.count("torch") == 1  # its fault is the cell's, busy machine or not


class TickingClock:
    """A clock that a worker moves on: each process takes ``per_process_s``."""

    def __init__(self, per_process_s: float):
        self.now, self.per_process_s = 1000.0, per_process_s

    def __call__(self) -> float:
        return self.now

    def wrap(self, worker):
        def run(spec):
            self.now += self.per_process_s
            return worker(spec)

        return run


def test_a_time_cap_stops_a_cell_in_doubt_and_says_so(capsys):
    """A verdict in doubt until its fifth round (1.13 against a margin of 1.1); 10 s a
    process, two processes a round, and a cap of 45 s stop it after the round that passed
    the cap: 3 rounds."""
    clock = TickingClock(10.0)
    worker = clock.wrap(QuietWorker({"torch": [1e-3], "numpy": [1.13e-3]}))
    cell_clock = CellClock(clock=clock)
    runs, _ = measure_replicates(spec_with(max_cell_s=45.0), worker, clock=cell_clock)
    assert [r.role for r in runs].count(MEASURED) == 3
    assert cell_clock.capped
    assert "past replicates.max_cell_s = 45" in capsys.readouterr().out


def test_a_time_cap_counts_the_early_rounds_and_never_stops_the_first_round():
    clock = TickingClock(10.0)
    worker = clock.wrap(QuietWorker({"torch": [1e-3], "numpy": [1.13e-3]}))
    # the early rounds' jobs already took 50 s: past the cap before any round here
    spent = CellClock(earlier_s=50.0, clock=clock)
    runs, _ = measure_replicates(spec_with(max_cell_s=45.0), worker, clock=spent)
    assert [r.role for r in runs].count(MEASURED) == 1 and spent.capped
    # a cell settled before the cap is not capped
    worker = clock.wrap(QuietWorker({"torch": [1e-4], "numpy": [2e-3]}))
    settled = CellClock(clock=clock)
    runs, _ = measure_replicates(spec_with(max_cell_s=45.0), worker, clock=settled)
    assert [r.role for r in runs].count(MEASURED) == 2 and not settled.capped


def test_replicate_settings_refuse_a_time_cap_of_zero():
    with pytest.raises(ValueError, match="max_cell_s"):
        ReplicateSettings(**{**REPS, "max_cell_s": 0})


@pytest.mark.parametrize("reps", [{"min": 3, "max": 2}, {"min": 0, "max": 2}])
def test_replicate_settings_refuse_bad_bounds(reps):
    with pytest.raises(ValueError):
        ReplicateSettings(**{**REPS, **reps})


@pytest.mark.parametrize("wait", [0, -0.1])
def test_replicate_settings_refuse_a_cpu_taken_limit_of_zero_or_less(wait):
    with pytest.raises(ValueError, match="max_cpu_taken"):
        ReplicateSettings(**{**REPS, "max_cpu_taken": wait})


# -- early rounds: measured by jobs of their own, continued by the cell's job ---------------
def early_round(spec, worker, replicate=0):
    return measure_round(spec, replicate, worker, spec.paired_spec())


def test_the_cell_continues_from_its_early_rounds(tmp_path):
    spec = spec_with(early_rounds=1)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]})
    earlier = early_round(spec, worker)
    assert sorted(r.role for r in earlier) == [BASELINE, MEASURED]
    write_round(tmp_path / "r0.json", spec, earlier, wall_s=1.5)
    before, wall = read_rounds([tmp_path / "r0.json"], spec)
    assert wall == 1.5
    assert [(r.role, r.replicate, r.started_unix) for r in before] == [
        (r.role, r.replicate, r.started_unix) for r in earlier
    ]
    assert before[0].report.samples_s == earlier[0].report.samples_s
    worker.calls.clear()
    runs, pairing_error = measure_replicates(spec, worker, before)
    assert pairing_error is None
    # the early round counts towards min: one more round here, numbered 1
    assert worker.calls.count("torch") == 1 and worker.calls.count("numpy") == 1
    assert sorted({r.replicate for r in runs}) == [0, 1]
    assert runs[0].started_unix == min(r.started_unix for r in earlier)


def test_early_rounds_up_to_min_leave_the_cell_only_its_adaptive_rounds():
    spec = spec_with(early_rounds=2)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]})
    earlier = early_round(spec, worker, 0) + early_round(spec, worker, 1)
    worker.calls.clear()
    runs, _ = measure_replicates(spec, worker, earlier)
    assert worker.calls == [] and len(runs) == 4  # agreeing: nothing more to measure
    worker = FakeWorker({"torch": [1e-3, 1.3e-3], "numpy": [1.2e-3]})
    earlier = early_round(spec, worker, 0) + early_round(spec, worker, 1)
    runs, _ = measure_replicates(spec, worker, earlier)
    assert [r.role for r in runs].count(MEASURED) == 6  # disagreeing: up to the cap


def test_a_fault_in_an_early_round_ends_the_cell():
    spec = spec_with(early_rounds=1)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]}, fail={("torch", 1): "boom"})
    earlier = early_round(spec, worker)
    worker.calls.clear()
    runs, _ = measure_replicates(spec, worker, earlier)
    assert worker.calls == []  # nothing more is measured
    own = [r for r in runs if r.role == MEASURED]
    assert [(r.report.status, r.report.error) for r in own] == [("failed", "boom")]


def test_a_failed_baseline_in_an_early_round_ends_the_pairing():
    spec = spec_with(early_rounds=1)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]}, fail={("numpy", 1): "bad"})
    earlier = early_round(spec, worker)
    runs, pairing_error = measure_replicates(spec, worker, earlier)
    assert "ended failed: bad" in pairing_error
    assert {r.role for r in runs} == {MEASURED} and len(runs) >= 2
    assert "numpy" not in worker.calls[2:]  # no baseline after the pairing ended


def test_a_round_file_of_another_cell_or_a_corrupt_one_is_refused(tmp_path):
    spec = spec_with(early_rounds=1)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]})
    write_round(tmp_path / "r0.json", spec, early_round(spec, worker), wall_s=1.0)
    other = spec.replace(size=2000)
    with pytest.raises(RoundFileError, match="r0.json: measured for another spec"):
        read_rounds([tmp_path / "r0.json"], other)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RoundFileError, match="bad.json: not a readable early round"):
        read_rounds([tmp_path / "bad.json"], spec)
    with pytest.raises(RoundFileError, match="missing.json: not a readable early round"):
        read_rounds([tmp_path / "missing.json"], spec)


@pytest.mark.parametrize(
    ("extras", "why"),
    [
        ({"activity": {"other_cpu_share": "busy"}}, "activity's other_cpu_share is 'busy'"),
        ({"activity": {"load_avg_1m": [1.0]}}, "activity's load_avg_1m is [1.0]"),
        ({"activity": {"steal_share": float("nan")}}, "activity's steal_share is nan"),
        ({"activity": {"watched_s": -1.0}}, "activity's watched_s is -1.0"),
        ({"activity": "quiet"}, "the activity entry is 'quiet'"),
        ({"quiet_wait_s": "2 s"}, "its quiet_wait_s is '2 s'"),
    ],
)
def test_a_round_file_with_a_bad_activity_or_wait_is_refused_when_read(tmp_path, extras, why):
    """The cell's job reads the rounds' activity and waits after the lock; a bad value is
    refused here, before it, as an unusable round file naming itself."""
    import json

    spec = spec_with(early_rounds=1)
    worker = FakeWorker({"torch": [1e-3], "numpy": [2e-3]})
    path = tmp_path / "r0.json"
    good = {"other_cpu_share": 0.1, "steal_share": 0.0, "load_avg_1m": 1.0, "watched_s": 2.0}
    write_round(path, spec, early_round(spec, worker), 1.0, 0.5, good)
    assert len(read_rounds([path], spec)[0]) == 2
    path.write_text(json.dumps({**json.loads(path.read_text()), **extras}))
    with pytest.raises(RoundFileError, match="r0.json: ") as err:
        read_rounds([path], spec)
    assert why in str(err.value) and err.value.path == path


def test_spread_must_not_exceed_min():
    with pytest.raises(ValueError, match="early_rounds"):
        ReplicateSettings(**{**REPS, "early_rounds": 3})


# -- the baseline's row pools the baseline processes measured beside other cells -------------
def _cell_file(tmp_path, library, own, paired=None, baseline=()):
    from numbench.contract import cell_table, write_atomic
    from numbench.spec import CellMeta

    def report(median):
        return ProcessReport(status="ok", loops=1, samples_s=[median * f for f in (0.99, 1, 1.01)])

    runs = [ProcessRun(MEASURED, i, float(i), report(m)) for i, m in enumerate(own)]
    runs += [ProcessRun(BASELINE, i, float(i), report(m)) for i, m in enumerate(baseline)]
    key = {"library": library, "device": "cpu", "operation": "sort", "size": 1000}
    key["dtype"] = "float64"
    meta = CellMeta(status="ok", threads=1, host="h", replicates=len(own), paired_with=paired)
    path = tmp_path / f"{library}.parquet"
    write_atomic(cell_table(key, meta, runs), path)
    return path


def test_the_baseline_row_pools_the_baseline_processes_paired_with_other_cells(tmp_path):
    from numbench.analyse.aggregate import aggregate

    paths = [
        _cell_file(tmp_path, "numpy", [1.0e-3, 1.0e-3]),
        _cell_file(tmp_path, "torch", [5e-4, 5e-4], "numpy/cpu", [1.4e-3, 1.4e-3]),
        _cell_file(tmp_path, "jax", [6e-4, 6e-4], "numpy/cpu", [1.4e-3, 1.4e-3]),
    ]
    rows = aggregate(paths, tmp_path / "benchmarks.parquet").to_pandas().set_index("library")
    assert rows.loc["numpy", "n_processes"] == 6 and rows.loc["numpy", "pooled_processes"] == 4
    assert rows.loc["numpy", "replicates"] == 2  # its own processes
    # 6 processes: two at 1.0 ms, four at 1.4 ms; the pooled median and a wider interval
    assert rows.loc["numpy", "median_s"] == pytest.approx(1.4e-3, rel=0.02)
    assert rows.loc["numpy", "ci_low_s"] < 1.05e-3 and rows.loc["numpy", "unstable"]
    for lib in ("torch", "jax"):  # a paired cell's own statistics are its own
        assert rows.loc[lib, "pooled_processes"] == 0 and rows.loc[lib, "n_processes"] == 2


def test_cells_run_in_a_seeded_random_order():
    from numbench.cells import Cell
    from numbench.config import job_order

    cells = [Cell(lib, "cpu", "sort", n) for lib in ("numpy", "torch") for n in (10, 100, 1000)]
    order = job_order({"seed": 1}, cells)
    assert sorted(order.values()) == list(range(6))
    assert order == job_order({"seed": 1}, list(reversed(cells)))  # whatever the grid's order
    assert order != job_order({"seed": 2}, cells)
