"""a + b, a * b and sin(a) in one call: memory-bound element-wise work."""

from __future__ import annotations

import numpy as np

from .base import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.uniform(-np.pi, np.pi, size), "b": rng.uniform(-1.0, 1.0, size)}


def reference(a, b):
    return a + b, a * b, np.sin(a)


def _numpy(np_, dtype):
    def elementwise(a, b):
        return np_.add(a, b), np_.multiply(a, b), np_.sin(a)

    return elementwise


def _torch(torch, dtype):
    def elementwise(a, b):
        return torch.add(a, b), torch.mul(a, b), torch.sin(a)

    return elementwise


def _tensorflow(tf, dtype):
    def elementwise(a, b):
        return tf.add(a, b), tf.multiply(a, b), tf.sin(a)

    return elementwise


def _numba(np_, dtype):
    def elementwise(a, b):
        return a + b, a * b, np.sin(a)

    return elementwise


def _numba_cuda(cuda, dtype):
    """One kernel (see ``_numba_cuda.py``): each thread writes the three outputs of its elements."""
    from ._numba_cuda import elementwise_kernel, grid_1d

    def elementwise(a, b):
        outputs = tuple(cuda.device_array_like(a) for _ in range(3))
        blocks, threads = grid_1d(a.shape[0])
        elementwise_kernel[blocks, threads](a, b, *outputs)
        return outputs

    return elementwise


OPERATION = Operation(
    name="elementwise",
    summary="a + b, a * b and sin(a) on two vectors of n elements, in one call",
    input_names=("a", "b"),
    make_inputs=make_inputs,
    reference=reference,
    flops=lambda n: 3.0 * n,
    bytes_moved=lambda n, itemsize: 5.0 * n * itemsize,
    input_elements=lambda n: 2 * n,
    output_elements=lambda n: 3 * n,
    tolerance={"float32": 1e-5, "float64": 1e-12},
    implementations={
        "numpy": _numpy,
        "jax": _numpy,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "numba": _numba,
        "cupy": _numpy,
        "numba-cuda": _numba_cuda,
    },
)
