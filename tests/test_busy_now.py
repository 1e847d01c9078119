"""The look at the machine before a retry (``numbench.measure.busy_now``), on constructed
readings of the ``cpu`` line, of this process's CPU time and of the workflow's processes:
it never sleeps here, and counts as others what the run's headline counts as others."""

from __future__ import annotations

import pytest

from numbench.measure.busy_now import BusyNow

#: /proc/stat's cpu columns: user nice system idle iowait irq softirq steal
QUIET = [0, 0, 0, 0, 0, 0, 0, 0]


def cpu_line(busy: int, idle: int, steal: int = 0) -> list[int]:
    return [busy, 0, 0, idle, 0, 0, 0, steal]


def look(ticks, own=(0.0, 0.0), workflow=(None, None), **kwargs):
    """A ``BusyNow`` on constructed readings (each an iterable, read in order); records the
    waits it was asked for."""
    ticks, own, workflow = iter(ticks), iter(own), iter(workflow)
    slept: list[float] = []
    probe = BusyNow(
        ticks=lambda: next(ticks),
        own_s=lambda: next(own),
        workflow=lambda: next(workflow),
        ticks_per_s=100,
        sleep=slept.append,
        **kwargs,
    )
    return probe, slept


def test_others_share_is_the_busy_ticks_less_its_own_and_the_workflows():
    # 200 ticks of 2 CPUs in the look: 150 busy, of which this process 0.2 s (20 ticks) and
    # Snakemake (pid 7, same start time) 30 ticks: others took 100 of 200
    probe, slept = look(
        [cpu_line(1000, 5000), cpu_line(1150, 5050)],
        own=[3.0, 3.2],
        workflow=[{7: (55, 400)}, {7: (55, 430)}],
        look_s=0.75,
    )
    assert probe() == pytest.approx(0.5) and slept == [0.75]


def test_a_quiet_machine_reads_quiet_and_steal_is_not_others():
    probe, _ = look([cpu_line(0, 0, steal=0), cpu_line(10, 150, steal=40)], own=[1.0, 1.1])
    assert probe() == pytest.approx(0.0)


def test_without_the_workflows_processes_all_busy_ticks_but_its_own_are_others():
    probe, _ = look([cpu_line(0, 0), cpu_line(80, 20)], own=[0.0, 0.1])
    assert probe() == pytest.approx(0.7)


def test_an_unreadable_proc_or_no_tick_passed_tells_nothing():
    probe, slept = look([None])
    assert probe() is None and slept == []  # nothing to look at: no wait either
    probe, _ = look([cpu_line(5, 5), None])
    assert probe() is None
    probe, _ = look([cpu_line(5, 5), cpu_line(5, 5)])
    assert probe() is None


@pytest.mark.parametrize("look_s", [0, -1.0])
def test_a_look_of_no_time_is_refused(look_s):
    with pytest.raises(ValueError, match="look at the machine"):
        BusyNow(look_s=look_s, workflow=lambda: None)


def test_the_real_look_reads_this_machine():
    """On Linux the real readers give a share in [0, 1] (``/proc`` is read, never
    asserted on: the machine's load is whatever it is); elsewhere None."""
    share = BusyNow(look_s=0.05)()
    assert share is None or 0.0 <= share <= 1.0
