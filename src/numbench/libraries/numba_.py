"""Numba: on the CPU, the operation's NumPy-style function compiled with ``numba.njit``
(nopython); on the GPU, a ``numba.cuda.jit`` kernel written for the operation.

One adapter for both devices, because it is one library on two targets: the results say
``numba`` on ``cpu`` and ``numba`` on ``gpu``, next to torch and JAX on the same two devices.
The two targets take different code (a NumPy-style function vs a kernel with a launch
configuration), so the family differs by device: ``numba`` on the CPU, ``numba-cuda`` on the
GPU. Operations give a ``numba-cuda`` builder where the operation maps to a kernel simply
(element-wise work) and an ``unsupported`` reason otherwise.
"""

from __future__ import annotations

import math
import re

from .base import Adapter, cpu_only_check, cuda_driver_details, no_options
from .numpy_ import numpy_blas


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip(" :")


def numba_cuda_reason(cuda) -> str:
    """Why numba.cuda sees no GPU, in numba's own words (``cuda.detect()``, driver init)."""
    import contextlib
    import io

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cuda.detect()
        said = out.getvalue()
    except Exception as exc:  # noqa: BLE001 - detect() raises when the driver is missing
        said = f"{out.getvalue()} {exc}"
    return _one_line(said) or "numba.cuda.detect() found no CUDA device"


class NumbaAdapter(Adapter):
    name = "numba"
    family = "numba"
    module = "numba"
    devices = ("cpu", "gpu")
    description = "Numba: numba.njit (nopython) on the CPU, numba.cuda.jit kernels on the GPU"

    def __init__(self, device: str, dtype: str, threads: int):
        super().__init__(device, dtype, threads)
        self.family = "numba-cuda" if device == "gpu" else "numba"
        # njit's on-disk cache (``compile_cache``); a CUDA kernel compiles at each launch
        self.caches_compiles = device == "cpu"

    def environment(self) -> dict[str, str]:
        return {"NUMBA_NUM_THREADS": str(self.threads)}

    def load(self) -> None:
        if self.device == "gpu":
            self._load_cuda()
            return
        cpu_only_check(self)
        import numba
        import numpy

        self._numba = numba
        self._np = numpy

    def _load_cuda(self) -> None:
        import numba
        import numpy

        try:
            from numba import cuda
        except ImportError as exc:
            raise self.gpu_unavailable(f"numba.cuda cannot be imported: {exc}") from exc
        if not cuda.is_available():
            raise self.gpu_unavailable(
                "no CUDA device visible to numba.cuda (numba.cuda.is_available() is False): "
                + numba_cuda_reason(cuda)
            )
        self._numba, self._np, self._cuda = numba, numpy, cuda
        self._simulator = bool(getattr(numba.config, "ENABLE_CUDASIM", False))
        self._baseline_used = self._device_used_bytes()

    @property
    def xp(self):
        # The CPU builders get NumPy (njit compiles NumPy calls); the GPU builders get
        # numba.cuda, to define kernels and allocate device arrays with.
        return self._cuda if self.device == "gpu" else self._np

    def version(self) -> str:
        return self._numba.__version__

    def to_device(self, array):
        if self.device == "gpu":
            placed = self._cuda.to_device(self._np.ascontiguousarray(array, dtype=self.dtype))
            self._cuda.synchronize()
            return placed
        return self._np.ascontiguousarray(array, dtype=self.dtype)

    def compile(self, fn, **options):
        # GPU builders return a host function that launches their cuda.jit kernel; the
        # kernel compiles at its first launch, which lands in first_call_s. On the CPU the
        # options are numba.njit's own (parallel, fastmath, cache, ...).
        if self.device == "gpu":
            no_options(self, options)
            return fn
        if self.compile_folder:
            # the cell's folder (``compile_cache``): njit's cache, keyed by the function's
            # code, its closure's values and the types it is called with
            from numba.core import config

            config.CACHE_DIR = self.compile_folder
            dispatcher = self._numba.njit(fn, **{"cache": True, **options})
            self._cached = [*getattr(self, "_cached", []), dispatcher]
            return dispatcher
        return self._numba.njit(fn, **options)

    def cache_seen(self) -> tuple[int, int] | None:
        cached = getattr(self, "_cached", None)
        if not cached:
            return None
        stats = [d.stats for d in cached]
        loaded = sum(sum(s.cache_hits.values()) for s in stats)
        return loaded, sum(sum(s.cache_misses.values()) for s in stats)

    @property
    def sync(self):  # type: ignore[override]
        if self.device == "gpu":
            cuda = self._cuda
            return lambda _result: cuda.synchronize()
        return None

    def device_timer(self):
        # The simulator's events record no time (elapsed_time is always 0): host clock there.
        if self.device != "gpu" or self._simulator:
            return None
        from numbench.timing import EventTimer

        return EventTimer(self._cuda.event, lambda s, e: s.elapsed_time(e))

    def _to_numpy_one(self, value):
        if hasattr(value, "copy_to_host"):
            return value.copy_to_host()
        return self._np.asarray(value)

    def device_name(self) -> str:
        if self.device == "cpu":
            return super().device_name()
        if self._simulator:
            return "numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1, runs on the CPU)"
        name = self._cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)

    def device_details(self) -> dict[str, str]:
        if self.device == "cpu":
            return {}
        details = {
            "timer": "perf_counter; cuda.synchronize() after every call (latency), once per sample (pipelined)"
            if self._simulator
            else "numba.cuda.event; cuda.synchronize() after every call (latency), once per sample (pipelined)",
            "peak_memory": "device memory in use at the end of the cell less that at load "
            "(driver's view; numba keeps no peak counter)",
        }
        if self._simulator:
            return {**details, "simulator": "NUMBA_ENABLE_CUDASIM=1"}
        cuda = self._cuda
        dev = cuda.get_current_device()
        details.update(cuda_driver_details())
        details["compute_capability"] = ".".join(map(str, dev.compute_capability))
        try:
            details["cuda_runtime_version"] = ".".join(map(str, cuda.runtime.get_version()))
        except Exception:  # noqa: BLE001 - metadata only
            pass
        return details

    def _device_used_bytes(self) -> float | None:
        free, total = self._cuda.current_context().get_memory_info()
        used = float(total) - float(free)
        return used if math.isfinite(used) else None

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu" or self._baseline_used is None:
            return None
        used = self._device_used_bytes()
        return None if used is None else max(0.0, used - self._baseline_used) / 1e6

    def blas(self) -> str:
        return numpy_blas() if self.device == "cpu" else ""

    def threads_used(self) -> int | None:
        return int(self._numba.get_num_threads())
