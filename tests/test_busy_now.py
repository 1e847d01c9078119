"""The look at the machine before a retry (``numbench.measure.quiet.busy_now``), on constructed
readings of the ``cpu`` line, of this process's CPU time and of the workflow's processes:
it never sleeps here, counts as others what the run's headline counts as others, and gives
the share of the worker's CPUs that the others' demand cannot avoid (the unit of
``replicates.max_cpu_taken``)."""

from __future__ import annotations

import pytest

from numbench.measure.quiet import BusyNow, worker_share

#: /proc/stat's cpu columns: user nice system idle iowait irq softirq steal
QUIET = [0, 0, 0, 0, 0, 0, 0, 0]


def cpu_line(busy: int, idle: int, steal: int = 0) -> list[int]:
    return [busy, 0, 0, idle, 0, 0, 0, steal]


def look(ticks, own=(0.0, 0.0), workflow=(None, None), cpus=2, **kwargs):
    """A ``BusyNow`` on constructed readings (each an iterable, read in order) of a machine
    of ``cpus`` CPUs; records the waits it was asked for."""
    ticks, own, workflow = iter(ticks), iter(own), iter(workflow)
    slept: list[float] = []
    probe = BusyNow(
        ticks=lambda: next(ticks),
        own_s=lambda: next(own),
        workflow=lambda: next(workflow),
        ticks_per_s=100,
        sleep=slept.append,
        cpus=cpus,
        **kwargs,
    )
    return probe, slept


def test_others_share_is_the_busy_ticks_less_its_own_and_the_workflows():
    # 200 ticks of 2 CPUs in the look: 150 busy, of which this process 0.2 s (20 ticks) and
    # Snakemake (pid 7, same start time) 30 ticks: others took 100 of 200; a worker of both
    # CPUs cannot avoid any of it
    probe, slept = look(
        [cpu_line(1000, 5000), cpu_line(1150, 5050)],
        own=[3.0, 3.2],
        workflow=[{7: (55, 400)}, {7: (55, 430)}],
        look_s=0.75,
    )
    assert probe(2) == pytest.approx(0.5) and slept == [0.75]


def test_a_quiet_machine_reads_quiet_and_steal_is_not_others():
    probe, _ = look([cpu_line(0, 0, steal=0), cpu_line(10, 150, steal=40)], own=[1.0, 1.1])
    assert probe(2) == pytest.approx(0.0)


def test_without_the_workflows_processes_all_busy_ticks_but_its_own_are_others():
    probe, _ = look([cpu_line(0, 0), cpu_line(80, 20)], own=[0.0, 0.1])
    assert probe(2) == pytest.approx(0.7)


def test_an_unreadable_proc_or_no_tick_passed_tells_nothing():
    probe, slept = look([None])
    assert probe(1) is None and slept == []  # nothing to look at: no wait either
    probe, _ = look([cpu_line(5, 5), None])
    assert probe(1) is None
    probe, _ = look([cpu_line(5, 5), cpu_line(5, 5)])
    assert probe(1) is None


@pytest.mark.parametrize("look_s", [0, -1.0])
def test_a_look_of_no_time_is_refused(look_s):
    with pytest.raises(ValueError, match="look at the machine"):
        BusyNow(look_s=look_s, workflow=lambda: None)


def test_two_cpus_one_thread_two_busy_disturbers_block_the_retry_one_does_not():
    # 2 CPUs, a worker of 1 thread: two busy loops elsewhere (all of both CPUs) leave the
    # worker's CPU nothing: a retry would be disturbed throughout
    probe, _ = look([cpu_line(0, 0), cpu_line(200, 0)])
    assert probe(1) == pytest.approx(1.0)
    # one busy loop (half of all): it fits on the CPU the worker leaves free
    probe, _ = look([cpu_line(0, 0), cpu_line(100, 100)])
    assert probe(1) == pytest.approx(0.0)


def test_on_sixteen_cpus_two_busy_loops_leave_a_one_thread_worker_alone():
    # 1600 ticks over the look: two busy loops take 200 (0.125 of all the CPUs), which the
    # 15 CPUs a one-thread worker leaves free hold; a 16-thread worker cannot avoid them
    probe, _ = look([cpu_line(0, 0), cpu_line(200, 1400)], cpus=16)
    assert probe(1) == pytest.approx(0.0)
    probe, _ = look([cpu_line(0, 0), cpu_line(200, 1400)], cpus=16)
    assert probe(16) == pytest.approx(0.125)
    # fifteen loops and a half fill the others, and half a CPU is left for the worker's
    probe, _ = look([cpu_line(0, 0), cpu_line(1550, 50)], cpus=16)
    assert probe(1) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "share_all, cpus, threads, unavoidable",
    [
        (1.0, 2, 1, 1.0),  # two disturbers on two CPUs
        (0.5, 2, 1, 0.0),  # one: the other CPU holds it
        (0.75, 2, 1, 0.5),
        (0.125, 16, 1, 0.0),  # two loops of sixteen CPUs
        (0.125, 16, 16, 0.125),  # a worker of every CPU takes its share
        (0.5, 16, 4, 0.0),  # eight loops fit on the twelve CPUs left
        (0.875, 16, 4, 0.5),  # fourteen: two of them on the worker's four
        (0.5, 2, 4, 0.5),  # more threads than CPUs: the worker has every CPU
        (0.0, 1, 1, 0.0),
    ],
)
def test_the_share_of_the_worker_s_cpus_others_cannot_avoid(share_all, cpus, threads, unavoidable):
    assert worker_share(share_all, cpus, threads) == pytest.approx(unavoidable)


@pytest.mark.parametrize("cpus, threads", [(0, 1), (2, 0), (2, 1.5), (None, 1)])
def test_a_machine_or_worker_of_no_cpus_is_refused(cpus, threads):
    with pytest.raises(ValueError, match="whole number >= 1"):
        worker_share(0.5, cpus, threads)


def test_the_real_look_reads_this_machine():
    """A smoke test of the real readers, not of the figure: on Linux they give a share in
    [0, 1] (``/proc`` is read, never asserted on: the machine's load is whatever it is);
    elsewhere None."""
    share = BusyNow(look_s=0.05)(1)
    assert share is None or 0.0 <= share <= 1.0
