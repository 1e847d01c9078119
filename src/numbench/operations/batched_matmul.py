"""A batch of vectors times one fixed matrix: (batch x 1024) by (1024 x 1024).

The size is the batch: at batch 1 the product is a matrix-vector product bound by reading the
matrix; at large batches it is a compute-bound matrix product. The matrix is drawn once per
seed, the same for every batch size.
"""

from __future__ import annotations

import numpy as np

from . import matmul
from .base import Operation

WIDTH = 1024


def make_fixed(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"w": rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)}


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((size, WIDTH))}


def reference(x, w):
    return x @ w


OPERATION = Operation(
    name="batched_matmul",
    summary=f"(batch x {WIDTH}) by ({WIDTH} x {WIDTH}) matrix product; size = batch",
    input_names=("x", "w"),
    make_inputs=make_inputs,
    make_fixed=make_fixed,
    reference=reference,
    flops=lambda b: 2.0 * b * WIDTH * WIDTH,
    flops_exact=True,  # as matmul's
    # Read x and w once, write the (batch x WIDTH) result once.
    bytes_moved=lambda b, itemsize: (2.0 * b * WIDTH + WIDTH * WIDTH) * itemsize,
    input_elements=lambda b: b * WIDTH + WIDTH * WIDTH,
    output_elements=lambda b: b * WIDTH,
    tolerance={"float32": 1e-4, "float64": 1e-10},
    # The same product as matmul, so the same function per library: only the shapes differ.
    implementations={
        family: matmul.OPERATION.implementations[family]
        for family in ("numpy", "jax", "torch", "tensorflow", "numba", "cupy")
    },
    unsupported={
        "numba-cuda": "numba.cuda has no BLAS: a hand-written matrix-product kernel would time that kernel, not a library's matmul",
    },
)
