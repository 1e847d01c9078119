"""Inputs files: numbench's own, which hold what a cell is measured on, and one's own, which
stand in for the arrays ``make_inputs`` would draw. Both are read here, and only here.

Numbench's inputs file (results/inputs/OPERATION/SIZE.npz) read back: the arrays a cell is
measured on, the float64 reference output, and what made them. ``numbench.measure.inputs``
makes and writes the file; the worker loads it (``load``) and the analysis checks it
(``check``), both from here.

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
