"""f(x) = -4x^3 + 9x^2 + 6x - 3 element-wise: the fusion test.

Written as the published JAX-vs-NumPy comparison writes it, term by term: eager NumPy makes a
temporary array per term, while ``jax.jit``, ``tf.function`` and Numba can fuse the whole
polynomial into one pass over x.
"""

from __future__ import annotations

import numpy as np

from .base import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.uniform(-2.0, 2.0, size)}


def reference(x):
    return -4.0 * x**3 + 9.0 * x**2 + 6.0 * x - 3.0


def _array_expression(xp, dtype):
    # NumPy and jax.numpy: Python floats are weak scalars, the work stays in the input dtype.
    def poly(x):
        return -4.0 * x**3 + 9.0 * x**2 + 6.0 * x - 3.0

    return poly


def _numba(np_, dtype):
    # Numba fuses the array expression into one loop; its float literals are float64, so
    # typed constants keep float32 work in float32.
    real = np.dtype(dtype).type
    c3, c2, c1, c0 = real(-4.0), real(9.0), real(6.0), real(3.0)

    def poly(x):
        return c3 * x**3 + c2 * x**2 + c1 * x - c0

    return poly


def _numba_cuda(cuda, dtype):
    """One kernel (see ``_numba_cuda.py``): each thread evaluates the polynomial on its elements."""
    from ._numba_cuda import grid_1d, poly_kernel

    def poly(x):
        out = cuda.device_array_like(x)
        blocks, threads = grid_1d(x.shape[0])
        poly_kernel[blocks, threads](x, out)
        return out

    return poly


def _torch(torch, dtype):
    def poly(x):
        return -4.0 * x**3 + 9.0 * x**2 + 6.0 * x - 3.0

    return poly


def _tensorflow(tf, dtype):
    def poly(x):
        return -4.0 * x**3 + 9.0 * x**2 + 6.0 * x - 3.0

    return poly


OPERATION = Operation(
    name="poly",
    summary="f(x) = -4x^3 + 9x^2 + 6x - 3 element-wise on a vector of n elements",
    input_names=("x",),
    make_inputs=make_inputs,
    reference=reference,
    # As written: x^3 (2 multiplies), x^2 (1), three scalings and three additions.
    flops=lambda n: 9.0 * n,
    bytes_moved=lambda n, itemsize: 2.0 * n * itemsize,
    input_elements=lambda n: n,
    output_elements=lambda n: n,
    tolerance={"float32": 1e-5, "float64": 1e-12},
    implementations={
        "numpy": _array_expression,
        "jax": _array_expression,
        "numba": _numba,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "cupy": _array_expression,
        "numba-cuda": _numba_cuda,
    },
)
