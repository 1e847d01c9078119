"""1-D FFT of a real vector (the real-input transform, n // 2 + 1 complex outputs)."""

from __future__ import annotations

import math

import numpy as np

from .base import Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.standard_normal(size)}


def reference(a):
    return np.fft.rfft(a)


def _numpy(np_, dtype):
    def fft(a):
        return np_.fft.rfft(a)

    return fft


def _torch(torch, dtype):
    def fft(a):
        return torch.fft.rfft(a)

    return fft


def _tensorflow(tf, dtype):
    def fft(a):
        return tf.signal.rfft(a)

    return fft


OPERATION = Operation(
    name="fft",
    summary="1-D FFT of a real vector of n elements (rfft)",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    # The usual 2.5 n log2 n estimate for a real-input FFT.
    flops=lambda n: 2.5 * n * math.log2(n) if n > 1 else 0.0,
    bytes_moved=lambda n, itemsize: (n + 2 * (n // 2 + 1)) * itemsize,
    input_elements=lambda n: n,
    output_elements=lambda n: 2 * (n // 2 + 1),  # n // 2 + 1 complex numbers
    tolerance={"float32": 1e-4, "float64": 1e-10},
    implementations={
        "numpy": _numpy,
        "jax": _numpy,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "cupy": _numpy,
    },
    unsupported={
        "numba": "Numba's nopython mode has no FFT (numpy.fft is not supported by numba.njit)",
        "numba-cuda": "numba.cuda has no FFT (cuFFT is reached through CuPy, not numba.cuda)",
    },
)
