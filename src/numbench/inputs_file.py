"""Inputs files: numbench's own, which hold what a cell is measured on, and one's own, which
stand in for the arrays ``make_inputs`` would draw. Both are read here, and only here, and
numbench's own are made here.

Numbench's inputs file (results/inputs/OPERATION/SIZE.npz): the arrays a cell is measured
on, seeded (or one's own, below), the float64 reference output, and what made them: the
seed, the operation's parameters and the hash of its code (``numbench.operations.loading``).
The inputs job makes and writes it (``make``, ``write``); the worker loads it (``load``) and
refuses a file made with other parameters or other code than its cell's spec names; the
analysis checks it (``check``).

Inputs of one's own, from files (``read``): ``operations.NAME.inputs`` names a ``.npz`` or
Parquet file per size (``data/eos_{size}.npz``; ``{size}`` is replaced by each size), whose
arrays the operation's cells are measured on in place of those ``make_inputs`` would draw.
Each file must hold every array of ``input_names`` (a ``.npz`` by its name; a Parquet file as
a column of that name, a 1-D array), of real numbers, and of the shape ``make_inputs`` gives
at that size: what the operation's reference, cost model and element counts expect. A file
that does not is refused with its path and the array named (``InputsFileError``). The
arrays are stored in float64, as drawn ones are; arrays the operation does not name are
left out.

No pyarrow on import: the worker loads this module into the process it measures, and only
the inputs job, which reads one's own Parquet files, imports it.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from numbench.errors import corrupt


# -- numbench's inputs file ----------------------------------------------------------------
def load(
    path: str | os.PathLike, input_names: tuple[str, ...]
) -> tuple[list[np.ndarray], Any, str, str, int | None]:
    """Read a cell's inputs, reference output (one array, a tuple, or a dict where the
    reference named its outputs), and the parameters (JSON), the hash of the operation's
    code ("" where the file does not say) and the seed (None where it does not say) they
    were made with; raise CorruptFile naming the file and the command that remakes it when
    it cannot be read."""
    try:
        with np.load(path) as data:
            arrays = [np.array(data[name]) for name in input_names]
            n_refs = int(data["n_outputs"])
            refs = tuple(np.array(data[f"ref_{i}"]) for i in range(n_refs))
            names = json.loads(str(data["output_names"])) if "output_names" in data else None
            made_with = str(data["params_json"]) if "params_json" in data else ""
            code = str(data["operation_hash"]) if "operation_hash" in data else ""
            seed = int(data["seed"]) if "seed" in data else None
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("inputs", path, f"{type(exc).__name__}: {exc}") from exc
    if names is not None:  # a reference that named its outputs
        return arrays, dict(zip(names, refs, strict=True)), made_with, code, seed
    return arrays, refs[0] if n_refs == 1 else refs, made_with, code, seed


def check(path: str | os.PathLike) -> None:
    """Check every array of an inputs file (CRC of each zip member); raise CorruptFile."""
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise ValueError(f"member {bad} fails its CRC check")
            names = {n.removesuffix(".npy") for n in zf.namelist()}
        if "n_outputs" not in names:
            raise ValueError("it lacks the array n_outputs")
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("inputs", path, f"{type(exc).__name__}: {exc}") from exc


# -- inputs of one's own, from files -------------------------------------------------------
#: the placeholder of the size in ``operations.NAME.inputs``
SIZE_FIELD = "{size}"
#: the kinds of file read, by suffix
SUFFIXES = (".npz", ".parquet")


class InputsFileError(ValueError):
    """An inputs file that cannot be used; the message names the file and what is wrong."""


def file_for(pattern: str | os.PathLike, size: int) -> Path:
    """The file of ``size``: ``pattern`` with ``{size}`` replaced (the same file for every
    size where it has no placeholder)."""
    return Path(str(pattern).replace(SIZE_FIELD, str(int(size))))


def suffix_problem(path: Path) -> str | None:
    """Why numbench cannot read ``path`` as inputs, judged by its name alone, or None."""
    if path.suffix not in SUFFIXES:
        return f"{path} is neither a .npz nor a .parquet file"
    return None


def _read(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            held = list(data.files)
            return {n: np.array(data[n]) for n in names if n in held} | {"": np.array(held)}
    import pyarrow.parquet as pq  # not in the worker: only the inputs job reads files

    table = pq.read_table(path)
    held = table.column_names
    out = {}
    for name in names:
        if name in held:
            column = table.column(name)
            try:
                out[name] = column.to_numpy()
            except Exception as exc:  # noqa: BLE001 - nested or null values
                raise InputsFileError(
                    f"{path}: column {name!r} ({column.type}) is no 1-D array of numbers: {exc}"
                ) from None
    return out | {"": np.array(held)}


def read(
    pattern: str | os.PathLike, size: int, names: tuple[str, ...], shapes: dict[str, tuple]
) -> dict[str, np.ndarray]:
    """The arrays of ``names`` in the file of ``size``, in float64, each checked against the
    shape in ``shapes`` (what ``make_inputs`` gives at that size); InputsFileError naming the
    file and the array otherwise."""
    path = file_for(pattern, size)
    problem = suffix_problem(path)
    if problem:
        raise InputsFileError(problem)
    if not path.is_file():
        raise InputsFileError(f"{path} (the inputs of size {size}) does not exist")
    try:
        arrays = _read(path, names)
    except InputsFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise InputsFileError(f"{path} cannot be read: {type(exc).__name__}: {exc}") from None
    held = [str(h) for h in arrays.pop("")]
    missing = [n for n in names if n not in arrays]
    if missing:
        raise InputsFileError(
            f"{path} has no array {missing[0]!r} (the operation's inputs are "
            f"{', '.join(names)}; the file holds {', '.join(held) or 'nothing'})"
        )
    out = {}
    for name in names:
        array = arrays[name]
        if array.dtype.kind not in "biuf":
            raise InputsFileError(
                f"{path}: array {name!r} is {array.dtype}; inputs are real numbers "
                "(stored as float64)"
            )
        want = tuple(shapes[name])
        if array.shape != want:
            raise InputsFileError(
                f"{path}: array {name!r} has shape {array.shape}; at size {size} the "
                f"operation's make_inputs gives {want}"
            )
        out[name] = array.astype(np.float64)
    return out


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
    ``inputs_from``: ``read``), the float64 reference and what made them. The operation is
    imported here, not with this module: the worker loads this module to read its inputs."""
    from numbench import operations
    from numbench.operations import as_outputs, input_rng, params_json

    found = operations.load(operation, operation_file, operation_hash)
    op = found.operation
    params = op.resolve_params(params)
    arrays = {}
    if op.make_fixed is not None:
        arrays.update(op.make_fixed(input_rng(seed, operation, FIXED_SIZE)))
    arrays.update(op.make_inputs(size, op.inputs_source(size, seed)))
    if inputs_from is not None:  # the user's own arrays, of the shapes drawn ones have
        shapes = {n: np.shape(arrays[n]) for n in op.input_names}
        arrays = read(inputs_from, size, op.input_names, shapes)
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
        out["inputs_from"] = np.asarray(str(file_for(inputs_from, size)))
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
    # imported here: the worker loads this module to read its inputs, and must not load
    # pyarrow (``numbench.contract``) into the process it measures
    from numbench.contract import write_bytes_atomic

    buf = io.BytesIO()
    made = make(operation, size, seed, params, operation_file, operation_hash, inputs_from)
    np.savez(buf, **made)
    write_bytes_atomic(buf.getvalue(), path)
