"""CuPy: NumPy's API on a CUDA GPU. GPU only; eager (each call launches its kernels).

Timing: every call is followed by a device-wide synchronize, and the samples are timed by
CUDA events (``cupy.cuda.Event``). Device memory: CuPy's default memory pool has no peak
counter, but it keeps freed blocks for reuse and never shrinks unless asked to, so the bytes it
holds at the end of the cell (``total_bytes``) are the most the cell held at once through the
pool. The pool is emptied of cached blocks after the inputs are placed, so the figure is the
inputs plus what the operation allocated.
"""

from __future__ import annotations

from .base import Adapter, Unavailable, cuda_driver_details, cuda_version_string


class CupyAdapter(Adapter):
    name = "cupy"
    family = "cupy"
    module = "cupy"
    devices = ("gpu",)
    description = "CuPy, eager, CUDA GPU only"

    def environment(self) -> dict[str, str]:
        # float32 products at float32 precision, as in every library here (jax_.py): CuPy's
        # default, set so that a CUPY_TF32=1 in the user's environment does not reach the cell.
        return {"CUPY_TF32": "0"}

    def load(self) -> None:
        if self.device != "gpu":
            raise Unavailable(f"cupy runs on CUDA GPUs only, not on {self.device}")
        try:
            import cupy
        except ImportError as exc:
            raise self.gpu_unavailable(f"cupy cannot be imported: {exc}") from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - CUDARuntimeError and driver load errors
            raise self.gpu_unavailable(f"no CUDA device visible to cupy: {exc}") from exc
        if count < 1:
            raise self.gpu_unavailable("no CUDA device visible to cupy")
        cupy.cuda.Device(0).use()
        self._cp = cupy

    @property
    def xp(self):
        return self._cp

    def version(self) -> str:
        return self._cp.__version__

    def to_device(self, array):
        placed = self._cp.asarray(array.astype(self.dtype, copy=False))
        self._synchronize()  # the copy is complete before anything is timed
        return placed

    def _synchronize(self) -> None:
        self._cp.cuda.Device().synchronize()

    def sync(self, result):  # type: ignore[override]
        self._cp.cuda.Device().synchronize()
        return result

    def device_timer(self):
        from numbench.timing import EventTimer

        cp = self._cp
        return EventTimer(cp.cuda.Event, cp.cuda.get_elapsed_time)

    def _to_numpy_one(self, value):
        return self._cp.asnumpy(value)

    def _properties(self) -> dict:
        return self._cp.cuda.runtime.getDeviceProperties(0)

    def device_name(self) -> str:
        name = self._properties()["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def device_details(self) -> dict[str, str]:
        rt = self._cp.cuda.runtime
        props = self._properties()
        details = {
            **cuda_driver_details(),
            "cuda_runtime_version": cuda_version_string(rt.runtimeGetVersion()),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "memory_total_mb": f"{props['totalGlobalMem'] / 1e6:.0f}",
            "timer": "cupy.cuda.Event; device synchronize after every call (latency), once per sample (pipelined)",
            "peak_memory": "cupy default memory pool, total bytes held at the end",
        }
        details.setdefault("cuda_driver_version", cuda_version_string(rt.driverGetVersion()))
        return details

    def reset_device_peak(self) -> None:
        self._synchronize()
        self._cp.get_default_memory_pool().free_all_blocks()

    def device_peak_mb(self) -> float | None:
        return self._cp.get_default_memory_pool().total_bytes() / 1e6

    def threads_used(self) -> int | None:
        return None  # the GPU's threads are not the cell's CPU threads
