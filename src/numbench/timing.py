"""One small timer used the same way for every library (in the spirit of
``torch.utils.benchmark.Timer``): it times the first call alone, calibrates the number of
calls per sample, then takes samples until enough are taken or the budget is spent.

Every timed region ends with the adapter's sync, so asynchronous libraries are timed to
completion. Where calls are synchronous (``sync is None``) the loop is a bare call loop, so
the harness adds as little as a ``timeit`` loop does.

On a GPU whose library offers CUDA events (torch, CuPy, Numba), the adapter hands the timer an
``EventTimer``: the same loop (every call followed by the adapter's sync) is then timed by a
pair of events recorded on the device's stream instead of the host clock. The first call is
always timed on the host clock: it holds compilation, which happens on the host.

Per-call latency (every call synced) is what a caller that waits for each result sees. An
asynchronous library (JAX, PyTorch on CUDA, TensorFlow) is used in a loop without waiting: its
calls queue while earlier ones compute, so dispatch hides behind work. ``measure_pipelined``
times that: a loop of calls with a single sync at its end, the time per call when calls are
queued back to back. Every result of the loop is kept alive until that sync, so nothing is
freed or skipped before it runs; where the results would not fit in ``PIPELINE_MEMORY_BYTES``
the queue is bounded: each time that window of results is full, it is waited for and reused.

An operation whose implementations write into their inputs by design (a sort in place) must
not time later calls on the data earlier calls left: the timer is then given ``fresh_args``,
a function that makes one call's arguments afresh (copies of the inputs, on the device), and
every call, the first included, gets its own. The copies are made before the calls that use
them, outside the timed region: a sample of ``loops`` calls is taken in chunks, each chunk's
copies made first and the chunk timed alone, and the chunks' times summed. A chunk holds at
most ``FRESH_ARGS_MEMORY_BYTES`` of copies (and at least one call's), so a fast call on small
inputs does not hold a million copies at once.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: calls per sample never exceed this, however fast the call
MAX_LOOPS = 1_000_000
#: results a pipelined loop may hold alive at once, in bytes (the window of queued calls)
PIPELINE_MEMORY_BYTES = 256 * 2**20
#: fresh copies of the inputs made ahead of the calls that use them, in bytes, at most
#: (the module docstring)
FRESH_ARGS_MEMORY_BYTES = 256 * 2**20


@dataclass(frozen=True)
class TimingSettings:
    """The ``timing`` section of the config. No defaults here: they live in the config
    schema and ``config/config.yaml`` alone."""

    min_sample_time_s: float
    min_samples: int
    max_samples: int
    budget_s: float

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
    sampling_s: float = 0.0  # calibration and sampling, after the first call
    #: results held alive at once by a pipelined loop (None: a per-call measurement)
    window: int | None = None


def result_nbytes(result: Any) -> int:
    """Bytes of a call's result (arrays of any of the libraries, or a tuple or dict of them)."""
    if isinstance(result, dict):
        return sum(result_nbytes(r) for r in result.values())
    if isinstance(result, (tuple, list)):
        return sum(result_nbytes(r) for r in result)
    nbytes = getattr(result, "nbytes", None)
    if nbytes is not None and not callable(nbytes):
        return int(nbytes)
    shape, dtype = getattr(result, "shape", None), getattr(result, "dtype", None)
    itemsize = getattr(dtype, "itemsize", None) or getattr(dtype, "size", None)
    if shape is not None and itemsize:
        return int(math.prod(int(d) for d in shape)) * int(itemsize)
    return 8


def pipeline_window(result: Any, memory_bytes: int = PIPELINE_MEMORY_BYTES) -> int:
    """How many results a pipelined loop may keep alive: as many as fit in ``memory_bytes``."""
    return max(1, memory_bytes // max(1, result_nbytes(result)))


@contextlib.contextmanager
def gc_held():
    """Garbage collection off inside a timed region, and back as it was after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class EventTimer:
    """Times a region between two device events (CUDA events), in seconds.

    ``make_event()`` returns an event with ``record()`` and ``synchronize()``;
    ``elapsed_ms(start, end)`` reads the milliseconds between two recorded events. The region
    ends by waiting on the end event, so everything queued before it is complete.
    """

    def __init__(self, make_event: Callable[[], Any], elapsed_ms: Callable[[Any, Any], float]):
        self.make_event, self.elapsed_ms = make_event, elapsed_ms

    def elapsed_s(self, region: Callable[[], Any]) -> float:
        start, end = self.make_event(), self.make_event()
        start.record()
        region()
        end.record()
        end.synchronize()
        return self.elapsed_ms(start, end) / 1e3


class Timer:
    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple = (),
        sync: Callable[[Any], Any] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        device_timer: EventTimer | None = None,
        fresh_args: Callable[[], tuple] | None = None,
        fresh_memory_bytes: int = FRESH_ARGS_MEMORY_BYTES,
    ):
        self.fn, self.args, self.sync, self.clock = fn, tuple(args), sync, clock
        self.device_timer = device_timer
        self.fresh_args = fresh_args
        #: calls whose fresh arguments are made at once (the module docstring)
        self.fresh_chunk = max(1, fresh_memory_bytes // max(1, result_nbytes(self.args)))
        #: seconds per call in calibration's last loop (sizes a lockstep turn's untimed calls)
        self.calibrated_per_call_s: float | None = None

    def _chunks(self, loops: int):
        """(calls, their fresh arguments) in chunks of at most ``fresh_chunk`` calls, each
        chunk's arguments made before it is handed out (outside any timed region)."""
        done = 0
        while done < loops:
            n = min(self.fresh_chunk, loops - done)
            yield n, [self.fresh_args() for _ in range(n)]
            done += n

    def first_call(self) -> tuple[float, Any]:
        """Time one call alone (tracing, compilation, caches): it never enters the samples."""
        fn, args, sync, clock = self.fn, self.args, self.sync, self.clock
        if self.fresh_args is not None:
            args = self.fresh_args()
        t0 = clock()
        result = fn(*args)
        if sync is not None:
            sync(result)
        return clock() - t0, result

    def time_loops(self, loops: int) -> float:
        """Total seconds for ``loops`` synced calls, garbage collection held off."""
        if self.fresh_args is not None:
            return self._time_loops_fresh(loops)
        if self.device_timer is not None:
            return self._time_loops_on_device(loops)
        fn, args, sync, clock = self.fn, self.args, self.sync, self.clock
        repeat = itertools.repeat(None, loops)
        with gc_held():
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
        return t1 - t0

    def _time_loops_fresh(self, loops: int) -> float:
        """The same synced calls, each on its own fresh arguments, timed chunk by chunk
        (on the device's events where there are some), the making of the copies untimed."""
        total = 0.0
        for _, chunk in self._chunks(loops):
            total += self._time_region(self._synced_calls, chunk)
            del chunk  # freed before the next chunk's copies are made
        return total

    def _synced_calls(self, chunk: list[tuple]) -> None:
        fn, sync = self.fn, self.sync
        for args in chunk:
            result = fn(*args)
            if sync is not None:
                sync(result)

    def _time_region(self, region: Callable[..., None], *args: Any) -> float:
        """Seconds of ``region(*args)``, on the device's events where there are some,
        garbage collection held off."""
        with gc_held():
            if self.device_timer is not None:
                return self.device_timer.elapsed_s(lambda: region(*args))
            t0 = self.clock()
            region(*args)
            return self.clock() - t0

    def _time_loops_on_device(self, loops: int) -> float:
        """The same loop as on the host (each call synced), timed by device events."""
        fn, args, sync = self.fn, self.args, self.sync

        def region() -> None:
            if sync is None:
                for _ in itertools.repeat(None, loops):
                    fn(*args)
            else:
                for _ in itertools.repeat(None, loops):
                    sync(fn(*args))

        with gc_held():
            return self.device_timer.elapsed_s(region)

    def time_pipelined(self, loops: int, window: int | None = None) -> float:
        """Total seconds for ``loops`` calls queued back to back and one sync at the end.

        Every result is kept alive until it is waited for. With ``window`` below ``loops`` at
        most ``window`` results are held: each time the window is full, the whole window is
        waited for and its slots reused (whole, because several libraries' sync waits for the
        device, not one result: a wait per slot would drain the queue at every call). The
        last result is kept as ``self.last_result`` for the output check.

        With ``fresh_args`` each call gets its own arguments: the calls are queued chunk by
        chunk (``_chunks``), each chunk's copies made before it, and each chunk ends with its
        own sync, so the copies are never timed."""
        if self.sync is None:
            raise ValueError("a pipelined loop needs the library's sync (calls are asynchronous)")
        window = loops if window is None else max(1, min(window, loops))
        if self.fresh_args is None:
            calls = itertools.repeat(self.args, loops)
            return self._time_region(self._queued_calls, calls, loops, window)
        elapsed = 0.0
        for n, chunk in self._chunks(loops):
            elapsed += self._time_region(self._queued_calls, chunk, n, min(window, n))
            del chunk
        return elapsed

    def _queued_calls(self, calls: Iterable[tuple], loops: int, window: int) -> None:
        """Queue the ``loops`` calls (one per arguments), ``window`` results alive at most,
        then wait for all; the last result is kept as ``self.last_result``."""
        fn, sync = self.fn, self.sync
        live: list[Any] = [None] * window
        slot = 0
        for args in calls:
            if slot == window:
                sync(live)  # the window is full: wait for all of it, then reuse it
                slot = 0
            live[slot] = fn(*args)
            slot += 1
        sync(live)
        self.last_result = live[(loops - 1) % window]

    def calibrate(
        self,
        min_sample_time_s: float,
        max_loops: int = MAX_LOOPS,
        loops_from: int = 1,
        time_loops: Callable[[int], float] | None = None,
    ) -> int:
        """Fewest calls per sample such that one sample lasts at least ``min_sample_time_s``,
        trying ``loops_from`` calls first (``time_loops`` times a loop: per call by default)."""
        time_loops = self.time_loops if time_loops is None else time_loops
        loops = max(1, min(max_loops, loops_from))
        while True:
            elapsed = time_loops(loops)
            self.calibrated_per_call_s = elapsed / loops
            if elapsed >= min_sample_time_s or loops >= max_loops:
                return loops
            if elapsed <= 0:
                loops = min(max_loops, loops * 10)
                continue
            # Aim 20% past the target so noise does not leave us just short of it.
            wanted = math.ceil(loops * 1.2 * min_sample_time_s / elapsed)
            loops = min(max_loops, max(loops + 1, wanted))

    def take_samples(
        self, settings: TimingSettings, time_loops: Callable[[int], float], loops: int
    ) -> list[float]:
        """Seconds per call, one per sample of ``loops`` calls, until ``max_samples``, or
        until ``budget_s`` is spent once ``min_samples`` are taken."""
        samples: list[float] = []
        started = self.clock()
        while len(samples) < settings.max_samples:
            samples.append(time_loops(loops) / loops)
            if len(samples) >= settings.min_samples and self.clock() - started >= settings.budget_s:
                break
        return samples

    def measure(self, settings: TimingSettings, turns=None) -> Measurement:
        """First call, calibration, samples. With ``turns`` (a lockstep round,
        ``numbench.measure.lockstep.Turns``) the samples are taken in turns with the partner process;
        ``sampling_s`` leaves out the waits for its turns (the partner's time)."""
        first_call_s, result = self.first_call()
        calibration_started = self.clock()
        loops = self.calibrate(settings.min_sample_time_s)
        if turns is None:
            samples = self.take_samples(settings, self.time_loops, loops)
        else:
            samples = turns.take_samples(
                settings, self.time_loops, loops, per_call_s=self.calibrated_per_call_s
            )
        return Measurement(
            first_call_s=first_call_s,
            loops=loops,
            samples_s=samples,
            result=result,
            sampling_s=self.clock() - calibration_started - (turns.waited_s if turns else 0.0),
        )

    def measure_pipelined(self, settings: TimingSettings, loops_from: int = 1) -> Measurement:
        """Samples of the time per call when calls are queued back to back (one sync per
        sample's loop), after the per-call measurement: the first call is behind us, so
        ``first_call_s`` is 0 here, and one waited-for call sizes the window. ``sampling_s``
        is all it cost. ``loops_from``: the per-call calibration's loops, a lower
        bound (a queued call never takes longer than a waited-for one)."""
        started = self.clock()
        _, probe = self.first_call()
        window = pipeline_window(probe)
        del probe

        def timed(loops: int) -> float:
            return self.time_pipelined(loops, window)

        loops = self.calibrate(settings.min_sample_time_s, loops_from=loops_from, time_loops=timed)
        samples = self.take_samples(settings, timed, loops)
        return Measurement(
            first_call_s=0.0,
            loops=loops,
            samples_s=samples,
            result=self.last_result,
            sampling_s=self.clock() - started,
            window=min(window, loops),
        )
