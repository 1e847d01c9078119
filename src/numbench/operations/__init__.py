"""The operation registry: one module per built-in operation, each exporting ``OPERATION``,
and the door to the others (a user's file, an installed package: ``loading``)."""

from __future__ import annotations

import zlib

import numpy as np

from . import batched_matmul, elementwise, fft, grad, linreg_gd, matmul, mlp, poly, sort
from .base import Operation, as_outputs, mismatch_report, params_json, relative_error
from .loading import ENTRY_POINT_GROUP, Found, OperationChanged, OperationError, load, load_file

#: built-in operation name -> its module (whose code is hashed into its cells' specs)
BUILT_IN_MODULES = {
    m.OPERATION.name: m
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
#: the built-in operations by name
OPERATIONS: dict[str, Operation] = {name: m.OPERATION for name, m in BUILT_IN_MODULES.items()}


def get(name: str) -> Operation:
    """A built-in or installed operation by name (KeyError naming the known ones); a user's
    file is loaded with ``load(name, file)``."""
    from .loading import find

    return find(name).operation


def input_rng(seed: int, operation: str, size: int) -> np.random.Generator:
    """A generator that depends only on (seed, operation, size): reruns give the same inputs."""
    return np.random.default_rng([seed, zlib.crc32(operation.encode()), size])


__all__ = [
    "BUILT_IN_MODULES",
    "ENTRY_POINT_GROUP",
    "OPERATIONS",
    "Found",
    "Operation",
    "OperationChanged",
    "OperationError",
    "as_outputs",
    "get",
    "input_rng",
    "load",
    "load_file",
    "mismatch_report",
    "params_json",
    "relative_error",
]
