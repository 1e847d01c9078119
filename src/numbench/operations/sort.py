"""1-D ascending sort."""

from __future__ import annotations

import numpy as np

from .base import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.standard_normal(size)}


def reference(a):
    return np.sort(a)


def _numpy(np_, dtype):
    def sort(a):
        return np_.sort(a)

    return sort


def _torch(torch, dtype):
    def sort(a):
        return torch.sort(a).values

    return sort


def _tensorflow(tf, dtype):
    def sort(a):
        return tf.sort(a)

    return sort


def _numba(np_, dtype):
    def sort(a):
        return np.sort(a)

    return sort


OPERATION = Operation(
    name="sort",
    summary="ascending sort of a vector of n elements",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    # No flops: a sort's work is comparisons (about n log2 n), not floating-point arithmetic,
    # so it has no GFLOP/s and no place on the flop-per-byte axis: the roofline holds it
    # against the bandwidth roof of its working set by its bytes.
    bytes_moved=lambda n, itemsize: 2.0 * n * itemsize,
    input_elements=lambda n: n,
    output_elements=lambda n: n,
    tolerance={"float32": 1e-6, "float64": 1e-14},
    implementations={
        "numpy": _numpy,
        "jax": _numpy,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "numba": _numba,
        "cupy": _numpy,
    },
    unsupported={
        "numba-cuda": "numba.cuda has no device sort; a parallel sort is not a simple kernel",
    },
)
