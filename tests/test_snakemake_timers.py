"""The fix for Snakemake's multiplying scheduler timers (numbench.measure.snakemake_timers)."""

from __future__ import annotations

import threading
import time

import pytest

from numbench.measure.snakemake_timers import (
    KEEP_ENV,
    limit_reevaluation_timers,
    schedule_reevaluation_once,
)


class FakeScheduler:
    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def releases(sem: threading.Semaphore) -> int:
    n = 0
    while sem.acquire(blocking=False):
        n += 1
    return n


def test_one_pending_wake_up_however_many_passes_ask():
    s = FakeScheduler()
    started = [schedule_reevaluation_once(s, 0.2) for _ in range(50)]
    assert started.count(True) == 1
    time.sleep(0.5)
    assert releases(s._open_jobs) == 1


def test_a_fired_wake_up_lets_the_next_pass_ask_again():
    s = FakeScheduler()
    assert schedule_reevaluation_once(s, 0.05)
    time.sleep(0.3)
    assert releases(s._open_jobs) == 1
    assert schedule_reevaluation_once(s, 0.05)
    time.sleep(0.3)
    assert releases(s._open_jobs) == 1


def test_schedulers_do_not_share_a_pending_wake_up():
    a, b = FakeScheduler(), FakeScheduler()
    assert schedule_reevaluation_once(a, 0.05)
    assert schedule_reevaluation_once(b, 0.05)
    time.sleep(0.3)
    assert releases(a._open_jobs) == 1 and releases(b._open_jobs) == 1


def test_the_timer_does_not_hold_up_exit():
    s = FakeScheduler()
    before = set(threading.enumerate())
    schedule_reevaluation_once(s, 30)
    timers = [t for t in set(threading.enumerate()) - before if isinstance(t, threading.Timer)]
    assert len(timers) == 1 and timers[0].daemon
    for t in timers:
        t.cancel()


def test_upstream_loop_multiplies_timers_and_the_fix_does_not():
    """Snakemake's own method starts a timer per call: the chains it leaves multiply."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    original = JobScheduler._schedule_reevalutation
    if original is schedule_reevaluation_once:
        pytest.skip("the fix is already installed in this process")
    s = FakeScheduler()
    for _ in range(5):
        original(s, 0.1)
    time.sleep(0.5)
    assert releases(s._open_jobs) == 5


def test_installs_on_the_pinned_snakemake(monkeypatch):
    from snakemake.scheduling.job_scheduler import JobScheduler

    monkeypatch.setattr(
        JobScheduler, "_schedule_reevalutation", JobScheduler._schedule_reevalutation
    )
    assert limit_reevaluation_timers(environ={}) is True
    assert JobScheduler._schedule_reevalutation is schedule_reevaluation_once


def test_the_environment_can_keep_snakemakes_own(monkeypatch):
    from snakemake.scheduling.job_scheduler import JobScheduler

    own = JobScheduler._schedule_reevalutation
    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", own)
    assert limit_reevaluation_timers(environ={KEEP_ENV: "1"}) is False
    assert JobScheduler._schedule_reevalutation is own


def test_a_snakemake_without_the_method_is_named(monkeypatch):
    from snakemake.scheduling.job_scheduler import JobScheduler

    monkeypatch.delattr(JobScheduler, "_schedule_reevalutation")
    with pytest.raises(
        RuntimeError, match="_schedule_reevalutation.*NUMBENCH_KEEP_SNAKEMAKE_TIMERS"
    ):
        limit_reevaluation_timers(environ={})
