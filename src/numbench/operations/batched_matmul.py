"""A batch of vectors times one fixed matrix: (batch x 1024) by (1024 x 1024).

The size is the batch: at batch 1 the product is a matrix-vector product bound by reading the
matrix; at large batches it is a compute-bound matrix product. The matrix is drawn once per
seed, the same for every batch size.
"""

from __future__ import annotations

import numpy as np

from .base import Operation

WIDTH = 1024


def make_fixed(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"w": rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)}


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((size, WIDTH))}


def reference(x, w):
    return x @ w


def _numpy(np_, dtype):
    def batched_matmul(x, w):
        return np_.matmul(x, w)

    return batched_matmul


def _torch(torch, dtype):
    def batched_matmul(x, w):
        return torch.matmul(x, w)

    return batched_matmul


def _tensorflow(tf, dtype):
    def batched_matmul(x, w):
        return tf.linalg.matmul(x, w)

    return batched_matmul


def _numba(np_, dtype):
    def batched_matmul(x, w):
        return np.dot(x, w)

    return batched_matmul


OPERATION = Operation(
    name="batched_matmul",
    summary=f"(batch x {WIDTH}) by ({WIDTH} x {WIDTH}) matrix product; size = batch",
    default_sizes=(1, 4, 16, 64, 256, 1024, 4096),
    input_names=("x", "w"),
    make_inputs=make_inputs,
    make_fixed=make_fixed,
    reference=reference,
    flops=lambda b: 2.0 * b * WIDTH * WIDTH,
    # Read x and w once, write the (batch x WIDTH) result once.
    bytes_moved=lambda b, itemsize: (2.0 * b * WIDTH + WIDTH * WIDTH) * itemsize,
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
        "numba-cuda": "numba.cuda has no BLAS: a hand-written matrix-product kernel would time that kernel, not a library's matmul",
    },
)
