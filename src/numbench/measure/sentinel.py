"""The sentinel: a fixed small kernel, the same in every run and on every machine, timed by
each cell's job just before it measures, so that the run's cells in the order they held the
timing lock (``locked_from_unix``) form a series of the machine's own speed through the run.

The kernel is NumPy's sort of ``SENTINEL_SIZE`` float64 values drawn from a fixed seed (8 MiB;
NumPy's sort uses one thread whatever the config's threads, so the cell's library and settings
never change it). Its size makes a call last milliseconds, long enough to stand above the
timer's and the scheduler's noise, which a sort a quarter of its size did not on the machine it
was chosen on (docs/method.md, "Replicates, pairing and lockstep rounds"). ``SENTINEL_REPEATS``
calls are timed after one untimed call and the fastest counts (``sentinel_s``): a call that
another program interrupted is left out, and what stays is how fast this machine runs the same
work now. A machine slowing down through the run (its clock, a neighbour on the memory bus, a
host under load) shows as ``sentinel_s`` drifting; the run's spread (slowest cell's sentinel
over the fastest's) is in the headline (``numbench.machine.analyse``).

Where NumPy cannot be imported the sentinel is not timed (None).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: what the sentinel sorts, and the seed of its values: never change them, or runs measured
#: before and after no longer compare
SENTINEL_SIZE = 2**20
SENTINEL_SEED = 20261126
#: timed calls; the fastest counts
SENTINEL_REPEATS = 5
#: how the sentinel is named in the docs and the findings
SENTINEL_KERNEL = f"NumPy sort of {SENTINEL_SIZE} float64 values (seed {SENTINEL_SEED})"


def sentinel_kernel() -> Callable[[], object] | None:
    """One call of the sentinel, its values drawn once; None without NumPy."""
    try:
        import numpy as np
    except ImportError:
        return None
    values = np.random.default_rng(SENTINEL_SEED).random(SENTINEL_SIZE)
    return lambda: np.sort(values, kind="quicksort")


def time_sentinel(
    kernel: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    repeats: int = SENTINEL_REPEATS,
) -> float | None:
    """Seconds of the fastest of ``repeats`` timed calls of ``kernel`` (the sentinel's by
    default) after one untimed call; None where there is no kernel."""
    if repeats < 1:
        raise ValueError(f"the sentinel needs at least one timed call, not {repeats}")
    kernel = sentinel_kernel() if kernel is None else kernel
    if kernel is None:
        return None
    kernel()
    best = math.inf
    for _ in range(repeats):
        t0 = clock()
        kernel()
        best = min(best, clock() - t0)
    return best
