"""Keeps the workflow's own processes off the CPUs a cell's workers are timed on.

A worker pins itself to the lowest-numbered CPUs it may use (``libraries.pin_cpus``), and
``cpu_taken`` counts whatever else ran on them while it measured
(``numbench.measure.cpu_taken``). Snakemake's scheduler runs beside every cell
(docs/method.md, "One timing cell at a time") and, left alone, the kernel puts it on any CPU,
the worker's too. So while a cell (or an early round) measures, with the host's timing lock
held, its supervisor moves the workflow's own processes (``activity.workflow_pids``: the
job's ancestors up to and including Snakemake) to the CPUs they may use other than the
worker's, every thread of each (``/proc/PID/task``: an affinity belongs to one thread), and
gives each thread its own affinity back afterwards, on an error too. A thread one of them
started meanwhile inherited the narrowed affinity: it gets its process's back as well.

Nothing moves where no ancestor is Snakemake (a cell run by ``numbench offsite run`` or by
hand), or where a thread may run on the worker's CPUs alone (``threads`` covering every CPU:
there is nowhere else). A thread that ended, or whose affinity cannot be read or set
(``EPERM``), is skipped. Only the ancestors' own threads are touched: another job of the
workflow (a worker of another cell, waiting for the lock) is no ancestor, and a process
keeps its affinity whatever its parent's.

A job Snakemake started while an earlier cell had it moved inherited the narrowed affinity;
``take_workflow_affinity`` gives the job Snakemake's own back, read with the lock held (once
the earlier cell gave it back), before its workers choose their CPUs from it.

The readings and the affinity calls can be handed in (tests give constructed ones).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from numbench.libraries import chosen_cpus
from numbench.machine.system import thread_ids
from numbench.measure.activity import job_parent, workflow_pids

Cpus = frozenset[int]


def read_affinity(tid: int) -> Cpus | None:
    """The CPUs a thread may run on (0: the calling one); None where it cannot be read."""
    try:
        return frozenset(os.sched_getaffinity(tid))
    except (AttributeError, OSError):
        return None


def write_affinity(tid: int, cpus: Cpus) -> bool:
    """Restrict a thread to ``cpus``; False where it ended or refused (``EPERM``)."""
    try:
        os.sched_setaffinity(tid, cpus)
    except (AttributeError, OSError):
        return False
    return True


#: the most times the moved processes' threads are listed when their affinity is given back
RESTORE_PASSES = 3


class WorkflowApart:
    """Moves the threads of ``pids`` off ``worker_cpus`` when entered and gives them their
    affinity back when left. ``moved``: True where Snakemake's threads (the last of
    ``pids``) were moved, False where none of them could be (no other CPU, or each refused;
    an intermediate process moved alone does not count: Snakemake is what runs beside the
    cells), None where nothing was tried (no workflow's processes, no worker's CPUs
    known)."""

    def __init__(
        self,
        worker_cpus: list[int],
        pids: list[int] | None,
        *,
        tasks: Callable[[int], list[int]] = thread_ids,
        get: Callable[[int], Cpus | None] = read_affinity,
        put: Callable[[int, Cpus], bool] = write_affinity,
    ) -> None:
        self._worker = frozenset(worker_cpus)
        self._pids = pids
        self._tasks, self._get, self._put = tasks, get, put
        #: thread -> (its process, its affinity before, after the move)
        self._saved: dict[int, tuple[int, Cpus, Cpus]] = {}
        self._seen: set[int] = set()
        self.moved: bool | None = None

    def __enter__(self) -> WorkflowApart:
        self.moved = self.move()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def move(self) -> bool | None:
        if not self._pids or not self._worker:
            return None
        for pid in self._pids:
            for tid in self._tasks(pid):
                self._seen.add(tid)
                before = self._get(tid)
                if before is None:
                    continue
                after = before - self._worker
                if after and after != before and self._put(tid, after):
                    self._saved[tid] = (pid, before, after)
        return any(pid == self._pids[-1] for pid, _, _ in self._saved.values())

    def restore(self) -> None:
        """Each moved thread still in its process gets its affinity back; a thread started
        meanwhile with a moved one's narrowed affinity gets its process's first moved
        thread's (the main thread's, as a rule). A thread not yet given its affinity back
        may start another after its process's threads were listed: the listing is repeated
        (at most ``RESTORE_PASSES`` times) until one gives nothing back, that is finds no
        thread not seen before that still has the narrowed affinity."""
        saved, self._saved = self._saved, {}
        first: dict[int, tuple[Cpus, Cpus]] = {}
        for pid, before, after in saved.values():
            first.setdefault(pid, (before, after))
        done: set[int] = set()
        for _ in range(RESTORE_PASSES):
            if not self._restore_pass(saved, first, done):
                break

    def _restore_pass(
        self,
        saved: dict[int, tuple[int, Cpus, Cpus]],
        first: dict[int, tuple[Cpus, Cpus]],
        done: set[int],
    ) -> bool:
        """One listing of the moved processes' threads: those not yet handled (``done``)
        get their affinity back. True where one was given back (a thread may have started
        since the listing)."""
        found = False
        for pid, (before, after) in first.items():
            for tid in self._tasks(pid):
                if tid in done:
                    continue
                done.add(tid)
                if tid in saved:
                    self._put(tid, saved[tid][1])
                    found = True
                elif tid not in self._seen and self._get(tid) == after:
                    self._put(tid, before)
                    found = True
        return found


def take_workflow_affinity(
    pids: list[int] | None,
    *,
    own: list[int] | None = None,
    tasks: Callable[[int], list[int]] = thread_ids,
    get: Callable[[int], Cpus | None] = read_affinity,
    put: Callable[[int, Cpus], bool] = write_affinity,
) -> None:
    """Where this process (``own``: its threads) may run on fewer CPUs than Snakemake (the
    last of ``pids``), it was started while an earlier cell had Snakemake moved: each of
    its threads takes Snakemake's affinity. Nothing changes otherwise."""
    if not pids:
        return
    theirs = get(pids[-1])
    mine = get(0)
    if theirs is None or mine is None or not mine < theirs:
        return
    for tid in tasks(os.getpid()) if own is None else own:
        put(tid, theirs)


def keep_apart(
    threads: int,
    *,
    parent: int | None = None,
    proc: str | os.PathLike = "/proc",
    get: Callable[[int], Cpus | None] = read_affinity,
    put: Callable[[int, Cpus], bool] = write_affinity,
) -> WorkflowApart:
    """The workflow's own processes above this job (``parent``: its parent by default),
    kept off the CPUs a worker of ``threads`` threads started by this job pins itself to;
    enter it with the host's timing lock held."""
    pids = workflow_pids(job_parent() if parent is None else parent, proc)
    tasks = functools.partial(thread_ids, proc=proc)
    take_workflow_affinity(pids, tasks=tasks, get=get, put=put)
    mine = get(0)
    worker = chosen_cpus(mine, threads) if mine else []
    return WorkflowApart(worker, pids, tasks=tasks, get=get, put=put)
