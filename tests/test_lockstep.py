"""Lockstep rounds (numbench.measure.lockstep, numbench.measure.lockstep.run_lockstep): the worker's side of the
protocol on constructed turns, the supervisor's orchestration on scripted stand-in workers
(every way a partner can end frees the other), and real paired cells in lockstep."""

from __future__ import annotations

import json
import os
import select
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import Machine, make_spec

from numbench import inputs_file as inputs
from numbench.measure import lockstep as lockstep_module
from numbench.measure import process as process_module
from numbench.measure.lockstep import (
    ENOUGH,
    GO,
    MORE,
    READY,
    SAMPLE,
    TURNS_ENV,
    LineChannel,
    Turns,
    run_lockstep,
    warm_calls,
)
from numbench.measure.replicates import BASELINE, MEASURED, measure_round, round_seed
from numbench.measure.supervisor import run_cell
from numbench.spec import ProcessReport
from numbench.timing import Timer, TimingSettings

SETTINGS = TimingSettings(min_sample_time_s=0.01, min_samples=3, max_samples=6, budget_s=0.025)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def worker_side(clock: FakeClock, per_sample_s: float = 0.01):
    """A Turns over fresh pipes, the supervisor's ends, and a time_loops that records its
    calls and moves the fake clock."""
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    turns = Turns(LineChannel(to_worker_r, from_worker_w), clock=clock)
    supervisor = LineChannel(from_worker_r, to_worker_w)
    calls: list[int] = []

    def time_loops(loops: int) -> float:
        calls.append(loops)
        clock.now += per_sample_s * loops / 20
        return per_sample_s * loops / 20

    return turns, supervisor, calls, time_loops


def run_in_thread(fn):
    box: dict = {}

    def target():
        box["value"] = fn()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def test_a_worker_samples_only_on_its_turn_and_waits_for_go_after_enough():
    clock = FakeClock()
    turns, supervisor, calls, time_loops = worker_side(clock)
    thread, box = run_in_thread(lambda: turns.take_samples(SETTINGS, time_loops, 20))
    assert supervisor.hear() == READY
    assert calls == []  # nothing timed before its first turn
    words = []
    for _ in range(3):
        clock.now += 5.0  # the partner's turn: long, and not this worker's budget
        supervisor.say(SAMPLE)
        words.append(supervisor.hear())
    assert words == [MORE, MORE, ENOUGH]  # 3 samples of 10 ms: min_samples and budget met
    # each turn: untimed calls (a tenth of the sample's 20 calls of 0.5 ms, but at least
    # the 4 that fill up to 40 ms), then the sample's 20 calls
    assert calls == [4, 20, 4, 20, 4, 20]
    time.sleep(0.05)
    assert thread.is_alive()  # after enough it waits for go
    supervisor.say(GO)
    thread.join(5)
    assert not thread.is_alive() and len(box["value"]) == 3


def test_a_turn_of_few_calls_still_opens_with_untimed_calls():
    # a sample of 2 calls: the first calls after the partner's turn run cold, so untimed
    # calls open every turn even under WARM_SHARE calls
    clock = FakeClock()
    turns, supervisor, calls, time_loops = worker_side(clock)
    thread, box = run_in_thread(lambda: turns.take_samples(SETTINGS, time_loops, 2))
    assert supervisor.hear() == READY
    while True:
        clock.now += 5.0
        supervisor.say(SAMPLE)
        if supervisor.hear() == ENOUGH:
            break
    supervisor.say(GO)
    thread.join(5)
    turns_taken = len(box["value"])
    assert turns_taken >= 3
    assert calls == [4, 2] * turns_taken


@pytest.mark.parametrize(
    "loops, per_call_s, expected",
    [
        (20_000, 1e-6, 2_000),  # fast calls: a tenth of the sample's calls
        (20, 0.5e-3, 4),  # 4 calls fill less than 40 ms: all 4
        (2, 11e-3, 4),  # the equation of state's 11 ms: 44 ms
        (1, 25e-3, 2),  # 2 calls fill 40 ms
        (1, 0.1, 1),  # one long call: one, as before
        (1, 0.0, 4),  # a call too fast to read: as many as a fast call gets
    ],
)
def test_a_turn_s_untimed_calls_fill_a_tenth_or_40_ms_up_to_four(loops, per_call_s, expected):
    assert warm_calls(loops, per_call_s) == expected


@pytest.mark.parametrize(
    "calibrated, first_turn",
    [(None, 1), (0.1, 1), (0.015, 3)],  # None: 100 ms a call, from min_sample_time_s
)
def test_the_first_turn_s_untimed_calls_come_from_calibration_then_from_each_sample(
    calibrated, first_turn
):
    clock = FakeClock()
    turns, supervisor, calls, _ = worker_side(clock)
    per_call = iter([0.03, 0.03, 0.001, 0.001])  # seconds per call, as the samples read

    def time_loops(loops):
        calls.append(loops)
        return next(per_call) * loops

    settings = TimingSettings(0.1, 2, 2, 1e-9)  # 0.1 s samples of 1 call
    thread, box = run_in_thread(
        lambda: turns.take_samples(settings, time_loops, 1, per_call_s=calibrated)
    )
    assert supervisor.hear() == READY
    for _ in range(2):
        supervisor.say(SAMPLE)
        supervisor.hear()
    supervisor.say(GO)
    thread.join(5)
    # first turn: as calibration read a call (15 ms: 3 fill 40 ms); the sample reads 30 ms
    # a call, so the second turn opens with 2 (60 ms)
    assert calls == [first_turn, 1, 2, 1]


def test_go_before_enough_takes_the_rest_alone_without_warm_up():
    clock = FakeClock()
    turns, supervisor, calls, time_loops = worker_side(clock)
    thread, box = run_in_thread(lambda: turns.take_samples(SETTINGS, time_loops, 20))
    assert supervisor.hear() == READY
    supervisor.say(SAMPLE)
    assert supervisor.hear() == MORE
    supervisor.say(GO)  # the partner ended: the rest alone, nothing more said
    thread.join(5)
    assert len(box["value"]) == 3 and calls == [4, 20, 20, 20]
    readable, _, _ = select.select([supervisor.read_fd], [], [], 0.05)
    assert not readable  # nothing said after go


def test_a_gone_supervisor_reads_as_go():
    clock = FakeClock()
    turns, supervisor, calls, time_loops = worker_side(clock)
    os.close(supervisor.write_fd)
    samples = turns.take_samples(SETTINGS, time_loops, 20)
    # alone from the start, by the usual rule, and no turns to warm up after
    assert len(samples) == 3 and calls == [20, 20, 20]


def test_the_stopping_rule_counts_only_the_worker_s_own_samples():
    clock = FakeClock()
    turns, supervisor, calls, time_loops = worker_side(clock, per_sample_s=0.001)
    thread, box = run_in_thread(lambda: turns.take_samples(SETTINGS, time_loops, 20))
    assert supervisor.hear() == READY
    said = []
    while not said or said[-1] != ENOUGH:
        clock.now += 1.0  # the partner's long turns would end a wall-clock budget at once
        supervisor.say(SAMPLE)
        said.append(supervisor.hear())
    supervisor.say(GO)
    thread.join(5)
    assert len(box["value"]) == SETTINGS.max_samples  # 6 of 1 ms never reach 0.025 s


def test_a_worker_s_waits_for_its_turns_are_not_counted_as_cpu_taken():
    """``cpu_taken`` is paused before each word is said (the partner may run from that
    moment) and resumed once the next word is heard: the partner's turns, on constructed
    readings where they take the whole CPU, leave the share at 0."""
    clock = FakeClock()
    turns, supervisor, calls, _ = worker_side(clock)
    machine = Machine(cpus=1)
    turns.cpu_taken = machine.taken()

    def time_loops(loops: int) -> float:
        calls.append(loops)
        machine.run(wall_s=0.01, own_s=0.01, others_s=0.0)  # this worker's sample
        clock.now += 0.01
        return 0.01

    thread, box = run_in_thread(lambda: turns.take_samples(SETTINGS, time_loops, 20))
    word = supervisor.hear()
    assert word == READY
    while word != ENOUGH:
        machine.run(wall_s=0.3, own_s=0.0, others_s=0.3)  # the partner's turn
        supervisor.say(SAMPLE)
        word = supervisor.hear()
    machine.run(wall_s=0.3, own_s=0.0, others_s=0.3)  # the partner finishes
    supervisor.say(GO)
    thread.join(5)
    assert len(box["value"]) == 3
    assert turns.cpu_taken.share() == pytest.approx(0.0)
    assert machine.wall > 1.0  # the partner's turns did pass (counted, a third was taken)


def test_timer_measure_takes_its_samples_through_turns():
    clock = FakeClock()
    turns, supervisor, calls, _ = worker_side(clock)
    timer = Timer(lambda: clock.__setattr__("now", clock.now + 0.004), clock=clock)
    thread, box = run_in_thread(lambda: timer.measure(SETTINGS, turns=turns))
    assert supervisor.hear() == READY  # first call and calibration are done before ready

    def partner_turn():
        time.sleep(0.05)  # the worker is waiting now
        clock.now += 1.0  # the partner's turn, on the worker's clock

    partner_turn()
    while supervisor.say(SAMPLE) and supervisor.hear() != ENOUGH:
        partner_turn()
    partner_turn()
    supervisor.say(GO)
    thread.join(5)
    m = box["value"]
    assert len(m.samples_s) == 3 and m.loops == 3
    assert m.samples_s == pytest.approx([0.004] * 3)
    # its own time only: calibration (1 call, then 3) and 3 turns of 4 untimed calls (the
    # 4 that fill up to 40 ms) and a sample of 3 calls, 4 ms a call; the 4 s of the
    # partner's turns are not its
    assert m.sampling_s == pytest.approx(0.004 * (1 + 3 + 3 * (4 + 3)))


def test_timer_measure_opens_the_first_turn_by_calibration_s_call():
    clock = FakeClock()
    turns, supervisor, _, _ = worker_side(clock)
    timed = []

    def call():
        timed.append(clock.now)
        clock.now += 0.025  # 25 ms a call: one call fills a 10 ms sample

    timer = Timer(call, clock=clock)
    thread, box = run_in_thread(lambda: timer.measure(SETTINGS, turns=turns))
    assert supervisor.hear() == READY
    before = len(timed)  # first call and calibration's one call
    supervisor.say(SAMPLE)
    supervisor.hear()
    # 2 untimed calls (50 ms fill 40 ms; min_sample_time_s's 10 ms a call would say 4),
    # then the sample's 1
    assert len(timed) - before == 2 + 1
    supervisor.say(GO)
    thread.join(5)
    assert timer.calibrated_per_call_s == pytest.approx(0.025)


# --- the supervisor's side, on scripted stand-in workers -------------------------------

FAKE_WORKER = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from numbench.timing import TimingSettings
    from numbench.measure.lockstep import Turns

    spec_path, result_path = sys.argv[1], sys.argv[2]
    name = json.load(open(spec_path))["library"]
    plan = json.loads(os.environ["FAKE_PLAN"]).get(name, {})
    log = open(os.environ["FAKE_LOG"], "a")

    def event(what):
        log.write(f"{time.time():.6f} {name} {what}\\n")
        log.flush()

    event("start")
    time.sleep(plan.get("prepare_s", 0.05))
    if plan.get("fail_early"):
        json.dump({"status": "failed", "error": "failed before its samples"}, open(result_path, "w"))
        sys.exit(0)
    taken = []
    now = [0.0]  # the budget's clock: each sample lasts sample_s, however busy the machine

    def time_loops(loops):
        if loops < 10:
            return 0.0  # a turn's warm-up
        taken.append(1)
        event("sample")
        if len(taken) == plan.get("crash_at"):
            os.kill(os.getpid(), signal.SIGSEGV)
        if len(taken) == plan.get("hang_at"):
            time.sleep(3600)
        if len(taken) == plan.get("grow_at"):
            hog = bytearray(400 * 2**20)
            for i in range(0, len(hog), 4096):
                hog[i] = 1
            time.sleep(3600)
        time.sleep(plan.get("sample_s", 0.01))
        now[0] += plan.get("sample_s", 0.01)
        return plan.get("sample_s", 0.01) * loops

    settings = TimingSettings(0.01, 3, plan.get("max_samples", 4), plan.get("budget_s", 0.03))
    event("calibrated")
    if plan.get("die_waiting"):  # killed from outside while it waits for its second turn
        import threading
        threading.Timer(plan["die_waiting"], os.kill, (os.getpid(), signal.SIGKILL)).start()
    turns = Turns.from_environment()
    turns.clock = lambda: now[0]
    samples = turns.take_samples(settings, time_loops, 20)
    event("finish")
    if plan.get("crash_in_finish"):
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(plan.get("finish_s", 0.05))
    json.dump({"status": "ok", "samples_s": samples}, open(result_path, "w"))
    event("end")
    """
)


@pytest.fixture
def fake_workers(tmp_path, monkeypatch):
    """run_lockstep with stand-in workers: ``plan`` (library -> behaviour) is set by the test;
    returns (plan, read_log)."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    log = tmp_path / "events.log"
    plan: dict = {}
    real_prepare = process_module.prepare_worker

    def prepare(spec, tmp):
        _, env, result_path = real_prepare(spec, tmp)
        env["FAKE_PLAN"], env["FAKE_LOG"] = json.dumps(plan), str(log)
        cmd = [sys.executable, str(script), str(Path(tmp, "spec.json")), str(result_path)]
        return cmd, env, result_path

    monkeypatch.setattr(process_module, "prepare_worker", prepare)

    def read_log(times: bool = False) -> list[tuple]:
        lines = log.read_text().split("\n") if log.exists() else []
        events = [line.split() for line in lines if line]
        return [(float(t), who, what) if times else (who, what) for t, who, what in events]

    return plan, read_log


def pair(tmp_path, timeout_s=20.0, memory_limit_mb=None, numpy_timeout_s=None):
    inputs_path = str(tmp_path / "in.npz")
    return [
        make_spec(lib, "cpu", "elementwise", 1000, inputs_path, SETTINGS.__dict__,
                  timeout_s=numpy_timeout_s if lib == "numpy" and numpy_timeout_s else timeout_s,
                  memory_limit_mb=memory_limit_mb)
        for lib in ("numpy", "torch")
    ]  # fmt: skip


def test_each_prepares_while_the_other_waits_then_the_samples_alternate(tmp_path, fake_workers):
    plan, read_log = fake_workers
    ended = run_lockstep(pair(tmp_path), seed=3)
    assert [r.status for _, r in ended] == ["ok", "ok"]
    assert ended[0][0] <= ended[1][0]  # started in the order given
    events = read_log()
    # the second starts only once the first is calibrated and waiting
    assert events[:3] == [("numpy", "start"), ("numpy", "calibrated"), ("torch", "start")]
    timed = {(who, what): t for t, who, what in read_log(times=True)}
    assert timed["torch", "start"] > timed["numpy", "calibrated"]
    samples = [who for who, what in events if what == "sample"]
    assert len(samples) == 6
    for turn in range(3):  # one of each side per turn, in a seeded order
        assert sorted(samples[2 * turn : 2 * turn + 2]) == ["numpy", "torch"]
    # then each finishes in turn, never both at once
    tail = [e for e in events if e[1] in ("finish", "end")]
    assert tail[0][0] == tail[1][0] and tail[2][0] == tail[3][0] != tail[0][0]
    for _, report in ended:
        assert len(report.samples_s) == 3


def test_the_side_still_sampling_goes_on_alone_and_finishes_first(tmp_path, fake_workers):
    plan, read_log = fake_workers
    plan["torch"] = {"budget_s": 0.05, "max_samples": 5}  # needs 5 samples, numpy 3
    ended = run_lockstep(pair(tmp_path), seed=3)
    assert [len(r.samples_s) for _, r in ended] == [3, 5]
    events = read_log()
    samples = [who for who, what in events if what == "sample"]
    assert samples[-2:] == ["torch", "torch"]  # after numpy's enough: torch alone
    finishes = [who for who, what in events if what == "finish"]
    assert finishes == ["torch", "numpy"]


@pytest.mark.parametrize(
    "torch_plan,status,words",
    [
        ({"fail_early": True}, "failed", ["failed before its samples"]),
        ({"crash_at": 2}, "crashed", ["SIGSEGV"]),
        ({"hang_at": 2}, "timeout", ["cell_timeout_s = 2 s", "partner's turns not counted"]),
        ({"grow_at": 2}, "crashed", ["out of memory", "cell_memory_limit_mb = 200"]),
        ({"crash_in_finish": True}, "crashed", ["SIGSEGV"]),
    ],
    ids=[
        "fails-before-ready",
        "crashes-mid-turns",
        "hangs-mid-turns",
        "memory-mid-turns",
        "crashes-after-enough",
    ],
)
def test_a_partner_that_ends_frees_the_other(tmp_path, fake_workers, torch_plan, status, words):
    plan, _ = fake_workers
    plan["torch"] = torch_plan
    ended = run_lockstep(pair(tmp_path, timeout_s=2.0, memory_limit_mb=200), seed=3)
    numpy_report, torch_report = (r for _, r in ended)
    assert numpy_report.status == "ok" and len(numpy_report.samples_s) == 3
    assert torch_report.status == status
    for word in words:
        assert word in torch_report.error, torch_report.error


def test_the_first_started_failing_before_ready_frees_the_second(tmp_path, fake_workers):
    plan, read_log = fake_workers
    plan["numpy"] = {"fail_early": True}
    ended = run_lockstep(pair(tmp_path), seed=3)
    assert [r.status for _, r in ended] == ["failed", "ok"]
    assert len(ended[1][1].samples_s) == 3
    assert ("numpy", "calibrated") not in read_log()


def test_a_partner_killed_while_it_waits_frees_the_other(tmp_path, fake_workers):
    plan, _ = fake_workers
    # torch dies 0.3 s into its wait, during numpy's long turns
    plan["numpy"] = {"sample_s": 0.25, "budget_s": 0.7, "max_samples": 3}
    plan["torch"] = {"die_waiting": 0.3}
    ended = run_lockstep(pair(tmp_path), seed=3)
    numpy_report, torch_report = (r for _, r in ended)
    assert numpy_report.status == "ok" and len(numpy_report.samples_s) == 3
    assert torch_report.status == "crashed" and "SIGKILL" in torch_report.error


def test_the_time_limit_counts_only_a_process_s_own_time(tmp_path, fake_workers):
    plan, read_log = fake_workers
    # numpy's turns are long (0.6 s each), torch's short: torch lives past its 1.5 s limit
    # while it waits, and must not be killed for it
    plan["numpy"] = {"sample_s": 0.6, "max_samples": 3, "budget_s": 1.0}
    ended = run_lockstep(pair(tmp_path, timeout_s=1.5, numpy_timeout_s=20), seed=3)
    assert [r.status for _, r in ended] == ["ok", "ok"], [r.error for _, r in ended]
    # torch waited through numpy's three turns, each a sleep of 0.6 s in the stand-in:
    # alive past its 1.5 s, as its own log says, and not killed for it
    numpy_report, torch_report = (r for _, r in ended)
    assert len(numpy_report.samples_s) == 3 and len(torch_report.samples_s) == 3
    torch_log = {what: t for t, who, what in read_log(times=True) if who == "torch"}
    assert torch_log["end"] - torch_log["start"] > 1.5, torch_log


def test_a_stopped_supervisor_takes_both_workers_along(tmp_path, fake_workers, monkeypatch):
    plan, _ = fake_workers
    plan["torch"] = {"hang_at": 1}
    pids = []
    real_start = lockstep_module._start_partner

    def start(spec, tmp):
        partner = real_start(spec, tmp)
        pids.append(partner.proc.pid)
        return partner

    monkeypatch.setattr(lockstep_module, "_start_partner", start)
    real_hear = lockstep_module._hear

    def hear(partner):
        if partner.spec.library == "torch" and partner.said in (READY, MORE):
            raise KeyboardInterrupt  # the run is stopped while torch has its turn
        return real_hear(partner)

    monkeypatch.setattr(lockstep_module, "_hear", hear)
    with pytest.raises(KeyboardInterrupt):
        run_lockstep(pair(tmp_path), seed=3)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: none left running


def test_measure_round_runs_a_lockstep_pair_in_the_round_s_order(tmp_path):
    spec = make_spec(
        "torch", "cpu", "elementwise", 1000, str(tmp_path / "in.npz"), SETTINGS.__dict__,
        replicates=(2, 2), paired_with="numpy/cpu", lockstep=True,
    )  # fmt: skip
    asked = []

    def run_pair(specs, seed):
        asked.append(([s.library for s in specs], seed))
        return [(1.0, ProcessReport(status="ok", samples_s=[0.1])) for _ in specs]

    def run_worker(spec):
        raise AssertionError("a lockstep round runs no process alone")

    runs = measure_round(spec, 1, run_worker, spec.paired_spec(), run_pair)
    assert sorted(r.role for r in runs) == [BASELINE, MEASURED]
    order = ["numpy" if r.role == BASELINE else "torch" for r in runs]
    assert asked == [(order, round_seed(spec, 1) * 10)]  # the round's seed, first attempt
    # without lockstep the same round runs its processes back to back
    alone = []
    runs = measure_round(
        spec.replace(replicates={**spec.replicates.__dict__, "lockstep": False}),
        1,
        lambda s: alone.append(s.library) or ProcessReport(status="ok", samples_s=[0.1]),
        spec.paired_spec(),
        run_pair,
    )
    assert alone == order and len(asked) == 1


# --- real workers ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lockstep") / "inputs" / "elementwise" / "1000.npz"
    inputs.write("elementwise", 1000, 1, path)
    return path


FAST = {"min_sample_time_s": 0.002, "min_samples": 3, "max_samples": 5, "budget_s": 0.02}


@pytest.mark.parametrize(
    "library,status",
    [("numpy", "ok"), ("fault-wrong", "mismatch"), ("fault-crash", "crashed")],
)
def test_a_paired_cell_in_lockstep_with_real_workers(inputs_file, tmp_path, library, status):
    # numpy beside numpy stands in for a library (the cheapest import)
    spec = make_spec(
        library, "cpu", "elementwise", 1000, str(inputs_file), FAST,
        replicates=(2, 2), paired_with="numpy/cpu", lockstep=True, timeout_s=60,
    )  # fmt: skip
    out = tmp_path / "cell.parquet"
    result = run_cell(spec, out, lock=str(tmp_path / ".lock"))
    assert result.status == status
    table = pq.read_table(out).to_pydict()
    roles = set(zip(table["role"], table["replicate"]))
    if status == "crashed":  # the crash is the cell's; the baseline beside it finished
        assert (MEASURED, 0) in roles
        base = [r for r in result.runs if r.role == BASELINE]
        assert base and base[0].report.status == "ok"
        return
    # both sides of every round measured, in turns (a mismatch ends the cell after one)
    rounds = 2 if status == "ok" else 1
    assert roles == {(role, r) for role in (BASELINE, MEASURED) for r in range(rounds)}
    for run in result.runs:
        assert run.report.status == ("ok" if run.role == BASELINE else status)
        assert len(run.report.samples_s) >= FAST["min_samples"]
        assert run.report.cpu_taken is not None
    assert result.meta.paired_with == "numpy/cpu" and result.meta.lockstep is True
    assert table["lockstep"][0] is True


@pytest.mark.parametrize("value", ["x", "3", "1,2,3", "999,998"])
def test_bad_turn_descriptors_are_named(monkeypatch, value):
    monkeypatch.setenv(TURNS_ENV, value)
    with pytest.raises(ValueError, match=TURNS_ENV):
        Turns.from_environment()


def test_no_turn_descriptors_means_measured_alone(monkeypatch):
    monkeypatch.delenv(TURNS_ENV, raising=False)
    assert Turns.from_environment() is None
