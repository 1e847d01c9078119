"""The machine's quiet around a measurement: waiting for it before a cell measures, if
asked, and measuring again what other programs disturbed.

**Waiting for quiet** (the config's ``wait_for_quiet``): before a cell (or an early round)
measures, with the host's timing lock held so that no cell of numbench's own runs
meanwhile, the supervisor samples what the rest of the machine does and starts only once
other processes and the hypervisor (steal) take at most ``below`` of all CPUs' time, or once
it has waited ``max_wait_s``; then it measures anyway, and the cell records how long it
waited (``quiet_wait_s``) and whether the machine got quiet (``quiet_reached``). Each sample
reads the aggregate ``cpu`` line of ``/proc/stat`` twice, ``QUIET_SAMPLE_S`` apart, as
``numbench.measure.activity`` does for a whole cell (the supervisor's own CPU time taken
out, and the workflow's own processes', Snakemake's scheduler above all: not others). Where
``/proc`` cannot be read, nothing can be judged: it does not wait, and says so.

**The one rule for a disturbed measurement** (``undisturbed``): it is measured again while
something else took more than ``max_cpu_taken`` of its CPUs (the config's
``replicates.max_cpu_taken``), up to ``CPU_TAKEN_RETRIES`` times. Its samples timed the
other program too. The share taken is the worker's own reading
(``numbench.measure.cpu_taken``: its CPUs' busy time less its own). Two kinds of measurement
follow the rule:

* a cell's round (``numbench.measure.replicates.measure_round``): an attempt is the whole
  round, both processes of a paired one, since a busy process would weigh on one side of
  the ratio only; only a process that ended ``ok`` has a share that counts;
* a roof job (``numbench.roofline.measure.RoofJobs``): an attempt is one worker.

Which attempt is kept once the retries are spent differs, and is the caller's to say
(``keep``): a round keeps the last (``LAST``: the cells' results stay what they were before
this rule was shared); a roof, the best of its trials of what the host can do, keeps the
quietest (``QUIETEST``: the attempt whose largest share is least), the one nearest the
undisturbed host. Either way the kept attempt says how many others were measured
(``set_aside``).

**A look before a retry** (``busy_now``): a retry helps only if the other programs have let
go: one that never stops disturbs every retry too, and each retry then costs a whole round
or roof job and keeps a busy one anyway. So the rule looks at the machine for ``LOOK_S``
before each retry and, where what others take would still be over the limit, stops: the
attempts so far are kept as ``keep`` says, and the caller says so (``still_busy``). A look
that cannot tell (None), or none given, lets the retry run as without it. The look counts as
others what a run's headline counts as others (``numbench.measure.activity``): the busy
ticks of the ``cpu`` line over the look, less this process's own CPU time and the workflow's
own processes' (``activity.WorkflowCpu``), as a share of all the CPUs' ticks. The limit is a
share of the worker's CPUs (``cpu_taken``'s unit), so the look gives that: the share of a
worker of ``threads`` threads' CPUs that the others' demand cannot avoid
(``worker_share``). Others that fit on the CPUs the worker leaves free need not take any of
its CPUs; only what is left over must.

The readings, the sleep and the clock can be handed in (tests give constructed ones).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from numbench.machine.system import clock_ticks_per_s
from numbench.measure.activity import (
    Reading,
    WorkflowCpu,
    own_cpu_s,
    read_cpu_ticks,
    sample_shares,
)

#: seconds of one sample of the machine's load while waiting
QUIET_SAMPLE_S = 1.0
#: a waiting job says in its log how busy the machine still is this often
QUIET_REPORT_S = 60.0


@dataclass(frozen=True)
class QuietWait:
    """How a wait for quiet went: seconds waited, whether the machine got quiet (None: it
    could not be read), and the others' share of the last sample."""

    waited_s: float
    reached: bool | None
    share: float | None


def wait_for_quiet(
    below: float,
    max_wait_s: float,
    *,
    ticks: Callable[[], list[int] | None] = read_cpu_ticks,
    own_s: Callable[[], float] = own_cpu_s,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    ticks_per_s: float | None = None,
    sample_s: float = QUIET_SAMPLE_S,
    workflow: Callable[[], Reading | None] | None = None,
) -> QuietWait:
    """Sample the machine until others take at most ``below`` of all CPUs' time, or until
    ``max_wait_s`` has passed; the ``QuietWait``. ``workflow``: reads the workflow's own
    processes (``activity.WorkflowCpu``, made here by default), not counted as others."""
    if not 0 < below <= 1 or max_wait_s < 0:
        raise ValueError(f"need 0 < below <= 1 and max_wait_s >= 0, not {below}, {max_wait_s}")
    if ticks_per_s is None:
        ticks_per_s = clock_ticks_per_s()
    workflow = WorkflowCpu() if workflow is None else workflow
    start = last_report = clock()
    while True:
        sampled = sample_shares(
            sample_s,
            ticks=ticks,
            own_s=own_s,
            workflow=workflow,
            sleep=sleep,
            ticks_per_s=ticks_per_s,
        )
        if sampled is None:
            print("wait_for_quiet: /proc/stat cannot be read; measuring without waiting")
            return QuietWait(clock() - start, None, None)
        other, steal = sampled
        share = None if other is None else other + (steal or 0.0)
        said = "unknown" if share is None else f"{share:.0%}"
        waited = clock() - start
        if share is not None and share <= below:
            if waited > sample_s:
                print(f"wait_for_quiet: others take {share:.0%} after {waited:.0f} s; measuring")
            return QuietWait(waited, True, share)
        if waited >= max_wait_s:
            print(
                f"wait_for_quiet: others still take {said} of the CPUs' time (above {below:g}) "
                f"after {waited:.0f} s (wait_for_quiet.max_wait_s); measuring anyway",
                flush=True,
            )
            return QuietWait(waited, False, share)
        if clock() - last_report >= QUIET_REPORT_S:
            print(f"wait_for_quiet: others take {said} of the CPUs' time; waiting", flush=True)
            last_report = clock()


@dataclass(frozen=True)
class QuietSettings:
    """The config's ``wait_for_quiet``: the others' share to wait for, and the longest wait
    (0: never wait). Not part of a cell's spec: how long a job waits measures nothing else."""

    below: float
    max_wait_s: float

    def wait(self, **readers) -> QuietWait | None:
        """Wait as asked; None where no wait is asked."""
        if self.max_wait_s <= 0:
            return None
        return wait_for_quiet(self.below, self.max_wait_s, **readers)


# -- a look at the machine before a retry ---------------------------------------------------
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
            ticks_per_s = clock_ticks_per_s()
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


# -- the rule for a disturbed measurement -----------------------------------------------------
#: times a measurement is measured again because other programs took its CPUs
CPU_TAKEN_RETRIES = 2
#: which attempt is kept when every one was disturbed: the last, or the least disturbed
LAST, QUIETEST = "last", "quietest"
#: what the callers say when a look at the machine stopped the retries (``still_busy``)
STILL_BUSY = "a retry would time them too; kept as measured"

T = TypeVar("T")


def taken_beyond(shares: Iterable[float | None], limit: float | None) -> list[float]:
    """The shares over ``limit`` (none without a limit; an unknown share is never over)."""
    if limit is None:
        return []
    return [share for share in shares if share is not None and share > limit]


def disturbance(shares: Iterable[float | None]) -> float:
    """The largest known share, 0 where none is known."""
    return max((share for share in shares if share is not None), default=0.0)


def undisturbed(
    measure: Callable[[int], T],
    shares: Callable[[T], Iterable[float | None]],
    limit: float | None,
    again: Callable[[T], None],
    keep: str = LAST,
    *,
    busy_now: Callable[[], float | None] | None = None,
    still_busy: Callable[[T, float], None] | None = None,
) -> tuple[T, int]:
    """Measure (``measure(attempt)``, attempt 0 first); while a share of the attempt
    (``shares``) is over ``limit``, say so (``again``) and measure again, up to
    ``CPU_TAKEN_RETRIES`` times. Returns the attempt kept (``keep``: ``LAST`` or
    ``QUIETEST``) and the number of the others (``set_aside``). Without a limit (None) the
    measurement is taken once.

    ``busy_now`` (None: no look) is called before each retry; where the share it gives is
    over ``limit``, no retry is made: ``still_busy(attempt, share)`` says so, and the
    attempts so far are kept as above."""
    if keep not in (LAST, QUIETEST):
        raise ValueError(f"keep must be {LAST!r} or {QUIETEST!r}, not {keep!r}")
    attempts: list[T] = []
    for attempt in range(CPU_TAKEN_RETRIES + 1):
        attempts.append(measure(attempt))
        if not taken_beyond(shares(attempts[-1]), limit) or attempt == CPU_TAKEN_RETRIES:
            break
        now = None if busy_now is None else busy_now()
        if taken_beyond([now], limit):
            if still_busy is not None:
                still_busy(attempts[-1], now)
            break
        again(attempts[-1])
    if keep == LAST:
        kept = attempts[-1]
    else:
        kept = min(attempts, key=lambda result: disturbance(shares(result)))
    return kept, len(attempts) - 1
