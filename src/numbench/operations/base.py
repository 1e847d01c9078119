"""What an operation is: inputs, a float64 reference, a cost model, a tolerance, and one
small function per library family.

An implementation is a *builder*: ``build(xp, dtype)`` receives the library's array module
(``numpy``, ``jax.numpy``, ``torch``, ``tensorflow``; numba gets ``numpy``) and the dtype name,
and returns a plain function of the operation's input arrays. The library adapter then
compiles it (``jax.jit``, ``tf.function``, ``numba.njit``) or leaves it eager.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Builder = Callable[[Any, str], Callable[..., Any]]

DTYPE_EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    default_sizes: tuple[int, ...]
    input_names: tuple[str, ...]
    make_inputs: Callable[[int, np.random.Generator], dict[str, np.ndarray]]
    reference: Callable[..., Any]
    flops: Callable[[int], float]
    bytes_moved: Callable[[int, int], float]
    tolerance: dict[str, float]
    implementations: dict[str, Builder]
    unsupported: dict[str, str] = field(default_factory=dict)
    # Families whose implementation is an approximation by design (finite differences):
    # they are checked against ``approx_tolerance`` instead of ``tolerance``.
    approximate: frozenset[str] = frozenset()
    approx_tolerance: dict[str, float] = field(default_factory=dict)

    def tolerance_for(self, family: str, dtype: str) -> float:
        if family in self.approximate:
            return self.approx_tolerance[dtype]
        return self.tolerance[dtype]

    def unsupported_reason(self, family: str) -> str | None:
        if family in self.unsupported:
            return self.unsupported[family]
        if family not in self.implementations:
            return f"no {family} implementation of {self.name}"
        return None


def as_outputs(value: Any) -> tuple[np.ndarray, ...]:
    """Normalise one array or a tuple of arrays to a tuple of NumPy arrays."""
    if isinstance(value, (tuple, list)):
        return tuple(np.asarray(v) for v in value)
    return (np.asarray(value),)


def relative_error(result: Any, reference: Any) -> float:
    """Largest norm-wise relative error over the outputs: ||r - ref|| / ||ref||."""
    outs, refs = as_outputs(result), as_outputs(reference)
    if len(outs) != len(refs):
        raise ValueError(f"expected {len(refs)} outputs, got {len(outs)}")
    worst = 0.0
    for out, ref in zip(outs, refs, strict=False):
        if out.shape != ref.shape:
            raise ValueError(f"output shape {out.shape} differs from reference {ref.shape}")
        ref128 = ref.astype(np.complex128 if np.iscomplexobj(ref) else np.float64)
        diff = out.astype(ref128.dtype) - ref128
        if not np.all(np.isfinite(diff)):
            return float("inf")
        denom = float(np.linalg.norm(ref128.ravel()))
        num = float(np.linalg.norm(diff.ravel()))
        worst = max(worst, num / denom if denom > 0 else num)
    return worst
