"""One small timer used the same way for every library (in the spirit of
``torch.utils.benchmark.Timer``): it times the first call alone, calibrates the number of
calls per sample, then takes samples until enough are taken or the budget is spent.

Every timed region ends with the adapter's sync, so asynchronous libraries are timed to
completion. Where calls are synchronous (``sync is None``) the loop is a bare call loop, so
the harness adds as little as a ``timeit`` loop does.
"""

from __future__ import annotations

import gc
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TimingSettings:
    min_sample_time_s: float = 0.02
    min_samples: int = 5
    max_samples: int = 50
    budget_s: float = 2.0
    max_loops: int = 1_000_000

    def __post_init__(self) -> None:
        if self.min_sample_time_s <= 0:
            raise ValueError("min_sample_time_s must be > 0")
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if self.budget_s <= 0:
            raise ValueError("budget_s must be > 0")


@dataclass
class Measurement:
    first_call_s: float
    loops: int
    samples_s: list[float] = field(default_factory=list)  # seconds per call, one per sample
    result: Any = None


class Timer:
    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple = (),
        sync: Callable[[Any], Any] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.fn, self.args, self.sync, self.clock = fn, tuple(args), sync, clock

    def first_call(self) -> tuple[float, Any]:
        """Time one call alone (tracing, compilation, caches): it never enters the samples."""
        fn, args, sync, clock = self.fn, self.args, self.sync, self.clock
        t0 = clock()
        result = fn(*args)
        if sync is not None:
            sync(result)
        return clock() - t0, result

    def time_loops(self, loops: int) -> float:
        """Total seconds for ``loops`` synced calls, garbage collection held off."""
        fn, args, sync, clock = self.fn, self.args, self.sync, self.clock
        repeat = itertools.repeat(None, loops)
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if sync is None:
                t0 = clock()
                for _ in repeat:
                    fn(*args)
                t1 = clock()
            else:
                t0 = clock()
                for _ in repeat:
                    sync(fn(*args))
                t1 = clock()
        finally:
            if gc_was_enabled:
                gc.enable()
        return t1 - t0

    def calibrate(self, min_sample_time_s: float, max_loops: int = 1_000_000) -> int:
        """Fewest calls per sample such that one sample lasts at least ``min_sample_time_s``."""
        loops = 1
        while True:
            elapsed = self.time_loops(loops)
            if elapsed >= min_sample_time_s or loops >= max_loops:
                return loops
            if elapsed <= 0:
                loops = min(max_loops, loops * 10)
                continue
            # Aim 20% past the target so noise does not leave us just short of it.
            wanted = math.ceil(loops * 1.2 * min_sample_time_s / elapsed)
            loops = min(max_loops, max(loops + 1, wanted))

    def measure(self, settings: TimingSettings) -> Measurement:
        first_call_s, result = self.first_call()
        loops = self.calibrate(settings.min_sample_time_s, settings.max_loops)
        samples: list[float] = []
        started = self.clock()
        while len(samples) < settings.max_samples:
            samples.append(self.time_loops(loops) / loops)
            if len(samples) >= settings.min_samples and self.clock() - started >= settings.budget_s:
                break
        return Measurement(first_call_s=first_call_s, loops=loops, samples_s=samples, result=result)
