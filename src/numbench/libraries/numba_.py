"""Numba: the operation's NumPy-style function compiled with ``numba.njit`` (nopython)."""

from __future__ import annotations

from .base import Adapter, cpu_only_check
from .numpy_ import numpy_blas


class NumbaAdapter(Adapter):
    name = "numba"
    family = "numba"
    module = "numba"
    description = "Numba, numba.njit (nopython mode), CPU"

    def environment(self) -> dict[str, str]:
        return {"NUMBA_NUM_THREADS": str(self.threads)}

    def load(self) -> None:
        cpu_only_check(self)
        import numba
        import numpy

        self._numba = numba
        self._np = numpy

    @property
    def xp(self):
        return self._np

    def version(self) -> str:
        return self._numba.__version__

    def to_device(self, array):
        return self._np.ascontiguousarray(array, dtype=self.dtype)

    def compile(self, fn):
        return self._numba.njit(fn)

    def blas(self) -> str:
        return numpy_blas()
