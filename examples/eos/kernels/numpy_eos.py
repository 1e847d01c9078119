"""NumPy: the density written into the temperature array, to save memory (in place)."""

import numpy as np

from .coefficients import H1, H2, P1, P2, P3, R0, R1, R2, R3, S1, S2, S3, Q


def density_inplace(t, s, p):
    """The density, computed into ``t`` (which it overwrites) and returned."""
    rho = R0 + t * (R1 + t * (R2 + t * R3))
    rho += s * (S1 + t * (S2 + t * S3))
    rho += s * np.sqrt(s) * (H1 + t * H2) + Q * s * s
    rho += p * (P1 + t * P2 + p * P3)
    t[...] = rho
    return t
