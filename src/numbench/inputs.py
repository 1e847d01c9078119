"""Seeded inputs and the float64 reference output of one (operation, size)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from numbench import operations
from numbench.operations import as_outputs, input_rng, params_json

#: the size whose generator draws an operation's size-independent arrays (real sizes are >= 1)
FIXED_SIZE = 0


def make(operation: str, size: int, seed: int, params: dict | None = None) -> dict[str, np.ndarray]:
    op = operations.get(operation)
    params = op.resolve_params(params)
    arrays = {}
    if op.make_fixed is not None:
        arrays.update(op.make_fixed(input_rng(seed, operation, FIXED_SIZE)))
    arrays.update(op.make_inputs(size, input_rng(seed, operation, size)))
    refs = as_outputs(op.run_reference(arrays, params))
    out = {name: np.asarray(arrays[name], dtype=np.float64) for name in op.input_names}
    for i, ref in enumerate(refs):
        out[f"ref_{i}"] = ref
    out["n_outputs"] = np.asarray(len(refs))
    out["seed"] = np.asarray(seed)
    out["params_json"] = np.asarray(params_json(params))
    return out


def write(
    operation: str, size: int, seed: int, path: str | os.PathLike, params: dict | None = None
) -> None:
    """Write the .npz atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **make(operation, size, seed, params))
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(buf.getvalue())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
