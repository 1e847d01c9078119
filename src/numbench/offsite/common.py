"""Shared by the three steps: formats, checksums, atomic writes."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

PLAN_FORMAT = "numbench-offsite-plan"
ARCHIVE_FORMAT = "numbench-offsite-archive"
FORMAT_VERSION = 1
#: the largest file the transfer back from a remote host takes
TRANSFER_LIMIT_BYTES = 16 * 1024 * 1024
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
#: a reference array whose CRC differs is still the same reference when its norm agrees to this
#: (the float64 reference of matmul, mlp, ... goes through BLAS, which rounds differently on
#: another CPU; the inputs themselves must match bit for bit)
REFERENCE_NORM_RTOL = 1e-12

CELL_MEMBER = re.compile(
    r"results/cells/[a-z0-9-]+/(cpu|gpu)/(float32|float64)/t[0-9]+/[a-z_]+/[0-9]+\.parquet"
)


class OffsiteError(Exception):
    """A problem with a plan, a run or an archive; the message is meant to be shown as it is."""


# -- shared helpers ------------------------------------------------------------------------------
def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def code_hash() -> str:
    """SHA-256 of the numbench package's Python sources (which code measured the cells)."""
    root = Path(__file__).resolve().parents[1]  # the numbench package
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def plan_hash(plan: dict) -> str:
    """SHA-256 of what a plan asks for: the config, the cells' specs and the inputs files.

    The cells' order and the plan's time stamps are left out, so the same config gives the
    same hash here and there, and ``import`` can recompute it from the config here."""
    cells = sorted((c["path"], canonical(c["spec"])) for c in plan["cells"])
    inputs = sorted(canonical(i) for i in plan["inputs"])
    return sha256(canonical({"config": plan["config"], "cells": cells, "inputs": inputs}).encode())


def log_path(cell_path: str) -> str:
    """The cell's log, where the workflow keeps it (``logs/cells/...``)."""
    return "logs/" + cell_path.removeprefix("results/").removesuffix(".parquet") + ".log"


def inputs_checksums(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Per array of an inputs file: the CRC-32 numpy's zip stores for it and its size, and for
    the reference outputs (``ref_*``) their float64 norm as well.

    The arrays' CRCs, unlike the file's own hash, do not depend on when the file was written
    (a zip member records its time). Raises CorruptFile when a member fails its CRC check."""
    import numpy as np

    from numbench import inputs

    inputs.check(path)
    arrays: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            arrays[info.filename.removesuffix(".npy")] = {
                "crc32": info.CRC,
                "bytes": info.file_size,
            }
    with np.load(path) as data:
        for name, entry in arrays.items():
            if name.startswith("ref_"):
                entry["norm"] = float(np.linalg.norm(np.asarray(data[name]).ravel()))
    return arrays


def compare_inputs(
    here: dict[str, dict[str, Any]], there: dict[str, dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """(problems, notes) of an inputs file here against the checksums recorded there."""
    problems, notes = [], []
    for name in sorted(set(here) | set(there)):
        a, b = here.get(name), there.get(name)
        if a is None or b is None:
            where = "in the archive's manifest" if a is None else "here"
            problems.append(f"array {name} is only {where}")
        elif a["crc32"] == b["crc32"] and a["bytes"] == b["bytes"]:
            continue
        elif (
            name.startswith("ref_")
            and a["bytes"] == b["bytes"]
            and a.get("norm") is not None
            and b.get("norm") is not None
            and math.isclose(a["norm"], b["norm"], rel_tol=REFERENCE_NORM_RTOL, abs_tol=0.0)
        ):
            notes.append(
                f"reference {name} differs in its last bits (norms {a['norm']!r} here, "
                f"{b['norm']!r} there): rounding of another CPU or BLAS"
            )
        else:
            problems.append(
                f"array {name}: CRC {a['crc32']:08x} ({a['bytes']} bytes) here, "
                f"{b['crc32']:08x} ({b['bytes']} bytes) on the host that ran the cells"
            )
    return problems, notes


def _readable_by_all(path: str | os.PathLike) -> None:
    """Give a file made by ``mkstemp`` (mode 0600) the mode a plain ``open`` would."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _write_bytes_atomic(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _readable_by_all(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: float | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time() if mtime is None else mtime)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
