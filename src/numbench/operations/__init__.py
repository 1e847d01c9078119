"""The operation registry: one module per operation, each exporting ``OPERATION``."""

from __future__ import annotations

import zlib

import numpy as np

from . import batched_matmul, elementwise, fft, grad, linreg_gd, matmul, mlp, poly, sort
from .base import Operation, as_outputs, mismatch_report, params_json, relative_error

OPERATIONS: dict[str, Operation] = {
    m.OPERATION.name: m.OPERATION
    for m in (
        elementwise,
        matmul,
        grad,
        fft,
        sort,
        poly,
        linreg_gd,
        batched_matmul,
        mlp,
    )
}


def get(name: str) -> Operation:
    try:
        return OPERATIONS[name]
    except KeyError:
        raise KeyError(f"unknown operation {name!r}; known: {', '.join(OPERATIONS)}") from None


def input_rng(seed: int, operation: str, size: int) -> np.random.Generator:
    """A generator that depends only on (seed, operation, size): reruns give the same inputs."""
    return np.random.default_rng([seed, zlib.crc32(operation.encode()), size])


__all__ = [
    "OPERATIONS",
    "Operation",
    "as_outputs",
    "get",
    "input_rng",
    "mismatch_report",
    "params_json",
    "relative_error",
]
