"""Numba: one loop over the points, written for ``numba.prange``: compiled serial, prange
runs as range; compiled with ``parallel=True``, its iterations are spread over the threads."""

import math

import numpy as np
from numba import prange

from .coefficients import H1, H2, P1, P2, P3, R0, R1, R2, R3, S1, S2, S3, Q


def density(t, s, p):
    out = np.empty_like(t)
    for i in prange(t.shape[0]):
        ti, si, pi = t[i], s[i], p[i]
        out[i] = (
            R0
            + ti * (R1 + ti * (R2 + ti * R3))
            + si * (S1 + ti * (S2 + ti * S3))
            + si * math.sqrt(si) * (H1 + ti * H2)
            + Q * si * si
            + pi * (P1 + ti * P2 + pi * P3)
        )
    return out
