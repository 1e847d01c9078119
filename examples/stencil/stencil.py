"""A user's own operation for numbench: the 5-point Laplacian stencil of a 2-D grid.

Given an n x n grid ``u`` (the size is n) it computes, at every interior point,

    (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1] - 4 u[i, j]) / spacing**2

an (n - 2) x (n - 2) result: the discrete Laplacian of heat flow and Poisson solvers, and
memory-bound like them. ``spacing`` is a parameter (the grid's step, default 1).

numbench reads the module-level ``OPERATION``. Every library gets the same function of
the grid: NumPy, JAX, PyTorch, TensorFlow and CuPy through one array-style builder (they
share slicing and arithmetic), Numba as explicit loops, which ``numba.njit`` compiles.
"""

from __future__ import annotations

import numpy as np
from grids import laplacian, random_field

from numbench import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"u": random_field(size, rng)}


def reference(u, *, spacing):
    return laplacian(u, spacing)


def _arrays(xp, dtype, *, spacing):
    """NumPy, jax.numpy, torch, tensorflow and cupy: slices and arithmetic alike."""
    scale = 1.0 / spacing**2

    def stencil(u):
        around = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
        return (around - 4.0 * u[1:-1, 1:-1]) * scale

    return stencil


def _numba(np_, dtype, *, spacing):
    """Loops over the interior, compiled by numba.njit (nopython)."""
    scale = 1.0 / spacing**2

    def stencil(u):
        n, m = u.shape
        out = np.empty((n - 2, m - 2), dtype=u.dtype)
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                around = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                out[i - 1, j - 1] = (around - 4.0 * u[i, j]) * scale
        return out

    return stencil


OPERATION = Operation(
    name="stencil",
    summary="5-point Laplacian stencil of an n x n grid, at its (n - 2) x (n - 2) interior points",
    input_names=("u",),
    make_inputs=make_inputs,
    reference=reference,
    params={"spacing": 1.0},
    # four additions, a multiplication by 4 and a subtraction, and the scaling, per point
    flops=lambda n, spacing: 6.0 * (n - 2) ** 2,
    # the grid read once and the result written once
    bytes_moved=lambda n, itemsize, spacing: (n * n + (n - 2) ** 2) * itemsize,
    input_elements=lambda n, spacing: n * n,
    output_elements=lambda n, spacing: (n - 2) ** 2,
    tolerance={"float32": 1e-5, "float64": 1e-12},
    implementations={
        "numpy": _arrays,
        "jax": _arrays,
        "torch": _arrays,
        "tensorflow": _arrays,
        "cupy": _arrays,
        "numba": _numba,
    },
)
