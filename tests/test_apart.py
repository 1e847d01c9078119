"""The workflow's own processes kept off the CPUs a cell's workers are timed on
(``numbench.measure.apart``): every thread of each ancestor moved and given its affinity back
(on an error too, and a thread started meanwhile as well), nothing else touched; a thread
that vanished or refused is skipped; nothing moves without another CPU or without Snakemake;
a job started while Snakemake was moved takes Snakemake's affinity back; and a real child
process's threads moved and restored on this machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numbench.machine.system import thread_ids
from numbench.measure.activity import Activity, combined
from numbench.measure.apart import (
    RESTORE_PASSES,
    WorkflowApart,
    keep_apart,
    read_affinity,
    take_workflow_affinity,
    write_affinity,
)

BOTH, SPARE = frozenset({0, 1}), frozenset({1})


class Threads:
    """Constructed threads: process -> its thread ids, thread -> its affinity; every call
    that sets one is kept in ``calls``; ``refuse``: threads whose affinity cannot be set."""

    def __init__(self, processes: dict[int, list[int]], refuse=()) -> None:
        self.processes = {pid: list(tids) for pid, tids in processes.items()}
        self.masks = {tid: BOTH for tids in processes.values() for tid in tids}
        self.refuse = set(refuse)
        self.calls: list[tuple[int, frozenset]] = []

    def tasks(self, pid: int) -> list[int]:
        return list(self.processes.get(pid, []))

    def get(self, tid: int):
        return self.masks.get(tid)

    def put(self, tid: int, cpus) -> bool:
        self.calls.append((tid, frozenset(cpus)))
        if tid in self.refuse or tid not in self.masks:
            return False
        self.masks[tid] = frozenset(cpus)
        return True

    def apart(self, worker, pids) -> WorkflowApart:
        return WorkflowApart(worker, pids, tasks=self.tasks, get=self.get, put=self.put)


def test_every_thread_of_the_ancestors_moves_off_the_worker_and_gets_its_affinity_back():
    # Snakemake (200: three threads) above the job's shell (300); another cell's job (400)
    # and its worker (500), children of Snakemake, are no ancestors of this job
    threads = Threads({200: [200, 201, 202], 300: [300], 400: [400], 500: [500]})
    with threads.apart([0], [300, 200]) as apart:
        assert apart.moved is True
        assert all(threads.masks[t] == SPARE for t in (200, 201, 202, 300))
        assert threads.masks[400] == threads.masks[500] == BOTH
        # meanwhile Snakemake starts a thread (it inherits the narrowed affinity) and one ends
        threads.processes[200] = [200, 201, 203]
        threads.masks[203] = SPARE
        del threads.masks[202]
    assert all(threads.masks[t] == BOTH for t in (200, 201, 203, 300))
    touched = {tid for tid, _ in threads.calls}
    assert touched == {200, 201, 202, 203, 300}  # 202 before it ended; never 400 or 500


class Spawning(Threads):
    """Threads whose process ``pid`` starts a new thread each time its threads are listed
    while restoring (after the listing, from a thread not yet given its CPUs back: the new
    one inherits the narrowed affinity), ``spawns`` times at most."""

    def __init__(self, processes, pid: int, spawns: int) -> None:
        super().__init__(processes)
        self.pid, self.spawns, self.listings, self.restoring = pid, spawns, 0, False

    def tasks(self, pid: int) -> list[int]:
        listed = super().tasks(pid)
        if self.restoring and pid == self.pid:
            self.listings += 1
            if self.spawns > 0:
                self.spawns -= 1
                tid = 1000 + self.listings
                self.processes[pid].append(tid)
                self.masks[tid] = SPARE
        return listed


def test_a_thread_started_after_the_listing_gets_its_cpus_back_on_a_later_pass():
    threads = Spawning({200: [200, 201]}, pid=200, spawns=1)
    with threads.apart([0], [200]):
        threads.restoring = True
    # the first listing missed 1001; the second found and restored it, the third nothing new
    assert threads.masks == {200: BOTH, 201: BOTH, 1001: BOTH}
    assert threads.listings == 3


def test_the_restore_lists_the_threads_three_times_at_most():
    threads = Spawning({200: [200]}, pid=200, spawns=10)
    with threads.apart([0], [200]):
        threads.restoring = True
    assert threads.listings == RESTORE_PASSES == 3
    # the first two started meanwhile were given back; the third, after the last listing,
    # is past what a bounded restore can see
    assert threads.masks[1001] == threads.masks[1002] == BOTH
    assert threads.masks[1003] == SPARE


def test_moved_says_whether_snakemake_moved_not_an_intermediate_shell():
    # the job's shell (300) moved, Snakemake (200) refused: Snakemake still runs beside the
    # cell, so the cell records false; the shell gets its CPUs back all the same
    threads = Threads({200: [200, 201], 300: [300]}, refuse={200, 201})
    with threads.apart([0], [300, 200]) as apart:
        assert threads.masks[300] == SPARE
        assert apart.moved is False
    assert threads.masks[300] == BOTH
    # one of Snakemake's threads moved: true, whatever the shell did
    threads = Threads({200: [200, 201], 300: [300]}, refuse={201, 300})
    with threads.apart([0], [300, 200]) as apart:
        assert apart.moved is True


def test_a_thread_that_refuses_or_vanishes_is_skipped_and_an_error_still_restores():
    threads = Threads({200: [200, 201], 300: [300]}, refuse={201})
    del threads.masks[300]  # ended before it was read
    with pytest.raises(RuntimeError), threads.apart([0], [300, 200]) as apart:
        assert apart.moved is True and threads.masks[200] == SPARE
        assert threads.masks[201] == BOTH
        raise RuntimeError("the cell's machinery failed")
    assert threads.masks[200] == BOTH and threads.masks[201] == BOTH
    # every thread refuses: nothing moved, and nothing to give back
    threads = Threads({200: [200]}, refuse={200})
    with threads.apart([0], [200]) as apart:
        assert apart.moved is False
    assert threads.calls == [(200, SPARE)]


def test_nothing_moves_without_another_cpu_or_without_snakemake_above_the_job():
    # the worker takes every CPU the workflow may use (threads = all)
    threads = Threads({200: [200]})
    with threads.apart([0, 1], [200]) as apart:
        assert apart.moved is False
    # a workflow kept to the worker's CPU alone by its user: nowhere else to go
    threads.masks[200] = frozenset({0})
    with threads.apart([0], [200]) as apart:
        assert apart.moved is False
    # no Snakemake above the job (offsite, by hand), or no worker's CPUs known
    for worker, pids in (([0], None), ([0], []), ([], [200])):
        with threads.apart(worker, pids) as apart:
            assert apart.moved is None
    assert threads.calls == []
    # a thread already off the worker's CPUs stays as it is, and nothing is given back
    threads.masks[200] = SPARE
    with threads.apart([0], [200]) as apart:
        assert apart.moved is False
    assert threads.calls == [] and threads.masks[200] == SPARE


def test_a_job_started_while_snakemake_was_moved_takes_snakemake_s_affinity_back():
    threads = Threads({200: [200], 300: [300]})
    own = {0: SPARE}  # this job's threads: it inherited the narrowed affinity

    def get(tid):
        return own[0] if tid == 0 else threads.get(tid)

    def put(tid, cpus):
        own[0] = frozenset(cpus)
        return threads.put(tid, cpus)

    take_workflow_affinity([300, 200], own=[900, 901], get=get, put=put)
    assert own[0] == BOTH and threads.calls == [(900, BOTH), (901, BOTH)]
    # as wide as Snakemake already, wider (its user narrowed Snakemake), or no Snakemake
    for mine, pids in ((BOTH, [300, 200]), (frozenset({0, 1, 2}), [300, 200]), (SPARE, None)):
        own[0], threads.calls = mine, []
        take_workflow_affinity(pids, own=[900], get=get, put=put)
        assert threads.calls == [] and own[0] == mine


def make_task(proc, pid, tids, ppid, argv):
    """A constructed ``/proc/PID``: stat, cmdline and its threads' folders."""
    folder = proc / str(pid)
    for tid in tids:
        (folder / "task" / str(tid)).mkdir(parents=True)
    fields = ["S", str(ppid), *["0"] * 17, "5000", "0"]
    (folder / "stat").write_text(f"{pid} (x) {' '.join(fields)}\n")
    (folder / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))


def test_keep_apart_finds_the_chain_and_the_worker_s_cpus(tmp_path):
    proc = tmp_path / "proc"
    make_task(proc, 1, [1], 0, ["/sbin/init"])
    make_task(proc, 200, [200, 201], 1, ["python", "-m", "snakemake", "--cores", "1"])
    make_task(proc, 300, [300], 200, ["/bin/bash", "-c", "python run_cell.py"])
    assert thread_ids(200, proc) == [200, 201] and thread_ids(999, proc) == []
    threads = Threads({200: [200, 201], 300: [300], 1: [1]})
    masks = {0: BOTH}

    def get(tid):
        return masks[0] if tid == 0 else threads.get(tid)

    # one thread: the worker pins itself to CPU 0, the workflow goes to CPU 1
    with keep_apart(1, parent=300, proc=proc, get=get, put=threads.put) as apart:
        assert apart.moved is True
        assert all(threads.masks[t] == SPARE for t in (200, 201, 300))
        assert threads.masks[1] == BOTH  # init is above Snakemake: no part of the workflow
    assert all(threads.masks[t] == BOTH for t in (1, 200, 201, 300))
    # two threads on two CPUs: nowhere else; no Snakemake above: nothing tried
    with keep_apart(2, parent=300, proc=proc, get=get, put=threads.put) as apart:
        assert apart.moved is False
    with keep_apart(1, parent=1, proc=proc, get=get, put=threads.put) as apart:
        assert apart.moved is None


def test_the_cell_s_record_of_the_move_over_its_stretches():
    def part(moved):
        return Activity(0.0, 0.0, 0.5, 1.0, 0.1, moved)

    assert combined([part(True), part(True)]).workflow_moved is True
    assert combined([part(True), part(False)]).workflow_moved is False
    assert combined([part(None), part(True)]).workflow_moved is True
    assert combined([part(None), part(None)]).workflow_moved is None
    assert Activity.from_dict(part(True).to_dict()) == part(True)
    assert Activity.from_dict({"other_cpu_share": 0.1}).workflow_moved is None
    with pytest.raises(ValueError, match="workflow_moved is 'yes'"):
        Activity.from_dict({"workflow_moved": "yes"})


def test_a_real_process_s_threads_are_moved_and_given_back(tmp_path):
    """On this machine: a child process with a second thread, moved off CPU 0 and back."""
    import subprocess
    import sys

    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs and sched_setaffinity")
    code = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,)).start()\n"
        "print(1, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        tids = thread_ids(child.pid)
        assert len(tids) == 2
        before = {t: read_affinity(t) for t in tids}
        worker = [min(os.sched_getaffinity(0))]
        with WorkflowApart(worker, [child.pid]) as apart:
            assert apart.moved is True
            assert all(read_affinity(t) == before[t] - set(worker) for t in tids)
        assert {t: read_affinity(t) for t in tids} == before
    finally:
        child.kill()
        child.wait()
    # a thread that does not exist (a PID above the kernel's pid_max: never in use, where the
    # reaped child's PID may be in use again) is read as None and refuses a new affinity
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    assert read_affinity(gone) is None and write_affinity(gone, BOTH) is False


def test_sigterm_ends_a_job_through_its_context_managers():
    """The cell's entry point makes SIGTERM raise ``SystemExit(143)`` (``exit_on_sigterm``),
    so the move's ``__exit__`` and the lock's run; in a child process, whose SIGTERM
    handling is its own."""
    import subprocess
    import sys

    code = (
        "import os, signal, time\n"
        "from numbench.measure.host_lock import exit_on_sigterm\n"
        "exit_on_sigterm()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(60)\n"
        "finally:\n"
        "    print('unwound', flush=True)\n"
    )
    ended = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert ended.returncode == 143, ended.stderr
    assert ended.stdout == "unwound\n"
