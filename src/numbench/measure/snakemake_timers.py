"""Keep Snakemake's scheduler from spinning a CPU while cells are measured.

Snakemake (9.x, up to the pinned 9.27.1 at least) ends every pass of its scheduling loop by
starting a timer that wakes the loop again after the rate limiter's timespan
(``--max-jobs-per-timespan``, 1 s by default), so that jobs held back by the limit get
another chance. Each wake-up is a pass, and each pass starts a new timer; but passes also
come from every finished job (``JobScheduler._proceed``), and each of those starts a timer
chain of its own. Chains are never merged: after k finished jobs, k timers wake the loop
every second. On the 2-core machine of docs/history.md the main Snakemake process used
87% of a CPU (top) 11 minutes into a default-grid run, with 110 threads, while the worker next to
it was being timed: a load that grows through the run, beside the measurement. Freeing that
CPU did not change the runs' wall time or the rounds set aside measurably
(docs/history.md, "Snakemake's own CPU"), but a benchmark's orchestrator has no
business spinning a CPU next to it.

``limit_reevaluation_timers`` replaces ``JobScheduler._schedule_reevalutation`` (sic) with a
version that keeps at most one such timer pending. The loop still wakes once per timespan
while anything waits, and on every finished job as before; only the duplicate chains are
gone. The timer is a daemon thread, so a finished run does not wait for it to fire.

It is applied by the workflow (workflow/rules/common.smk) when Snakemake parses it. Set
``NUMBENCH_KEEP_SNAKEMAKE_TIMERS=1`` to leave Snakemake's scheduler as it is.
"""

from __future__ import annotations

import os
import threading

#: the environment variable that leaves Snakemake's own method in place
KEEP_ENV = "NUMBENCH_KEEP_SNAKEMAKE_TIMERS"
_PENDING = "_numbench_reevaluation_pending"
_LOCK = threading.Lock()


def schedule_reevaluation_once(scheduler, delay: float) -> bool:
    """Wake ``scheduler``'s loop (release ``scheduler._open_jobs``) after ``delay`` seconds,
    unless a wake-up it asked for earlier is still pending. True when a timer was started."""
    with _LOCK:
        if getattr(scheduler, _PENDING, False):
            return False
        setattr(scheduler, _PENDING, True)

    def fire() -> None:
        with _LOCK:
            setattr(scheduler, _PENDING, False)
        scheduler._open_jobs.release()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()
    return True


def limit_reevaluation_timers(environ: dict[str, str] | None = None) -> bool:
    """Install ``schedule_reevaluation_once`` on Snakemake's ``JobScheduler``. False (and
    nothing changed) when ``NUMBENCH_KEEP_SNAKEMAKE_TIMERS`` is set to anything but ``0`` or
    empty; raises ``RuntimeError`` when the Snakemake in use has no such method (a version
    this was not written for: check whether it still needs it)."""
    env = os.environ if environ is None else environ
    if env.get(KEEP_ENV, "") not in ("", "0"):
        return False
    from snakemake.scheduling.job_scheduler import JobScheduler

    if not callable(getattr(JobScheduler, "_schedule_reevalutation", None)):
        raise RuntimeError(
            "numbench: this Snakemake has no JobScheduler._schedule_reevalutation; "
            "see src/numbench/measure/snakemake_timers.py, or set "
            f"{KEEP_ENV}=1 to run without the fix"
        )
    JobScheduler._schedule_reevalutation = schedule_reevaluation_once
    return True
