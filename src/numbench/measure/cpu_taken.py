"""How much of its CPUs' time other programs took while a worker process measured.

The worker is pinned to its CPUs (``numbench.libraries.pin_cpus``). Whatever else ran on
them meanwhile, another program, interrupts, or the host of a virtual machine stealing the
virtual CPU, lengthened its samples by work that is not the library's: on the 2-core machine
of docs/history.md, one busy loop sharing the worker's CPU took 33 to 46% of it, and
NumPy's FFT took 1.85 times as long. So the share taken is the CPUs' busy time
(``/proc/stat``: everything but idle and I/O wait, steal included) less the process's own
CPU time (every thread, ended ones too), over the wall time and the number of CPUs. A round with a process over ``replicates.max_cpu_taken`` is measured again
(``numbench.measure.replicates.measure_round``).

Not the process's own run delay: a library's threads wait for each other on one CPU (JAX's
dispatch and compute threads on small arrays wait 36 to 38% of the time on a quiet machine,
TensorFlow's up to 31%), which is the library's cost, not the machine's. The busy time
counts in clock ticks (10 ms), so a window of 0.1 s reads within about 0.02 on a quiet
machine. Where ``/proc/stat`` is missing (not Linux), the share is unknown (None).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def own_run_s() -> float:
    """Seconds this process has run on a CPU: every thread, ended ones too."""
    return time.process_time()


def busy_s(cpus: list[int]) -> float | None:
    """Seconds these CPUs have been busy (anything but idle and I/O wait; steal counts)."""
    wanted = {f"cpu{c}" for c in cpus}
    ticks = 0
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                fields = line.split()
                if fields and fields[0] in wanted:
                    # user nice system idle iowait irq softirq steal ...
                    values = [int(v) for v in fields[1:9]]
                    ticks += sum(values) - values[3] - values[4]
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class CpuTaken:
    """Started when made; ``share()`` is the share of the process's CPUs' time since then
    that something else used: about 0 on a quiet machine, 0.5 when one other busy program
    shares the process's only CPU.

    ``pause()`` and ``resume()`` leave out a stretch in which the process waits for another
    to use the CPUs (its partner's turn in a lockstep round, ``numbench.measure.lockstep``): the share
    is then over the stretches it ran in.

    The three readings can be handed in (tests give constructed ones): ``clock`` the wall
    time, ``own_s`` the process's CPU time, ``busy`` the busy time of a list of CPUs (None:
    unknown); ``cpus`` the CPUs (default: the process's affinity)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.perf_counter,
        own_s: Callable[[], float] = own_run_s,
        busy: Callable[[list[int]], float | None] | None = None,
        cpus: list[int] | None = None,
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
        self.wall = self.own = 0.0
        self.busy: float | None = 0.0
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
        self._from = None

    def share(self) -> float | None:
        running = self._from is not None
        self.pause()
        if running:
            self.resume()
        if self.busy is None or self.wall <= 0:
            return None
        # the tick counts read a little low or high: never below 0
        return max(0.0, self.busy - self.own) / (self.wall * len(self.cpus))
