"""NumPy: the baseline, eager, CPU only."""

from __future__ import annotations

from .base import Adapter, affinity_count, cpu_only_check


class NumpyAdapter(Adapter):
    name = "numpy"
    family = "numpy"
    module = "numpy"
    description = "NumPy, eager"

    def load(self) -> None:
        cpu_only_check(self)
        import numpy

        self._np = numpy

    @property
    def xp(self):
        return self._np

    def version(self) -> str:
        return self._np.__version__

    def to_device(self, array):
        return self._np.ascontiguousarray(array, dtype=self.dtype)

    def blas(self) -> str:
        return numpy_blas()

    def threads_used(self) -> int | None:
        return numpy_threads()


def numpy_threads() -> int:
    """The threads of NumPy's BLAS (threadpoolctl, where installed), else the CPUs this
    process may run on."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return affinity_count()
    counts = [int(p["num_threads"]) for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else affinity_count()


def numpy_blas() -> str:
    """The BLAS NumPy was built against, e.g. 'scipy-openblas 0.3.30'."""
    try:
        import numpy

        cfg = numpy.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - metadata only, never fatal
        return ""
