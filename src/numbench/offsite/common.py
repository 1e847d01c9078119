"""Shared by the three steps: formats, the paths of a cell's files, checksums, atomic writes, a
host's fingerprint and the roofs of the host where a plan runs.

What numbench trusts (DESIGN.md): a plan and an archive come from elsewhere (the plan's hash is
no signature: whoever edits a plan can recompute it), so no path is taken from them. Every
path a step writes is derived from a cell's identity through ``numbench.cells``, the one place
a cell's paths are written, and a plan or an archive that names any other path is refused.

**Two machines with one host name** (``warn_if_same_name``, for the import and a run that
goes on from parts): the archive's host is named like this one but is another. numbench keys
a host's rows by its name (``socket.gethostname()``, the cells' and the roofs' ``host``
column): the import merges the archive's roofs over the rows of that name, a roofs run here
replaces the rows of its own name, and the tables key cells by host. Two machines that share
a name (both "vm", say) share one key, so the import warns where the archive's host has this
machine's name but not its fingerprint.

The fingerprint is the machine's part of the history's (``numbench.history.changes``,
``FINGERPRINT``): CPU model, logical CPUs and memory, as every cell records them. The
kernel, the frequency governor and the Python version, also there, change on one machine
and tell two apart by accident only.

**The roofs of the host where a plan runs** (``ROOFS_MEMBER``): measured there, carried in
the archive, and merged here into results/roofs.parquet, so that the cells measured there
are placed on that host's roofline (a GPU's among them: its device memory, FMA peak and
transfers).

* ``offsite run`` measures the roofs of every (device, dtype, threads) of its plan's cells,
  under the host's timing lock like the cells, with the plan's libraries, allocator and
  ``replicates.max_cpu_taken``, once, after the cells (its rows' ``round`` is ``end``): an
  offsite run does not measure them before its cells too, whatever ``roofs_at_end`` says,
  so its roofs have no spread across the run; with ``--resume`` a readable roofs file of
  the same plan is kept.
* The archive carries them as ``ROOFS_MEMBER`` (and their log as ``ROOFS_LOG``), with their
  size and checksum in the manifest.
* ``offsite import`` reads them as a roofs table (``numbench.roofline.contract.read_roofs``
  refuses anything else), checks that every row is of the archive's host and of a
  (device, dtype, threads) of the plan, and merges them into results/roofs.parquet: the
  rows of that host are replaced, every other host's kept.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import socket
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from numbench.cells import (
    CELL_FILE_RE,
    FIELD_PATTERNS,
    FIELDS,
    Cell,
    inputs_log_path,
    inputs_path,
    roof_dims,
    roof_libraries,
)
from numbench.contract import replacing

PLAN_FORMAT = "numbench-offsite-plan"
ARCHIVE_FORMAT = "numbench-offsite-archive"
#: 2: the cells' specs name their operation's code (``operation_file``, ``operation_hash``),
#: and a user's operation travels in the bundle (``OPERATIONS_DIR``)
FORMAT_VERSION = 2
#: where the bundle keeps a user's operation files, beside the plan: the operation's own
#: file as ``operations/NAME/NAME.py``, its helpers under the names they have beside it
OPERATIONS_DIR = "operations"
#: the largest file the transfer back from a remote host takes
TRANSFER_LIMIT_BYTES = 16 * 1024 * 1024
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
#: a reference array whose CRC differs is still the same reference when its norm agrees to this
#: (the float64 reference of matmul, mlp, ... goes through BLAS, which rounds differently on
#: another CPU; the inputs themselves must match bit for bit)
REFERENCE_NORM_RTOL = 1e-12
#: the arrays of an inputs file that name the user's file its inputs were read from: a path,
#: this host's or the bundle's, which ``compare_inputs`` leaves out (the arrays are compared)
PLACE_ARRAYS = ("inputs_from",)
#: files are hashed and copied in pieces of this size, never read whole
COPY_CHUNK_BYTES = 1024 * 1024

#: the name of a cell file, as an archive member (``numbench.cells``'s pattern)
CELL_MEMBER = CELL_FILE_RE


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


def bundled_operation_file(name: str) -> str:
    """Where a plan says a user's operation file lies: beside the plan, under a name derived
    from the operation's name alone (``numbench.cells.FIELD_PATTERNS`` keeps it a name)."""
    return f"{OPERATIONS_DIR}/{name}/{name}.py"


def log_path(cell_path: str) -> str:
    """The cell's log, where the workflow keeps it (``logs/cells/...``); ValueError when
    ``cell_path`` is not a cell's file."""
    return Cell.from_path(cell_path).log


def cell_of(spec: Any, what: str) -> Cell:
    """The cell a spec (from a plan) describes, whose fields can name its files.

    The fields must each be of their type and alphabet (``numbench.cells.FIELD_PATTERNS``):
    a library of ``../..`` or a size of ``1e3`` names no cell, and is refused here rather
    than put into a path."""
    try:
        cell = Cell.from_fields(spec)
        own = Cell.from_path(cell.path) == cell and cell.fields() == {k: spec[k] for k in FIELDS}
    except (KeyError, TypeError, ValueError, AttributeError):
        own = False
    if not own:
        shown = {k: spec.get(k) for k in FIELDS} if isinstance(spec, dict) else spec
        raise OffsiteError(
            f"{what}: a cell's spec names no cell of numbench ({shown}); its "
            f"{', '.join(FIELDS)} make the cell's paths, so each must be one of its kind"
        )
    return cell


def inputs_files_of(item: Any, what: str) -> tuple[str, str]:
    """(inputs file, its log) of a plan's inputs entry, derived from its operation and size
    (the entry's own ``path`` and ``log`` are checked against these, never used)."""
    operation = item.get("operation") if isinstance(item, dict) else None
    size = item.get("size") if isinstance(item, dict) else None
    if not (
        isinstance(operation, str)
        and re.fullmatch(FIELD_PATTERNS["operation"], operation)
        and isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
    ):
        raise OffsiteError(
            f"{what}: an inputs entry names no operation and size of numbench: "
            f"operation={operation!r}, size={size!r}"
        )
    return inputs_path(operation, size), inputs_log_path(operation, size)


def inside(folder: Path, relative: str) -> Path:
    """``folder / relative``, for a path already derived from a cell's identity; a second
    guard, lexical, that it cannot leave ``folder`` (no absolute name, no ``..``)."""
    parts = relative.split("/")
    if relative.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in relative:
        raise OffsiteError(f"{relative!r} is not a path inside {folder}")
    return folder.joinpath(*parts)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, read in chunks (a file here may be large; nothing needs it whole)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(COPY_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def inputs_checksums(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Per array of an inputs file: the CRC-32 numpy's zip stores for it and its size, and for
    the reference outputs (``ref_*``) their float64 norm as well.

    The arrays' CRCs, unlike the file's own hash, do not depend on when the file was written
    (a zip member records its time). Raises CorruptFile when a member fails its CRC check."""
    import numpy as np

    from numbench import inputs_file as inputs

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
    """(problems, notes) of an inputs file here against the checksums recorded there. The
    arrays that name where the inputs were read from (``PLACE_ARRAYS``) are left out: a data
    file lies at another path on each host, and its arrays are compared all the same."""
    problems, notes = [], []
    for name in sorted(set(here) | set(there)):
        if name in PLACE_ARRAYS:
            continue
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


def checked_inputs_checksums(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """``inputs_checksums`` of an inputs file that must be intact: a member failing its CRC
    check is an OffsiteError saying so."""
    from numbench.errors import CorruptFile

    try:
        return inputs_checksums(path)
    except CorruptFile as exc:
        raise OffsiteError(str(exc)) from None


def write_inputs_file(
    item: dict,
    path: str | os.PathLike,
    operation_file: str | None,
    operation_hash: str | None,
    inputs_from: str | None = None,
) -> None:
    """Make the inputs file of a plan's inputs entry at ``path``: its operation, size, seed
    and parameters, with the operation's code from ``operation_file`` (None: a built-in one)
    checked against ``operation_hash``, and the inputs read from the user's file
    ``inputs_from`` where its entry has ``data`` (the bundle's copy there, the config's file
    here). ``run`` makes them there, ``import`` here, alike."""
    from numbench import inputs_file as inputs

    inputs.write(
        item["operation"],
        item["size"],
        item["seed"],
        path,
        item["params"],
        operation_file,
        operation_hash,
        inputs_from,
    )


def write_tar_gz(
    path: str | os.PathLike, members: Iterable[tuple[str, bytes | Path, float | None]]
):
    """Write a ``.tar.gz`` of ``members`` (name, data or the file holding it, modification
    time or None for now), each a plain file of mode 0644, to ``path`` whole or not at all
    (``numbench.contract.replacing``): the archive ``run`` packs and the bundle ``plan``
    writes are made alike. A file is copied in pieces, never read whole."""
    with (
        replacing(path) as tmp,
        open(tmp, "wb") as fh,
        tarfile.open(fileobj=fh, mode="w:gz", compresslevel=9) as tar,
    ):
        for name, data, mtime in members:
            info = tarfile.TarInfo(name)
            info.mtime = int(time.time() if mtime is None else mtime)
            info.mode = 0o644
            if isinstance(data, Path):
                with open(data, "rb") as source:
                    info.size = os.fstat(source.fileno()).st_size
                    tar.addfile(info, source)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


# -- two machines with one host name --------------------------------------------------------------
#: the columns of a cell that say which machine measured it
MACHINE = ("cpu_model", "cpu_count", "ram_gb")
#: memory that differs by less than this share is the same memory (the pages the kernel
#: keeps to itself vary a little between boots and kernels)
RAM_TOLERANCE = 0.05


def fingerprint_here() -> dict:
    """This machine's fingerprint, as its cells record it (the very function that fills
    their columns)."""
    from numbench.measure.supervisor import machine_fingerprint

    return machine_fingerprint()


def fingerprint_of_cells(paths: Iterable[Path]) -> dict:
    """The fingerprint the first of the cell files that records one holds (every cell of
    an archive was measured on its one host); None for a field none records."""
    import pyarrow.parquet as pq

    for path in paths:
        try:
            table = pq.read_table(path)
        except (OSError, ValueError):
            continue
        found = {
            name: table.column(name)[0].as_py() if name in table.column_names else None
            for name in MACHINE
        }
        if any(value is not None for value in found.values()):
            return found
    return dict.fromkeys(MACHINE)


def differences(there: dict, here: dict) -> list[str]:
    """The fields of two fingerprints that tell two machines apart (a field either lacks
    tells nothing)."""
    out = []
    for name in MACHINE:
        a, b = there.get(name), here.get(name)
        if a is None or b is None:
            continue
        if name == "ram_gb":
            if abs(float(a) - float(b)) > RAM_TOLERANCE * max(float(a), float(b)):
                out.append(name)
        elif a != b:
            out.append(name)
    return out


def describe(fingerprint: dict) -> str:
    ram = fingerprint.get("ram_gb")
    return (
        f"{fingerprint.get('cpu_model') or 'CPU unknown'}, "
        f"{fingerprint.get('cpu_count') or '?'} logical CPUs, "
        f"{'?' if ram is None else f'{float(ram):.1f}'} GB memory"
    )


def same_name_warning(host, there: dict, here: dict, name_here: str | None = None) -> str | None:
    """The warning where the archive's ``host`` is named like this machine (``name_here``,
    by default ``socket.gethostname()``) but its fingerprint ``there`` differs from this
    machine's ``here``; None otherwise."""
    name_here = socket.gethostname() if name_here is None else name_here
    if host != name_here or not differences(there, here):
        return None
    return (
        f"warning: the archive's cells were measured on a host named {host!r}, like this "
        f"machine, but on another machine (there: {describe(there)}; here: {describe(here)}). "
        "numbench keys roofs and cells by host name, so the two machines share one key: an "
        "archive's roofs replace the roofs here of host "
        f"{host!r} (this machine's own, if any), a roofs run here "
        "(rules roofs, roofs_at_end) replaces them in turn, and the tables (benchmarks, "
        "compare, history) take both machines' cells as one host's. Give the two machines "
        "different host names to keep them apart"
    )


def warn_if_same_name(host, cell_paths: Iterable[Path], say) -> None:
    """Say ``same_name_warning`` for an imported archive, whose cells are ``cell_paths``."""
    if host != socket.gethostname():
        return  # another name: nothing shared, and no need to read the cells
    warning = same_name_warning(host, fingerprint_of_cells(cell_paths), fingerprint_here())
    if warning:
        say(warning)


# -- the roofs of the host where a plan runs: measured there, carried, merged here ---------
ROOFS_MEMBER = "results/roofs.parquet"
#: where the workflow's rule roofs writes the start's rows when the config measures the roofs
#: again at the end (``roofs_at_end``; workflow/rules/common.smk): an import merges the
#: archive's roofs there too and dates both files after the cells
#: (``numbench.offsite.importer``), so the next run here finds them newer than the cells and
#: measures no roofs of its own over the imported ones
ROOFS_START_FILE = "results/roofs_start.parquet"
ROOFS_LOG = "logs/roofs.log"
ROOFS_MEMBERS = (ROOFS_MEMBER, ROOFS_LOG)


def plan_cells(plan: dict, what: str) -> list[Cell]:
    """The plan's cells (``numbench.cells.Cell``), for the roofs' settings and libraries
    (``cells.roof_dims``, ``cells.roof_libraries``)."""
    return [cell_of(entry["spec"], what) for entry in plan["cells"]]


def measure_there(plan: dict, work: Path, resume: bool, say: Callable[[str], None]) -> dict:
    """Measure the plan's roofs into ``work``/``ROOFS_MEMBER`` (its output in ``ROOFS_LOG``)
    and return the manifest's entry for them."""
    import contextlib

    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs
    from numbench.roofline.measure import measure_roofs

    path, log = work / ROOFS_MEMBER, work / ROOFS_LOG
    kept = False
    if resume and path.exists():
        with contextlib.suppress(CorruptFile):
            read_roofs(path)
            kept = True
    if not kept:
        config = plan["config"]
        path.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as out:

            def tell(line: str) -> None:
                print(line, file=out, flush=True)

            cells = plan_cells(plan, "the plan")
            measure_roofs(
                roof_dims(cells),
                roof_libraries(cells),
                config["allocator"],
                path,
                say=tell,
                max_cpu_taken=config["replicates"].get("max_cpu_taken"),
                round_name="end",
            )
    say(f"roofs {ROOFS_MEMBER}  {'kept' if kept else 'measured'}")
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def staged_roofs(members: dict, manifest: dict, plan: dict, archive) -> pa.Table | None:
    """The archive's roofs, checked (``check_staged``), or None where it has none (an
    archive of an older numbench: its cells get no place on a roofline)."""
    if ROOFS_MEMBER not in members:
        return None
    recorded, host = manifest.get("roofs"), manifest.get("host")
    return check_staged(members[ROOFS_MEMBER].path, recorded, plan, host, archive)


def check_staged(staged_path: Path, recorded: dict | None, plan: dict, host, archive) -> pa.Table:
    """The archive's roofs, once they are a roofs table of the archive's host and of the
    plan's (device, dtype, threads), as the manifest records them."""
    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs

    if not isinstance(recorded, dict) or recorded.get("sha256") != file_sha256(staged_path):
        raise OffsiteError(f"{archive}: {ROOFS_MEMBER} is not the file its manifest records")
    try:
        table = read_roofs(staged_path)
    except CorruptFile:
        raise OffsiteError(f"{archive}: {ROOFS_MEMBER} is not a readable roofs table") from None
    hosts = set(table.column("host").to_pylist())
    if hosts - {host}:
        raise OffsiteError(
            f"{archive}: {ROOFS_MEMBER} holds roofs of hosts other than the archive's "
            f"({sorted(map(str, hosts - {host}))[:3]})"
        )
    dims = set(roof_dims(plan_cells(plan, f"the plan in {archive}")))
    rows = zip(*(table.column(c).to_pylist() for c in ("device", "dtype", "threads")), strict=True)
    strangers = {(d, t, int(n)) for d, t, n in rows} - dims
    if strangers:
        raise OffsiteError(
            f"{archive}: {ROOFS_MEMBER} holds roofs its plan does not ask for: {sorted(strangers)}"
        )
    return table


def destinations_here(cfg: dict) -> list[str]:
    """The roofs files of the workflow here that an import merges into: the start's first
    (where the config measures the roofs again at the end), then results/roofs.parquet, so
    that the latter is the newest."""
    at_end = cfg.get("roofs", True) and cfg.get("roofs_at_end", True)
    return [ROOFS_START_FILE, ROOFS_MEMBER] if at_end else [ROOFS_MEMBER]


def merge_into(table: pa.Table, host, destination: str | os.PathLike) -> None:
    """Write ``table`` (one host's roofs) into ``destination``: that host's rows replaced,
    every other host's kept (a roofs file here that cannot be read is replaced whole)."""
    from numbench.contract import write_atomic
    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs

    destination = Path(destination)
    parts = [table]
    if destination.exists():
        try:
            here = read_roofs(destination)
        except CorruptFile:
            here = None
        if here is not None:
            import pyarrow.compute as pc

            others = here.filter(pc.invert(pc.equal(here.column("host"), host)))
            parts.insert(0, others)
    write_atomic(pa.concat_tables(parts), destination)
