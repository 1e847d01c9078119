"""Helpers of the stencil example: the grid its inputs are drawn on and the float64 answer.

They live in a file of their own, beside ``stencil.py``, to show that an operation may
import its own helpers: numbench hashes this file with the operation's, so editing it
measures the operation's cells again.
"""

from __future__ import annotations

import math

import numpy as np

#: the smooth part of the field: this many sine waves along each axis
WAVES = 3
#: the noise added to it, relative to the waves
NOISE = 0.1
#: sin(t) = t - t^3/3! + t^5/5! - ... to t^21/21!: within 1e-10 of sine on [-pi, pi]
SINE_TERMS = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(11))


def sine(t: np.ndarray) -> np.ndarray:
    """sin(t) in elementwise steps of one IEEE operation each (a floor, then Horner's rule):
    the same bits on every host, where np.sin's last bits vary with the CPU and the NumPy
    version, and an offsite import compares the inputs made on both hosts bit for bit."""
    t = t - 2.0 * np.pi * np.floor(t / (2.0 * np.pi) + 0.5)  # into [-pi, pi]
    t2 = t * t
    acc = np.full_like(t, SINE_TERMS[-1])
    for c in SINE_TERMS[-2::-1]:
        acc = acc * t2 + c
    return t * acc


def random_field(n: int, rng: np.random.Generator) -> np.ndarray:
    """An n x n field of a few random sine waves plus a little noise, in float64."""
    x = np.arange(n) / max(n - 1, 1)  # 0 to 1: one division each, unlike linspace's steps
    field = np.zeros((n, n))
    for _ in range(WAVES):
        kx, ky = rng.integers(1, 6, size=2)
        phase = rng.uniform(0.0, 2.0 * np.pi)
        field += sine(2.0 * np.pi * (kx * x[:, None] + ky * x[None, :]) + phase)
    return field + NOISE * rng.standard_normal((n, n))


def laplacian(u: np.ndarray, spacing: float) -> np.ndarray:
    """The 5-point Laplacian of u at its interior points, (n - 2) x (n - 2), in float64."""
    u = np.asarray(u, dtype=np.float64)
    centre = u[1:-1, 1:-1]
    around = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
    return (around - 4.0 * centre) / spacing**2
