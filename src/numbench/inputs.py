"""Seeded inputs and the float64 reference output of one (operation, size)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from numbench import operations
from numbench.operations import as_outputs, input_rng


def make(operation: str, size: int, seed: int) -> dict[str, np.ndarray]:
    op = operations.get(operation)
    arrays = op.make_inputs(size, input_rng(seed, operation, size))
    refs = as_outputs(op.reference(*(arrays[n] for n in op.input_names)))
    out = {name: np.asarray(arrays[name], dtype=np.float64) for name in op.input_names}
    for i, ref in enumerate(refs):
        out[f"ref_{i}"] = ref
    out["n_outputs"] = np.asarray(len(refs))
    out["seed"] = np.asarray(seed)
    return out


def write(operation: str, size: int, seed: int, path: str | os.PathLike) -> None:
    """Write the .npz atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **make(operation, size, seed))
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(buf.getvalue())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
