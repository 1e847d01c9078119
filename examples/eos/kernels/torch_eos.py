"""PyTorch: the density under ``torch.compile``, as the model calls it (the first call of each
shape compiles it, with a C compiler on the CPU)."""

import torch

from .coefficients import H1, H2, P1, P2, P3, R0, R1, R2, R3, S1, S2, S3, Q


@torch.compile
def density(t, s, p):
    return (
        R0
        + t * (R1 + t * (R2 + t * R3))
        + s * (S1 + t * (S2 + t * S3))
        + s * torch.sqrt(s) * (H1 + t * H2)
        + Q * s * s
        + p * (P1 + t * P2 + p * P3)
    )
