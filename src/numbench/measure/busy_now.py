"""How busy other programs keep the machine now: a short look (``LOOK_S``) before a disturbed
measurement is measured again (``numbench.measure.disturbed.undisturbed``'s ``busy_now``).

A retry helps only if the other programs have let go: one that never stops disturbs every
retry too, and each retry then costs a whole round or roof job and keeps a busy one anyway.
The look counts as others what a run's headline counts as others
(``numbench.measure.activity``): the busy ticks of the aggregate ``cpu`` line of
``/proc/stat`` over the look, less this process's own CPU time and less the workflow's own
processes' (its ancestors up to Snakemake and the other jobs under it:
``activity.WorkflowCpu``), as a share of all the CPUs' ticks. Where ``/proc`` cannot be read (not Linux), or no tick passed, the share is None:
unknown, and the measurement is measured again as without a look.

The limit it is compared with (``replicates.max_cpu_taken``) is a share of the worker's CPUs
(``cpu_taken``'s unit), so the look gives that: the share of a worker of ``threads`` threads'
CPUs that the others' demand cannot avoid (``worker_share``). Others that fit on the CPUs
the worker leaves free need not take any of its CPUs; only what is left over must.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from numbench.measure.activity import (
    Reading,
    WorkflowCpu,
    own_cpu_s,
    read_cpu_ticks,
    sample_shares,
)

#: seconds the machine is looked at before a retry: long enough for a scheduler tick or
#: fifty, short beside a round or a roof job
LOOK_S = 0.5


def worker_share(share_all: float, cpus: int, threads: int) -> float:
    """The share of a worker's CPUs (``threads`` of them, at most ``cpus``) that others
    taking ``share_all`` of all ``cpus`` CPUs' time cannot avoid: their demand in CPUs, less
    the CPUs the worker leaves free, over the worker's CPUs, within [0, 1]."""
    if not isinstance(cpus, int) or cpus < 1:
        raise ValueError(f"the machine's CPUs must be a whole number >= 1, not {cpus!r}")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"a worker's threads must be a whole number >= 1, not {threads!r}")
    threads = min(threads, cpus)
    demand = share_all * cpus
    return min(1.0, max(0.0, demand - (cpus - threads)) / threads)


class BusyNow:
    """Called with a worker's ``threads``, looks at the machine for ``look_s`` seconds and
    gives the share of that worker's CPUs that what other programs took meanwhile cannot
    avoid (``worker_share``; None: unknown). The readings, the wait, the clock's tick rate
    and the number of CPUs (``cpus``: those the ``cpu`` line counts, ``os.cpu_count()``) can
    be handed in (tests give constructed ones and never sleep); by default the real ones,
    the workflow's processes found when made."""

    def __init__(
        self,
        *,
        look_s: float = LOOK_S,
        ticks: Callable[[], list[int] | None] = read_cpu_ticks,
        own_s: Callable[[], float] = own_cpu_s,
        workflow: Callable[[], Reading | None] | None = None,
        ticks_per_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        cpus: int | None = None,
    ) -> None:
        if not look_s > 0:
            raise ValueError(f"the look at the machine must last > 0 s, not {look_s!r}")
        self._look_s, self._ticks, self._own_s, self._sleep = look_s, ticks, own_s, sleep
        self._workflow = WorkflowCpu() if workflow is None else workflow
        if ticks_per_s is None:
            ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._per_s = ticks_per_s
        self._cpus = (os.cpu_count() or 1) if cpus is None else cpus

    def __call__(self, threads: int) -> float | None:
        sampled = sample_shares(
            self._look_s,
            ticks=self._ticks,
            own_s=self._own_s,
            workflow=self._workflow,
            sleep=self._sleep,
            ticks_per_s=self._per_s,
        )
        other = None if sampled is None else sampled[0]
        return None if other is None else worker_share(other, self._cpus, threads)


def busy_now(threads: int) -> float | None:
    """The real look for a worker of ``threads`` threads (``BusyNow`` made now, for the
    workflow's processes of this moment)."""
    return BusyNow()(threads)
