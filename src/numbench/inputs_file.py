"""Reading an inputs file (results/inputs/OPERATION/SIZE.npz) back: the arrays a cell is
measured on, the float64 reference output, and what made them. ``numbench.measure.inputs``
makes and writes the file; the worker loads it and the analysis checks it, both from here.
No pyarrow: the worker loads this module into the process it measures.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

from numbench.errors import corrupt


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
