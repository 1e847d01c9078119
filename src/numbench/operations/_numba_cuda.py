"""Numba CUDA kernels of the operations that map to a kernel simply (element-wise work).

Imported only by the ``numba-cuda`` builders, in a cell's worker after the adapter has found a
GPU: importing ``numba.cuda`` is not free, and the registry must stay cheap to read. The
kernels name ``cuda`` as a module global, as Numba's documentation does, so they run unchanged
on a GPU and in Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, which the tests use).
An element-wise operation adds its kernel here and a three-line launcher in its module.
"""

from __future__ import annotations

import math

from numba import cuda

#: threads per block of the 1-D kernels
THREADS_PER_BLOCK = 256


def grid_1d(n: int, threads: int = THREADS_PER_BLOCK) -> tuple[int, int]:
    """(blocks, threads per block) covering ``n`` elements; kernels use a grid-stride loop."""
    return max(1, math.ceil(n / threads)), threads


@cuda.jit
def elementwise_kernel(a, b, total, product, sine):
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        total[i] = a[i] + b[i]
        product[i] = a[i] * b[i]
        sine[i] = math.sin(a[i])


@cuda.jit
def poly_kernel(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        out[i] = -4.0 * v * v * v + 9.0 * v * v + 6.0 * v - 3.0
