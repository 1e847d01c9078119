"""Seeded inputs (or the user's own, read from a file: ``inputs_from``) and the float64
reference output of one (operation, size).

The file records what made it: the seed, the operation's parameters and the hash of the
operation's code (``numbench.operations.loading``); the worker refuses a file made with
other parameters or other code than its cell's spec names. The operation comes from its
user's file where one is named (``operation_file``, with the hash it must have), else by
name."""

from __future__ import annotations

import io
import json
import os

import numpy as np

from numbench import operations
from numbench.inputs_file import check, load  # noqa: F401 - the reader, used by callers
from numbench.operations import as_outputs, input_rng, params_json

#: the size whose generator draws an operation's size-independent arrays (real sizes are >= 1)
FIXED_SIZE = 0


def make(
    operation: str,
    size: int,
    seed: int,
    params: dict | None = None,
    operation_file: str | None = None,
    operation_hash: str | None = None,
    inputs_from: str | None = None,
) -> dict[str, np.ndarray]:
    """The arrays of the inputs file: the inputs (drawn, or read from the user's file of
    ``inputs_from``, ``numbench.inputs_file``), the float64 reference and what made
    them."""
    found = operations.load(operation, operation_file, operation_hash)
    op = found.operation
    params = op.resolve_params(params)
    arrays = {}
    if op.make_fixed is not None:
        arrays.update(op.make_fixed(input_rng(seed, operation, FIXED_SIZE)))
    arrays.update(op.make_inputs(size, op.inputs_source(size, seed)))
    if inputs_from is not None:  # the user's own arrays, of the shapes drawn ones have
        from numbench import inputs_file as files

        shapes = {n: np.shape(arrays[n]) for n in op.input_names}
        arrays = files.read(inputs_from, size, op.input_names, shapes)
    reference = op.run_reference(arrays, params)
    refs = as_outputs(reference)
    out = {name: np.asarray(arrays[name], dtype=np.float64) for name in op.input_names}
    for i, ref in enumerate(refs):
        out[f"ref_{i}"] = ref
    out["n_outputs"] = np.asarray(len(refs))
    if isinstance(reference, dict):  # named outputs, in the reference's order
        out["output_names"] = np.asarray(json.dumps([str(k) for k in reference]))
    out["seed"] = np.asarray(seed)
    if inputs_from is not None:
        out["inputs_from"] = np.asarray(str(files.file_for(inputs_from, size)))
    out["params_json"] = np.asarray(params_json(params))
    out["operation_hash"] = np.asarray(found.sha256)
    return out


def write(
    operation: str,
    size: int,
    seed: int,
    path: str | os.PathLike,
    params: dict | None = None,
    operation_file: str | None = None,
    operation_hash: str | None = None,
    inputs_from: str | None = None,
) -> None:
    """Write the .npz whole or not at all, with the mode a plain write gives
    (``numbench.contract.replacing``)."""
    # imported here: the worker imports this module to load its inputs, and must not load
    # pyarrow (``numbench.contract``) into the process it measures
    from numbench.contract import write_bytes_atomic

    buf = io.BytesIO()
    made = make(operation, size, seed, params, operation_file, operation_hash, inputs_from)
    np.savez(buf, **made)
    write_bytes_atomic(buf.getvalue(), path)
