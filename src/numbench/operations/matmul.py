"""Dense n x n by n x n matrix product."""

from __future__ import annotations

import numpy as np

from .base import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.standard_normal((size, size)), "b": rng.standard_normal((size, size))}


def reference(a, b):
    return a @ b


def _numpy(np_, dtype):
    def matmul(a, b):
        return np_.matmul(a, b)

    return matmul


def _torch(torch, dtype):
    def matmul(a, b):
        return torch.matmul(a, b)

    return matmul


def _tensorflow(tf, dtype):
    def matmul(a, b):
        return tf.linalg.matmul(a, b)

    return matmul


def _numba(np_, dtype):
    def matmul(a, b):
        return np.dot(a, b)

    return matmul


OPERATION = Operation(
    name="matmul",
    summary="n x n by n x n matrix product",
    input_names=("a", "b"),
    make_inputs=make_inputs,
    reference=reference,
    flops=lambda n: 2.0 * n**3,
    # Every library's matmul does these: BLAS uses no Strassen-like shortcut.
    flops_exact=True,
    bytes_moved=lambda n, itemsize: 3.0 * n * n * itemsize,
    input_elements=lambda n: 2 * n * n,
    output_elements=lambda n: n * n,
    tolerance={"float32": 1e-4, "float64": 1e-10},
    implementations={
        "numpy": _numpy,
        "jax": _numpy,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "numba": _numba,
        "cupy": _numpy,
    },
    unsupported={
        "numba-cuda": "numba.cuda has no BLAS: a hand-written kernel would measure a teaching "
        "example, not the library (CuPy, torch, JAX and TensorFlow call cuBLAS)",
    },
)
