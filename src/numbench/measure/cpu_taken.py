"""How much of its CPUs' time other programs took while a worker process measured.

The worker is pinned to its CPUs (``numbench.libraries.pin_cpus``). Whatever else ran on them
meanwhile, another program, interrupts, or the host of a virtual machine stealing the virtual
CPU, lengthened its samples by work that is not the library's: one busy loop sharing the
worker's CPU takes a large share of it and slows the cell's kernel markedly (the figures:
docs/history.md, "Reproducibility: fourteen run pairs"). So the share taken is the CPUs' busy
time (``/proc/stat``: everything but idle and I/O wait, steal included) less the process's own
CPU time, over the wall time and the number of CPUs. A round with a process over
``replicates.max_cpu_taken`` is measured again (``numbench.measure.replicates.measure_round``).

The process's own CPU time (``own_run_s``) is every thread's, ended ones too, and that of its
child processes, which inherit its CPUs: a library's compiler runs (XLA's ``ptxas`` on a GPU,
most likely; ``torch.compile``'s C compiler on the CPU) are its own cost, not another program's
(counted as others', JAX's GPU cells read as busy on a quiet host and every round was measured
again: docs/history.md, "The first run on a GPU host"). The children it waited for count
through ``getrusage(RUSAGE_CHILDREN)`` (with those they waited for); then the live descendants,
zombies included, through ``/proc/PID/task/TID/children`` and each one's ``/proc/PID/stat``
(its own time and its waited-for children's). A descendant waited for during the walk would be
in neither reading, never in both, so ``own_run_s`` reads the waited-for time again after the
walk; one whose parent ended without waiting for it leaves the tree, its time with it. Where
``/proc`` cannot tell, only the children waited for count.

Not the process's own run delay: a library's threads wait for each other on one CPU (JAX's
dispatch and compute threads on small arrays, TensorFlow's, for a good part of the time even
on a quiet machine), which is the library's cost, not the machine's.

The busy time counts in clock ticks (10 ms): each stretch read (a lockstep worker reads one
per turn) is off by up to a tick either way, its error spread as the difference of two
uniform phases (a standard deviation of 0.41 tick). Over n stretches the errors add up to
about 0.41 tick times the square root of n, which on a quiet machine read as others taking
a tenth of a short turn-by-turn window, and had the round measured again for nothing. So
``share()`` counts only what others took beyond the readings' own error: a tick times the
square root of n (about 2.4 standard deviations) is taken off first. Where ``/proc/stat``
is missing (not Linux), the share is unknown (None).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from numbench.machine.system import (
    CSTIME,
    CUTIME,
    IDLE,
    IOWAIT,
    STIME,
    UTIME,
    clock_ticks_per_s,
    descendants,
    pid_stat,
    read_cpu_lines,
)


def _ticks(pid: int, proc: str | os.PathLike) -> int | None:
    """CPU ticks of a process and of the children it waited for; None where it ended."""
    stat = pid_stat(pid, proc)
    if stat is None:
        return None
    try:
        return sum(int(stat[1][i]) for i in (UTIME, STIME, CUTIME, CSTIME))
    except (ValueError, IndexError):
        return None


def live_descendants_s(
    pid: int | str = "self", proc: str | os.PathLike = "/proc", tick_s: float | None = None
) -> float:
    """CPU seconds of the live descendants of ``pid`` (zombies, not yet waited for,
    included), each with the children it waited for; 0 where ``/proc`` cannot tell.
    ``tick_s``: seconds per clock tick (default the system's)."""
    if tick_s is None:
        tick_s = 1 / clock_ticks_per_s()
    ticks = 0
    for kid in descendants(pid, proc):
        own = _ticks(kid, proc)
        ticks += own or 0  # None: ended and waited for since it was listed
    return ticks * tick_s


def waited_children_s() -> float:
    """CPU seconds of the children this process waited for, and of the children they
    waited for (``RUSAGE_CHILDREN``); 0 where the OS does not tell."""
    try:
        import resource
    except ImportError:  # not Unix
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_run_s(
    *,
    process_s: Callable[[], float] = time.process_time,
    waited_s: Callable[[], float] = waited_children_s,
    live_s: Callable[[], float] = live_descendants_s,
) -> float:
    """Seconds this process has run on a CPU, every thread, ended ones too, with its child
    processes': those it waited for, then the live ones. A child waited for between those
    two reads would be in neither (never in both): the waited-for time is read again after
    the walk, and the pair read again while it moved (three tries at most). The three
    readings can be handed in."""
    waited = waited_s()
    for _ in range(3):
        live = live_s()
        again = waited_s()
        if again == waited:
            break
        waited = again
    return process_s() + waited + live


def busy_s(cpus: list[int]) -> float | None:
    """Seconds these CPUs have been busy (anything but idle and I/O wait; steal counts)."""
    lines = read_cpu_lines()
    if lines is None:
        return None
    ticks = 0
    for name in {f"cpu{c}" for c in cpus}:
        if (values := lines.get(name)) is not None:
            ticks += sum(values) - values[IDLE] - values[IOWAIT]
    return ticks / clock_ticks_per_s()


class CpuTaken:
    """Started when made; ``share()`` is the share of the process's CPUs' time since then
    that something else used: about 0 on a quiet machine, 0.5 when one other busy program
    shares the process's only CPU.

    ``pause()`` and ``resume()`` leave out a stretch in which the process waits for another
    to use the CPUs (its partner's turn in a lockstep round, ``numbench.measure.lockstep``): the share
    is then over the stretches it ran in.

    The three readings can be handed in (tests give constructed ones): ``clock`` the wall
    time, ``own_s`` the process's CPU time, ``busy`` the busy time of a list of CPUs (None:
    unknown); ``cpus`` the CPUs (default: the process's affinity); ``tick_s`` the busy
    time's resolution (default: the system's clock tick; 0 for exact readings)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.perf_counter,
        own_s: Callable[[], float] = own_run_s,
        busy: Callable[[list[int]], float | None] | None = None,
        cpus: list[int] | None = None,
        tick_s: float | None = None,
    ) -> None:
        if cpus is None:
            try:
                cpus = sorted(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                cpus = []
        self.cpus = list(cpus)
        self._clock, self._own_s = clock, own_s
        # None: the module's busy_s, looked up at each reading
        self._busy = busy
        if tick_s is None:
            tick_s = 1 / clock_ticks_per_s()
        self.tick_s = tick_s
        self.wall = self.own = 0.0
        self.busy: float | None = 0.0
        #: the stretches read so far, each off by up to a tick
        self.stretches = 0
        self.resume()

    def _now(self) -> tuple[float, float, float | None]:
        busy = busy_s if self._busy is None else self._busy
        return self._clock(), self._own_s(), busy(self.cpus) if self.cpus else None

    def resume(self) -> None:
        self._from = self._now()

    def pause(self) -> None:
        if self._from is None:
            return
        (w0, o0, b0), (w1, o1, b1) = self._from, self._now()
        self.wall += w1 - w0
        self.own += o1 - o0
        self.busy = None if self.busy is None or b0 is None or b1 is None else self.busy + b1 - b0
        self.stretches += 1
        self._from = None

    def share(self) -> float | None:
        running = self._from is not None
        self.pause()
        if running:
            self.resume()
        if self.busy is None or self.wall <= 0:
            return None
        # what the tick counts cannot tell from none is not counted, and never below 0
        error_s = self.tick_s * math.sqrt(self.stretches)
        return max(0.0, self.busy - self.own - error_s) / (self.wall * len(self.cpus))
