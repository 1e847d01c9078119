"""Waiting for quiet, if asked (the config's ``wait_for_quiet``): before a cell (or a spread
round) measures, with the host's timing lock held so that no cell of numbench's own runs
meanwhile, the supervisor samples what the rest of the machine does and starts only once other
processes and the hypervisor (steal) take at most ``below`` of all CPUs' time, or once it has
waited ``max_wait_s``; then it measures anyway, and the cell records how long it waited
(``quiet_wait_s``) and whether the machine got quiet (``quiet_reached``).

Each sample reads the aggregate ``cpu`` line of ``/proc/stat`` twice, ``QUIET_SAMPLE_S`` apart,
as ``numbench.measure.activity`` does for a whole cell (the supervisor's own CPU time taken
out, and the workflow's own processes', Snakemake's scheduler above all: not others). Where ``/proc`` cannot be read, nothing can be judged: it does not wait, and says so.
The readings, the sleep and the clock can be handed in (tests give constructed ones).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

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
        ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
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
