"""What the whole machine did while a cell held the host's timing lock: the share of all its
CPUs' time that other processes took, the share the hypervisor took (steal), and the load.

``numbench.measure.cpu_taken`` judges each worker process on its own CPUs; this is the cell's
record of the machine around it, for a reader of the cell row (and a run's headline) to see
how quiet the machine was while the cell measured. Both come from the aggregate ``cpu`` line
of ``/proc/stat`` read when the cell took the lock and when it let go: of the ticks of all
CPUs meanwhile, ``steal_share`` is the steal, and ``other_cpu_share`` the busy ticks (all but
idle, I/O wait and steal) less the CPU time of the cell's own processes (the supervisor and
every worker it waited for, ``os.times``), never below 0. ``load_avg_1m`` is the 1-minute load
average when the cell let go (``/proc/loadavg``): the cell's own processes count in it.

Only this job's stretch is recorded: rounds spread into jobs of their own (``replicates.
spread``) are not covered. Where ``/proc`` cannot be read (not Linux), all three are None.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numbench.system import cpu_times

#: /proc/stat's columns: user nice system idle iowait irq softirq steal
IDLE, IOWAIT, STEAL = 3, 4, 7


def own_cpu_s() -> float:
    """CPU seconds of this process and of every child it has waited for (the workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def read_cpu_ticks(root: str | os.PathLike = "/") -> list[int] | None:
    try:
        text = (Path(root) / "proc/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return cpu_times(text)


def read_load_1m(root: str | os.PathLike = "/") -> float | None:
    try:
        return float((Path(root) / "proc/loadavg").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Activity:
    """The three figures of one cell (None: unknown)."""

    other_cpu_share: float | None
    steal_share: float | None
    load_avg_1m: float | None


def shares(
    before: list[int] | None, after: list[int] | None, own_s: float, ticks_per_s: float
) -> tuple[float | None, float | None]:
    """(other processes' share, steal share) of the CPUs' ticks between two readings of the
    ``cpu`` line, the cell's own ``own_s`` CPU seconds taken out of the first."""
    if before is None or after is None:
        return None, None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(delta)
    if total <= 0:
        return None, None
    busy = total - delta[IDLE] - delta[IOWAIT] - delta[STEAL]
    other = max(0.0, busy - own_s * ticks_per_s) / total
    return min(1.0, other), delta[STEAL] / total


class ActivityWatch:
    """Started when made; ``stop()`` gives the ``Activity`` since. The readings can be
    handed in (tests give constructed ones)."""

    def __init__(
        self,
        *,
        ticks: Callable[[], list[int] | None] = read_cpu_ticks,
        own_s: Callable[[], float] = own_cpu_s,
        load: Callable[[], float | None] = read_load_1m,
        ticks_per_s: float | None = None,
    ) -> None:
        self._ticks, self._own_s, self._load = ticks, own_s, load
        if ticks_per_s is None:
            ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._per_s = ticks_per_s
        self._from = (ticks(), own_s())

    def stop(self) -> Activity:
        (ticks0, own0), ticks1, own1 = self._from, self._ticks(), self._own_s()
        other, steal = shares(ticks0, ticks1, own1 - own0, self._per_s)
        return Activity(other, steal, self._load())
