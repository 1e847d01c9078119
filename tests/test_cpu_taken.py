"""The share of a worker's CPUs that other programs took while it measured
(numbench.measure.cpu_taken), on constructed readings of the clock, of the process's CPU
time and of the CPUs' busy time; and the process's own CPU time with real child processes
(in CPU seconds, never wall time)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import Machine

from numbench.machine.system import children
from numbench.measure import cpu_taken
from numbench.measure.cpu_taken import CpuTaken


def test_another_busy_program_on_the_same_cpu_is_seen():
    machine = Machine(cpus=1)
    taken = machine.taken()
    # two busy programs on one CPU: each gets about half of it
    machine.run(wall_s=0.5, own_s=0.25, others_s=0.25)
    assert taken.share() == pytest.approx(0.5)
    assert machine.asked and all(cpus == [0] for cpus in machine.asked)


def test_the_process_own_threads_are_not_another_program():
    # two of the process's own threads share its one CPU: all of its busy time is the
    # process's own CPU time (every thread's), so nothing was taken
    machine = Machine(cpus=1)
    taken = machine.taken()
    machine.run(wall_s=0.5, own_s=0.5, others_s=0.0)
    assert taken.share() == pytest.approx(0.0)


def test_the_process_own_time_counts_threads_that_have_ended():
    """The reading ``own_run_s`` gives: a thread's CPU time stays in it once the thread has
    ended (CPU time, not wall time: true on a busy machine too)."""
    spent = []

    def work():
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.05:
            pass
        spent.append(time.thread_time() - t0)

    before = cpu_taken.own_run_s()
    helper = threading.Thread(target=work)
    helper.start()
    helper.join()
    assert cpu_taken.own_run_s() - before >= spent[0] * 0.99


def test_a_paused_stretch_is_not_counted_as_taken():
    machine = Machine(cpus=1)
    taken = machine.taken()
    taken.pause()
    machine.run(wall_s=0.5, own_s=0.0, others_s=0.5)  # the partner's turn: not ours
    taken.resume()
    machine.run(wall_s=0.5, own_s=0.5, others_s=0.0)
    assert taken.share() == pytest.approx(0.0)
    # the same stretch unpaused reads as half the CPU taken
    machine = Machine(cpus=1)
    taken = machine.taken()
    machine.run(wall_s=0.5, own_s=0.0, others_s=0.5)
    machine.run(wall_s=0.5, own_s=0.5, others_s=0.0)
    assert taken.share() == pytest.approx(0.5)


def test_the_share_is_over_all_the_process_s_cpus_and_reading_it_goes_on():
    machine = Machine(cpus=2)
    taken = machine.taken()
    machine.run(wall_s=1.0, own_s=1.0, others_s=0.5)
    assert taken.share() == pytest.approx(0.25)  # 0.5 of 2 CPU-seconds
    machine.run(wall_s=1.0, own_s=2.0, others_s=0.0)  # still running after a reading
    assert taken.share() == pytest.approx(0.125)
    pausing = machine.taken()
    pausing.pause()
    pausing.pause()  # twice: the second does nothing
    assert pausing.share() is None  # no time ran


def test_a_busy_reading_below_the_process_s_own_time_is_0():
    # the busy time counts in clock ticks: it can read a little below the process's own
    machine = Machine(cpus=1)
    taken = machine.taken()
    machine.wall += 0.1
    machine.own += 0.1
    machine.busy += 0.09
    assert taken.share() == 0.0


def _turns(machine, taken, turns: int, own_s: float, others_s: float, extra_tick_in: int) -> None:
    """``turns`` stretches of a lockstep worker, each its own ``own_s`` and others'
    ``others_s``, the partner's turns paused; in turn ``extra_tick_in`` the busy count
    reads one tick high, as a stretch that straddles a tick does."""
    for turn in range(turns):
        machine.run(wall_s=own_s + others_s, own_s=own_s, others_s=others_s)
        if turn == extra_tick_in:
            machine.busy += machine.tick_s
        taken.pause()
        machine.run(wall_s=0.004, own_s=0.0, others_s=0.004)  # the partner's turn
        taken.resume()


def test_a_tick_misread_over_many_short_turns_is_not_taken():
    # twelve turns of 8 ms, nothing else running, one tick (10 ms) read high: 0.104 of the
    # 96 ms the worker ran, over replicates.max_cpu_taken = 0.1 were it counted
    machine = Machine(cpus=1, tick_s=0.01)
    taken = machine.taken()
    _turns(machine, taken, turns=12, own_s=0.008, others_s=0.0, extra_tick_in=5)
    assert taken.stretches == 12
    assert taken.share() == 0.0


def test_a_program_sharing_the_cpu_over_many_short_turns_is_still_taken():
    # another busy program takes half of each 16 ms turn: 96 ms of the 192 the worker's
    # turns lasted; the twelve readings' error (10 ms times the square root of 12, 35 ms)
    # leaves 61 ms, 0.32 of the CPU, far over 0.1
    machine = Machine(cpus=1, tick_s=0.01)
    taken = machine.taken()
    _turns(machine, taken, turns=12, own_s=0.008, others_s=0.008, extra_tick_in=-1)
    assert 0.3 < taken.share() < 0.33


def test_unknown_where_the_os_does_not_tell(monkeypatch):
    machine = Machine(cpus=1)
    machine.busy = None
    assert machine.taken().share() is None
    monkeypatch.setattr(cpu_taken, "busy_s", lambda cpus: None)
    assert CpuTaken().share() is None  # the module's reading, by default
    assert CpuTaken(cpus=[]).share() is None  # no CPUs known


def test_busy_time_is_read_per_cpu(tmp_path, monkeypatch):
    # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
    stat = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 1 0 2 50 40 0 0 3 0 0\ncpu1 10 0 20 70 60 1 1 30 0 0\n"
    real_open = open

    def fake_open(path, *args, **kwargs):
        if path == "/proc/stat":
            path = tmp_path / "stat"
            path.write_text(stat)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    tick = os.sysconf("SC_CLK_TCK")
    assert cpu_taken.busy_s([0]) == pytest.approx(6 / tick)
    assert cpu_taken.busy_s([0, 1]) == pytest.approx(68 / tick)


def test_a_child_process_s_time_is_the_process_s_own_not_taken():
    """A library's compiler or compile workers run as child processes (XLA's ``ptxas``,
    ``torch.compile``'s C compiler): their CPU time is the process's own, alive or waited for."""
    machine = Machine(cpus=1)
    child = {"live": 0.0, "waited": 0.0}
    own = functools.partial(
        cpu_taken.own_run_s,
        process_s=lambda: machine.own,
        waited_s=lambda: child["waited"],
        live_s=lambda: child["live"],
    )
    taken = CpuTaken(
        clock=lambda: machine.wall, own_s=own, busy=machine.busy_of, cpus=[0], tick_s=0.0
    )
    threads_only = machine.taken()  # the process's threads alone, as before children counted
    # the process and its live child share its one CPU, half each
    machine.run(wall_s=0.5, own_s=0.25, others_s=0.25)
    child["live"] += 0.25
    assert taken.share() == pytest.approx(0.0)
    assert threads_only.share() == pytest.approx(0.5)
    # the child ends and is waited for: its time moves from the live reading to the waited one
    child["live"], child["waited"] = 0.0, 0.25
    machine.run(wall_s=0.5, own_s=0.5, others_s=0.0)
    assert taken.share() == pytest.approx(0.0)
    # another program beside them is still seen
    machine.run(wall_s=1.0, own_s=0.5, others_s=0.5)
    assert taken.share() == pytest.approx(0.25)


def _stat(pid: int, comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # fields after the command: state, ppid ... (utime is the 12th, from 0 the 11th)
    return f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 99\n"


def test_live_descendants_are_read_from_proc_each_once(tmp_path):
    """Every thread's children (a child belongs to the thread that started it), their
    children in turn, each with the children it waited for (cutime, cstime); one that ended
    while the tree was read is skipped, and a constructed loop is read once."""
    proc = tmp_path / "proc"

    def write(path: str, text: str) -> None:
        (proc / path).parent.mkdir(parents=True, exist_ok=True)
        (proc / path).write_text(text)

    write("self/task/100/children", "200 300 ")
    write("self/task/101/children", "400")  # started by another thread
    write("self/task/102/stat", "")  # a thread without a children file: skipped
    write("200/stat", _stat(200, "ptxas (a) b", 10, 5, 2, 1))  # a parenthesis in its name
    write("200/task/200/children", "500")
    write("500/stat", _stat(500, "worker", 7, 0, 0, 0))
    write("500/task/500/children", "200")  # a loop: 200 is read once
    # 300 ended between the listing and the reading: nothing of it is left to read
    write("400/stat", _stat(400, "compile", 3, 3, 0, 0))
    assert sorted(children("self", proc)) == [200, 300, 400]
    assert cpu_taken.live_descendants_s(proc=proc, tick_s=0.01) == pytest.approx(0.31)
    # where /proc cannot tell, no live descendant is seen
    assert children("self", tmp_path / "none") == []
    assert cpu_taken.live_descendants_s(proc=tmp_path / "none", tick_s=0.01) == 0.0


#: a child that burns CPU seconds (``argv[2]``) itself or in a grandchild, says how many its
#: burner ran, and holds on idle until its stdin is closed
BURN = """
import resource, subprocess, sys, time
mode, burn_s = sys.argv[1], float(sys.argv[2])
if mode == "child":
    t0 = time.process_time()
    while time.process_time() - t0 < burn_s:
        pass
    print(time.process_time(), flush=True)
    sys.stdin.read()
elif mode == "live grandchild":
    subprocess.run([sys.executable, __file__, "child", str(burn_s)], check=True)
else:  # the grandchild has ended and the child waited for it
    subprocess.run(
        [sys.executable, __file__, "child", str(burn_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True,
    )
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(usage.ru_utime + usage.ru_stime, flush=True)
    sys.stdin.read()
"""
#: CPU seconds the burner runs
BURN_S = 0.3


def _children_files() -> bool:
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


@pytest.mark.skipif(not _children_files(), reason="no /proc/PID/task/TID/children here")
@pytest.mark.parametrize("mode", ["child", "live grandchild", "waited-for grandchild"])
def test_a_real_child_s_cpu_time_counts_as_the_process_s_own_once(tmp_path, mode):
    """CPU seconds only, never wall time: true on a busy machine too. The burner's seconds
    count while its process lives, once it has ended (a zombie) and once it is waited for;
    no reading counts more than the descendants ran in all (nothing is counted twice)."""
    script = tmp_path / "burn.py"
    script.write_text(BURN)
    slack = 5 / os.sysconf("SC_CLK_TCK")  # /proc counts whole ticks, each field rounded down
    before, mine_before = cpu_taken.own_run_s(), time.process_time()
    child = subprocess.Popen(
        [sys.executable, str(script), mode, str(BURN_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        burnt = float(child.stdout.readline())  # waits, idle, until the burner is done
        assert burnt >= BURN_S
        readings = {"live": cpu_taken.own_run_s() - before}
        mine = {"live": time.process_time() - mine_before}
        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not waited for
        readings["zombie"] = cpu_taken.own_run_s() - before
        mine["zombie"] = time.process_time() - mine_before
    finally:
        child.stdin.close()
        child.wait()
    readings["waited"] = cpu_taken.own_run_s() - before
    descendants_ran = readings["waited"] - (time.process_time() - mine_before)
    assert descendants_ran >= burnt - slack
    for when in ("live", "zombie"):
        assert readings[when] >= burnt - slack, when
        assert readings[when] - mine[when] <= descendants_ran + slack, when


def test_a_child_waited_for_during_the_walk_is_counted_once():
    """The waited-for time moves between the read before the walk and the one after it (a
    child reaped meanwhile, gone from /proc): the pair is read again, so its time is counted
    once, neither lost nor doubled."""
    waited = iter([1.0, 1.5, 1.5])
    walks = iter([0.0, 0.0])  # the child was reaped before the walk reached it
    total = cpu_taken.own_run_s(
        process_s=lambda: 10.0, waited_s=lambda: next(waited), live_s=lambda: next(walks)
    )
    assert total == 11.5
    # a steady reading takes one walk
    calls = []
    steady = cpu_taken.own_run_s(
        process_s=lambda: 10.0,
        waited_s=lambda: 2.0,
        live_s=lambda: calls.append(1) or 0.25,
    )
    assert steady == 12.25 and len(calls) == 1
