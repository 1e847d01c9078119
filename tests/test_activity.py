"""A cell's record of the whole machine while it measured (``numbench.measure.activity``):
other processes' share of all CPUs' time and the hypervisor's steal from two constructed
``/proc/stat`` readings, the cell's own CPU time taken out; the workflow's own processes
(the cell job's ancestors up to Snakemake) measured apart from constructed ``/proc`` folders;
the load; unknown without ``/proc``; and a real cell's row carrying the columns."""

from __future__ import annotations

import pytest

from numbench.machine.system import read_load_1m
from numbench.measure.activity import (
    ActivityWatch,
    read_cpu_ticks,
    shares,
)

#: user nice system idle iowait irq softirq steal: 400 ticks pass (2 CPUs, 2 s at 100 Hz)
BEFORE = [1000, 0, 500, 10000, 100, 0, 0, 0]
AFTER = [1200, 0, 540, 10120, 120, 0, 0, 20]


def test_other_processes_share_is_the_busy_ticks_less_the_cells_own():
    # 240 busy ticks (user 200, system 40) of 400; steal 20 (5%); the cell's processes ran
    # 1.5 CPU seconds = 150 ticks: 90 ticks of other work, 22.5%
    other, steal = shares(BEFORE, AFTER, own_s=1.5, ticks_per_s=100)
    assert other == pytest.approx(90 / 400) and steal == pytest.approx(20 / 400)
    # the cell's own time read a tick high: never below 0
    other, _ = shares(BEFORE, AFTER, own_s=2.5, ticks_per_s=100)
    assert other == 0.0
    assert shares(None, AFTER, 1.0, 100) == (None, None)
    assert shares(BEFORE, BEFORE, 0.0, 100) == (None, None)  # no tick passed


def test_the_watch_reads_at_its_start_and_its_stop():
    readings = iter([BEFORE, AFTER])
    own = iter([10.0, 11.5])
    watch = ActivityWatch(
        ticks=lambda: next(readings),
        own_s=lambda: next(own),
        load=lambda: 1.25,
        workflow=lambda: {},
        ticks_per_s=100,
    )
    got = watch.stop()
    assert got.other_cpu_share == pytest.approx(0.225) and got.steal_share == pytest.approx(0.05)
    assert got.load_avg_1m == 1.25 and got.workflow_cpu_share == 0.0


def test_without_proc_everything_is_unknown(tmp_path):
    assert read_cpu_ticks(tmp_path) is None and read_load_1m(tmp_path) is None
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\n")
    (tmp_path / "proc/loadavg").write_text("0.75 0.5 0.25 1/100 9\n")
    assert read_cpu_ticks(tmp_path) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert read_load_1m(tmp_path) == 0.75
    watch = ActivityWatch(ticks=lambda: None, own_s=lambda: 0.0, load=lambda: None)
    got = watch.stop()
    assert (got.other_cpu_share, got.steal_share, got.load_avg_1m) == (None, None, None)
    assert got.workflow_cpu_share is None


def test_a_cell_row_records_the_machine_while_it_measured(tmp_path):
    from conftest import make_spec

    from numbench import inputs_file as inputs
    from numbench.contract import read_cell
    from numbench.measure.supervisor import run_cell

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    out = tmp_path / "cell.parquet"
    meta = run_cell(make_spec("numpy", "cpu", "sort", 1000, str(path), timing), out)
    assert meta.status == "ok", meta
    row = read_cell(out).to_pylist()[0]
    assert 0.0 <= row["other_cpu_share"] <= 1.0 and 0.0 <= row["steal_share"] <= 1.0
    assert row["load_avg_1m"] >= 0.0
    # no Snakemake above this test's process: nothing is set apart as the workflow's
    assert row["workflow_cpu_share"] is None and row["workflow_moved"] is None
    assert row["sentinel_s"] > 0.0  # the real sentinel, timed before the cell measured
    # the sentinel's time as given (the tests inject theirs), on every row of the cell
    spec = make_spec("numpy", "cpu", "sort", 1000, str(path), timing)
    run_cell(spec, out, sentinel=lambda: 0.0123)
    assert set(read_cell(out).column("sentinel_s").to_pylist()) == {0.0123}


def test_the_sentinel_is_the_fastest_of_its_timed_calls_after_an_untimed_one(monkeypatch):
    from numbench.measure.activity import (
        SENTINEL_KERNEL,
        SENTINEL_SIZE,
        TEST_SENTINEL_ENV,
        sentinel_kernel,
        time_sentinel,
    )

    monkeypatch.delenv(TEST_SENTINEL_ENV, raising=False)  # the real run's sentinel

    calls = []
    ticks = iter([0.0, 0.030, 1.0, 1.012, 2.0, 2.020])  # calls of 30, 12 and 20 ms
    best = time_sentinel(lambda: calls.append(1), clock=lambda: next(ticks), repeats=3)
    assert best == pytest.approx(0.012) and len(calls) == 4
    assert time_sentinel(lambda: None, repeats=1) >= 0.0
    with pytest.raises(ValueError, match="at least one timed call, not 0"):
        time_sentinel(lambda: None, repeats=0)
    # the kernel is the same every time: its values come from a fixed seed
    first, again = sentinel_kernel()(), sentinel_kernel()()
    assert "sort" in SENTINEL_KERNEL and len(first) == SENTINEL_SIZE == 2**20
    assert (first == again).all() and (first[1:] >= first[:-1]).all()


def test_a_test_run_sorts_the_sentinel_values_it_names_and_no_other_run_does(monkeypatch):
    from numbench.measure.activity import TEST_SENTINEL_ENV, sentinel_kernel, sentinel_size

    named = {"NUMBENCH_TEST_ADAPTERS": "1", TEST_SENTINEL_ENV: "4096"}
    assert sentinel_size(named) == 4096
    # outside the tests (no NUMBENCH_TEST_ADAPTERS=1) the variable changes nothing
    assert sentinel_size({TEST_SENTINEL_ENV: "4096"}) == 2**20
    assert sentinel_size({"NUMBENCH_TEST_ADAPTERS": "1"}) == 2**20
    for bad in ("big", "0", "-5", "1e4"):
        with pytest.raises(ValueError, match=TEST_SENTINEL_ENV):
            sentinel_size({**named, TEST_SENTINEL_ENV: bad})
    for key, value in named.items():
        monkeypatch.setenv(key, value)
    assert len(sentinel_kernel()()) == 4096  # what a cell's job times in a test run


def test_stretches_combine_weighted_by_their_length():
    from numbench.measure.activity import Activity, combined

    rounds = Activity(0.5, 0.1, 3.0, watched_s=30.0)
    own = Activity(0.1, 0.0, 1.5, watched_s=10.0)
    got = combined([rounds, own])
    assert got.other_cpu_share == pytest.approx(0.4) and got.steal_share == pytest.approx(0.075)
    assert got.load_avg_1m == 1.5 and got.watched_s == 40.0
    # a job that measured nothing (a time cap before its first round) adds nothing
    empty = Activity(None, None, 2.0, watched_s=0.0)
    assert combined([rounds, empty]).other_cpu_share == pytest.approx(0.5)
    assert combined([Activity(0.9, 0.0, None, watched_s=0.0), own]).other_cpu_share == 0.1
    assert combined([]) == Activity(None, None, None)
    assert combined([empty]).other_cpu_share is None
    assert Activity.from_dict(rounds.to_dict()) == rounds
    # the workflow's share weighs the same way, over the stretches that recorded it: a
    # round file from before it has none
    spread = Activity(0.1, 0.0, 1.0, watched_s=30.0, workflow_cpu_share=0.2)
    own_w = Activity(0.1, 0.0, 1.0, watched_s=10.0, workflow_cpu_share=0.6)
    assert combined([spread, own_w]).workflow_cpu_share == pytest.approx(0.3)
    old_round = {k: v for k, v in spread.to_dict().items() if k != "workflow_cpu_share"}
    assert Activity.from_dict(old_round).workflow_cpu_share is None
    assert combined([Activity.from_dict(old_round), own_w]).workflow_cpu_share == 0.6
    assert Activity.from_dict(own_w.to_dict()) == own_w
    with pytest.raises(ValueError, match="workflow_cpu_share is -0.1"):
        Activity.from_dict({**own_w.to_dict(), "workflow_cpu_share": -0.1})
    # a watch gives the seconds it watched, on the clock it is given
    clock = iter([100.0, 102.5])
    watch = ActivityWatch(
        ticks=lambda: None, own_s=lambda: 0.0, load=lambda: None, clock=lambda: next(clock)
    )
    assert watch.stop().watched_s == 2.5


def test_a_cell_s_record_of_the_machine_covers_its_early_rounds_jobs(tmp_path):
    """An early round records the machine while it measured in its file; the cell's job
    adds it to its own stretch, weighted by length (here a round made to weigh a day)."""
    import json

    from conftest import make_spec

    from numbench import inputs_file as inputs
    from numbench.contract import read_cell
    from numbench.measure.supervisor import run_cell, run_round

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    spec = make_spec("numpy", "cpu", "sort", 1000, str(path), timing, replicates=(2, 2))
    spec = spec.replace(replicates={**spec.replicates.__dict__, "early_rounds": 1})
    round_file = tmp_path / "r0.json"
    run_round(spec, 0, round_file, lock=str(tmp_path / "lock"))
    data = json.loads(round_file.read_text())
    recorded = data["activity"]
    assert recorded["watched_s"] > 0 and 0.0 <= recorded["other_cpu_share"] <= 1.0
    data["activity"] = {**recorded, "other_cpu_share": 0.6, "steal_share": 0.2, "watched_s": 86400}
    round_file.write_text(json.dumps(data))
    out = tmp_path / "cell.parquet"
    meta = run_cell(spec, out, lock=str(tmp_path / "lock"), earlier=[round_file])
    assert meta.status == "ok" and meta.meta.replicates == 2
    row = read_cell(out).to_pylist()[0]
    assert row["other_cpu_share"] == pytest.approx(0.6, abs=0.01)
    assert row["steal_share"] == pytest.approx(0.2, abs=0.01)
    # a round file from before the rounds recorded the machine adds nothing: the cell's own
    # stretch alone
    from numbench.measure.replicates import rounds_fields

    assert rounds_fields([round_file], ("activity",)) == {"activity": [data["activity"]]}
    del data["activity"]
    round_file.write_text(json.dumps(data))
    assert rounds_fields([round_file], ("activity",)) == {"activity": []}
    run_cell(spec, out, lock=str(tmp_path / "lock"), earlier=[round_file])
    assert 0.0 <= read_cell(out).to_pylist()[0]["other_cpu_share"] <= 1.0


# -- the workflow's own processes -------------------------------------------------------------
def write_process(proc, pid, ppid, argv, ticks, start=5000, kids=(), waited=0):
    """A constructed ``/proc/PID``: its stat (ppid, utime ``ticks`` less 1 and stime 1, the
    cutime ``waited`` of the children it waited for, the start time), its NUL-separated
    cmdline and one thread whose ``children`` are ``kids``."""
    folder = proc / str(pid)
    task = folder / "task" / str(pid)
    task.mkdir(parents=True, exist_ok=True)
    times = [str(ticks - 1), "1", str(waited), "0"]
    fields = ["S", str(ppid), *["0"] * 9, *times, *["0"] * 4, str(start), "0"]
    (folder / "stat").write_text(f"{pid} (a (b) c) {' '.join(fields)}\n")
    (folder / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    (task / "children").write_text("".join(f"{kid} " for kid in kids))


def watched(before, later, reader):
    """What an ``ActivityWatch`` over ``reader``'s workflow records between the aggregate
    ``/proc/stat`` line ``before`` and the one ``later()`` returns (which may rewrite the
    constructed ``/proc`` first), the cell's own processes taking 1.5 CPU seconds."""
    readings = iter([lambda: before, later])
    watch = ActivityWatch(
        ticks=lambda: next(readings)(),
        own_s=iter([10.0, 11.5]).__next__,
        load=lambda: 1.0,
        workflow=reader,
        ticks_per_s=100,
    )
    return watch.stop()


def snakemake_chain(proc):
    """The cell's job (400) under a shell (300) under Snakemake (200), under a login shell
    (100) under init (1)."""
    write_process(proc, 1, 0, ["/sbin/init"], 90)
    write_process(proc, 100, 1, ["-bash"], 50)
    write_process(proc, 200, 100, ["/venv/bin/python3.12", "-m", "snakemake", "--cores", "1"], 600)
    write_process(proc, 300, 200, ["/bin/bash", "-c", "python run_cell.py"], 10)


def test_a_cell_records_when_its_first_job_started_its_early_round_s_or_its_own(tmp_path):
    """The round's job says when it started (its file); the cell's job takes the earliest
    of its jobs' starts (``jobs_from_unix``), its own where a round file has none."""
    import json

    from conftest import make_spec

    from numbench import inputs_file as inputs
    from numbench.contract import read_cell
    from numbench.measure.supervisor import run_cell, run_round

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    spec = make_spec("numpy", "cpu", "sort", 1000, str(path), timing, replicates=(2, 2))
    spec = spec.replace(replicates={**spec.replicates.__dict__, "early_rounds": 1})
    round_file, out, lock = tmp_path / "r0.json", tmp_path / "cell.parquet", str(tmp_path / "l")
    run_round(spec, 0, round_file, lock=lock, job_started_unix=1_000.0)
    assert json.loads(round_file.read_text())["job_started_unix"] == 1_000.0
    run_cell(spec, out, lock=lock, earlier=[round_file], job_started_unix=1_050.0)
    assert read_cell(out).to_pylist()[0]["jobs_from_unix"] == 1_000.0
    data = json.loads(round_file.read_text())
    del data["job_started_unix"]  # a round file from before it was recorded
    round_file.write_text(json.dumps(data))
    run_cell(spec, out, lock=lock, earlier=[round_file], job_started_unix=1_050.0)
    assert read_cell(out).to_pylist()[0]["jobs_from_unix"] == 1_050.0
    data["job_started_unix"] = "yesterday"
    round_file.write_text(json.dumps(data))
    with pytest.raises(Exception, match="job_started_unix is 'yesterday'"):
        run_cell(spec, out, lock=lock, earlier=[round_file])


def test_snakemake_is_told_by_its_command_line():
    from numbench.measure.activity import is_snakemake

    for argv in (
        ["/venv/bin/snakemake", "--cores", "1"],
        ["python", "-m", "snakemake", "--cores", "1"],
        ["/usr/bin/python3.12", "-msnakemake"],
        ["python3", "-u", "/venv/bin/snakemake", "all"],
    ):
        assert is_snakemake(argv), argv
    for argv in (
        [],
        ["/bin/bash", "-c", "python -m snakemake"],  # a shell, not Snakemake itself
        ["python", "-m", "numbench", "offsite", "run"],
        ["python", "scripts/run_cell.py", "--output", "snakemake"],
        ["python", "-m"],
    ):
        assert not is_snakemake(argv), argv


def test_the_workflow_is_the_parent_up_to_snakemake_and_its_ticks_come_out_of_the_others(
    tmp_path,
):
    from numbench.measure.activity import WorkflowCpu, workflow_pids

    proc = tmp_path / "proc"
    snakemake_chain(proc)
    assert workflow_pids(300, proc) == [300, 200]
    reader = WorkflowCpu(parent=300, proc=proc)
    assert reader() == {300: (5000, 10), 200: (5000, 600)}

    def later():  # between start and stop: Snakemake took 50 ticks, the shell 10
        write_process(proc, 200, 100, ["python", "-m", "snakemake"], 650)
        write_process(proc, 300, 200, ["/bin/bash"], 20)
        return AFTER

    got = watched(BEFORE, later, reader)
    # 240 busy ticks of 400: the cell's 150, the workflow's 60, others' 30
    assert got.workflow_cpu_share == pytest.approx(60 / 400)
    assert got.other_cpu_share == pytest.approx(30 / 400)
    assert got.steal_share == pytest.approx(20 / 400)


def test_without_snakemake_above_it_nothing_is_set_apart_as_the_workflow(tmp_path):
    from numbench.measure.activity import WorkflowCpu, workflow_pids

    proc = tmp_path / "proc"
    write_process(proc, 1, 0, ["/sbin/init"], 90)
    write_process(proc, 100, 1, ["-bash"], 50)
    write_process(proc, 200, 100, ["python", "-m", "numbench", "offsite", "run"], 300)
    assert workflow_pids(200, proc) is None
    assert WorkflowCpu(parent=200, proc=proc)() is None
    # a parent whose ancestors cannot be read, with no Snakemake found: nothing either
    write_process(proc, 500, 77, ["/bin/sh"], 5)
    assert workflow_pids(500, proc) is None
    # Snakemake under Python options before its module or script is still Snakemake
    write_process(proc, 600, 1, ["python3", "-W", "ignore", "-m", "snakemake"], 7)
    write_process(proc, 700, 1, ["python", "-X", "utf8", "/venv/bin/snakemake", "-c1"], 7)
    write_process(proc, 800, 1, ["python", "-c", "import snakemake", "snakemake"], 7)
    assert workflow_pids(600, proc) == [600] and workflow_pids(700, proc) == [700]
    assert workflow_pids(800, proc) is None


def test_a_workflow_process_that_ends_or_is_replaced_meanwhile_counts_what_was_read(tmp_path):
    import shutil

    from numbench.measure.activity import WorkflowCpu, workflow_ticks

    proc = tmp_path / "proc"
    snakemake_chain(proc)
    reader = WorkflowCpu(parent=300, proc=proc)
    before = reader()
    shutil.rmtree(proc / "200")  # Snakemake ended: its last ticks are not seen
    write_process(proc, 300, 200, ["/bin/bash"], 14)
    assert workflow_ticks(before, reader()) == 4
    # another process took the shell's pid (another start time): nothing of it counts
    write_process(proc, 300, 1, ["/usr/bin/yes"], 900, start=9999)
    assert workflow_ticks(before, reader()) == 0
    assert workflow_ticks(None, before) is None and workflow_ticks(before, None) is None


def test_an_unreadable_proc_leaves_the_workflow_unknown_and_the_others_as_they_were(tmp_path):
    from numbench.measure.activity import WorkflowCpu, workflow_share

    reader = WorkflowCpu(parent=300, proc=tmp_path / "no-proc")
    assert reader.pids is None and reader() is None
    readings = iter([BEFORE, AFTER])
    watch = ActivityWatch(
        ticks=lambda: next(readings),
        own_s=iter([10.0, 11.5]).__next__,
        load=lambda: None,
        workflow=reader,
        ticks_per_s=100,
    )
    got = watch.stop()
    assert got.workflow_cpu_share is None and got.other_cpu_share == pytest.approx(0.225)
    assert workflow_share(BEFORE, AFTER, None) is None
    assert workflow_share(None, AFTER, 10) is None and workflow_share(BEFORE, AFTER, 10) == 0.025


def test_the_real_proc_finds_snakemake_above_a_shell(tmp_path):
    """On this machine's own ``/proc``: a program named snakemake (run as ``python
    .../snakemake``) starts a shell that starts the cell's job; the job's workflow is the
    shell and the program, and a job started by anything else has none."""
    import json
    import subprocess
    import sys

    if read_cpu_ticks() is None:
        pytest.skip("no /proc on this machine")
    job = "import json; from numbench.measure.activity import WorkflowCpu; " + (
        "print(json.dumps(WorkflowCpu().pids))"
    )
    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text(
        "import json, os, shlex, subprocess, sys\n"
        f"job = shlex.join([sys.executable, '-c', {job!r}])\n"
        # '; true' keeps the shell alive beside the job (no exec in its place)
        "out = subprocess.run(['/bin/sh', '-c', job + '; true'], capture_output=True, text=True)\n"
        "print(json.dumps({'me': os.getpid(), 'chain': json.loads(out.stdout)}))\n"
    )
    proc = subprocess.run([sys.executable, str(fake)], capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout)
    assert len(got["chain"]) == 2 and got["chain"][-1] == got["me"], got
    alone = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, check=True)
    assert json.loads(alone.stdout) is None
