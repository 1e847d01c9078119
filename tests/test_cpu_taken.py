"""The share of a worker's CPUs that other programs took while it measured
(numbench.measure.cpu_taken), on constructed readings of the clock, of the process's CPU
time and of the CPUs' busy time. The same cases on the real machine (a busy program on the
worker's CPU, the process's own threads, a paused stretch) are measured and printed by
benchmarks/timing_checks.py: their figures depend on what else the machine runs."""

from __future__ import annotations

import os
import threading
import time

import pytest
from conftest import Machine

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
