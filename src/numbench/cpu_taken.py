"""How much of its CPUs' time other programs took while a worker process measured.

The worker is pinned to its CPUs (``numbench.libraries.pin_cpus``). Whatever else ran on
them meanwhile, another program, interrupts, or the host of a virtual machine stealing the
virtual CPU, lengthened its samples by work that is not the library's: on the 2-core machine
of docs/performance.md, one busy loop sharing the worker's CPU took 33 to 46% of it, and
NumPy's FFT took 1.85 times as long. So the share taken is the CPUs' busy time
(``/proc/stat``: everything but idle and I/O wait, steal included) less the process's own
CPU time (every thread, ended ones too), over the wall time and the number of CPUs. A round with a process over ``replicates.max_cpu_taken`` is measured again
(``numbench.replicates.measure_round``).

Not the process's own run delay: a library's threads wait for each other on one CPU (JAX's
dispatch and compute threads on small arrays wait 36 to 38% of the time on a quiet machine,
TensorFlow's up to 31%), which is the library's cost, not the machine's. The busy time
counts in clock ticks (10 ms), so a window of 0.1 s reads within about 0.02 on a quiet
machine. Where ``/proc/stat`` is missing (not Linux), the share is unknown (None).
"""

from __future__ import annotations

import os
import time


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
    shares the process's only CPU."""

    def __init__(self) -> None:
        try:
            self.cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.cpus = []
        self.started = time.perf_counter()
        self.own = own_run_s()
        self.busy = busy_s(self.cpus) if self.cpus else None

    def share(self) -> float | None:
        wall = time.perf_counter() - self.started
        own = own_run_s()
        busy = busy_s(self.cpus) if self.cpus else None
        if self.busy is None or busy is None or wall <= 0:
            return None
        # the tick counts read a little low or high: never below 0
        return max(0.0, (busy - self.busy) - (own - self.own)) / (wall * len(self.cpus))
