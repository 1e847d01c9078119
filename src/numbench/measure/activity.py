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

A spread round run as a job of its own (``replicates.spread``) records its own stretch the
same way in its round file, and the cell's job adds it to its own (``combined``): the shares
are those of all the stretches together, each weighted by its length, and the load is the
cell job's. Where ``/proc`` cannot be read (not Linux), all three are None.
"""

from __future__ import annotations

import math
import os
import time
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
    """The three figures of one cell (None: unknown), and the seconds watched."""

    other_cpu_share: float | None
    steal_share: float | None
    load_avg_1m: float | None
    watched_s: float | None = None

    def to_dict(self) -> dict:
        return {
            "other_cpu_share": self.other_cpu_share,
            "steal_share": self.steal_share,
            "load_avg_1m": self.load_avg_1m,
            "watched_s": self.watched_s,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Activity:
        """The figures ``to_dict`` wrote. ``ValueError``, naming the entry, where one is
        neither None nor a finite number >= 0, or ``data`` is no dict."""
        if not isinstance(data, dict):
            raise ValueError(f"the activity entry is {data!r}, not an object of figures")

        def number(name: str) -> float | None:
            value = data.get(name)
            if value is None:
                return None
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"activity's {name} is {value!r}, not a number >= 0 or null")
            return float(value)

        return cls(
            *(number(n) for n in ("other_cpu_share", "steal_share", "load_avg_1m")),
            watched_s=number("watched_s"),
        )


def combined(parts: list[Activity]) -> Activity:
    """The figures of several stretches together (a cell's spread rounds' jobs and its own,
    in that order): each share weighted by its stretch's seconds over the stretches that
    have it; the load the last part's. A part with no share, or watched for no time (its job
    measured nothing: a time cap), adds nothing."""
    if not parts:
        return Activity(None, None, None)
    totals = {}
    for name in ("other_cpu_share", "steal_share"):
        known = [
            (getattr(p, name), p.watched_s)
            for p in parts
            if getattr(p, name) is not None and p.watched_s
        ]
        seconds = sum(s for _, s in known)
        totals[name] = sum(v * s for v, s in known) / seconds if seconds > 0 else None
    watched = sum(p.watched_s or 0.0 for p in parts)
    return Activity(
        totals["other_cpu_share"], totals["steal_share"], parts[-1].load_avg_1m, watched
    )


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ticks, self._own_s, self._load, self._clock = ticks, own_s, load, clock
        if ticks_per_s is None:
            ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._per_s = ticks_per_s
        self._from = (ticks(), own_s(), clock())

    def stop(self) -> Activity:
        (ticks0, own0, t0), ticks1, own1 = self._from, self._ticks(), self._own_s()
        other, steal = shares(ticks0, ticks1, own1 - own0, self._per_s)
        return Activity(other, steal, self._load(), self._clock() - t0)
