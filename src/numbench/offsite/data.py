"""A user's data files (``operations.NAME.inputs``) carried offsite: named in the plan by
their place in the bundle, with their SHA-256 and size; checked there before anything is
measured, and here again on import.

The plan names each size's file by a place derived from the operation's name and the size
alone (``bundled_data_file``), never by this host's path, so that the plan (and its hash) is
the same wherever the file lies, as for a user's operation file. Each inputs entry of the
plan whose inputs are read from a file holds ``data``: ``{"file": place in the bundle,
"sha256": ..., "bytes": ...}``; the plan's hash covers it, and the cells' specs name that
place as their ``inputs_from``. The archive never carries the data back: ``import`` reads the
file the config here names, which must still hash as the plan says.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from numbench.offsite.common import (
    TRANSFER_LIMIT_BYTES,
    OffsiteError,
    file_sha256,
    inside,
)

#: where the bundle keeps a user's data files, beside the plan
DATA_DIR = "data"
#: a data file larger than this is carried all the same, with a warning naming it: an offsite
#: bundle, like its archive, is meant to travel by copy (``TRANSFER_LIMIT_BYTES``)
LARGE_DATA_BYTES = TRANSFER_LIMIT_BYTES
#: the placeholder of the size in ``operations.NAME.inputs`` (``numbench.inputs_file``)
SIZE_FIELD = "{size}"
#: the kinds of data file, by suffix (``numbench.inputs_file.SUFFIXES``)
SUFFIXES = (".npz", ".parquet")


def bundled_pattern(pattern: str, operation: str) -> str:
    """The place in the bundle of the files of ``operations.NAME.inputs`` (``pattern``, this
    host's path): ``data/NAME/NAME_{size}.npz`` where the pattern has ``{size}``, else one
    file for every size, ``data/NAME/NAME.npz`` (``.parquet`` for a Parquet file)."""
    suffix = Path(pattern.replace(SIZE_FIELD, "0")).suffix
    stem = f"{operation}_{SIZE_FIELD}" if SIZE_FIELD in pattern else operation
    return f"{DATA_DIR}/{operation}/{stem}{suffix}"


def bundled_data_file(pattern: str, operation: str, size: int) -> str:
    """The place in the bundle of the data file of ``operation`` at ``size``."""
    return bundled_pattern(pattern, operation).replace(SIZE_FIELD, str(int(size)))


def _places(operation: str, size: int) -> set[str]:
    """Every place a plan may name for the data of ``operation`` at ``size``."""
    return {
        bundled_data_file(f"x{stem}{suffix}", operation, size)
        for stem in ("", SIZE_FIELD)
        for suffix in SUFFIXES
    }


def _local_file(cfg: dict, operation: str, size: int) -> Path | None:
    """This host's data file of ``operation`` at ``size``; None where its inputs are drawn."""
    from numbench.config import operation_inputs_from
    from numbench.inputs_file import file_for

    pattern = operation_inputs_from(cfg, operation)
    return None if pattern is None else file_for(pattern, size)


def planned_data(cfg: dict, operation: str, size: int) -> dict | None:
    """The inputs entry's ``data`` (place in the bundle, SHA-256, size in bytes) of this
    host's file of ``operation`` at ``size``; None where its inputs are drawn."""
    from numbench.config import operation_inputs_from

    file = _local_file(cfg, operation, size)
    if file is None:
        return None
    try:
        digest, size_bytes = file_sha256(file), file.stat().st_size
    except OSError as exc:
        raise OffsiteError(
            f"operations.{operation}.inputs: cannot read {file} (size {size}): {exc}"
        ) from None
    pattern = operation_inputs_from(cfg, operation)
    return {
        "file": bundled_data_file(pattern, operation, size),
        "sha256": digest,
        "bytes": size_bytes,
    }


def bundled_entry(entry: dict, operation: str) -> dict:
    """An operation's config entry as the plan holds it: ``inputs`` naming the files' place
    in the bundle instead of this host's path."""
    if entry.get("inputs") is None:
        return entry
    return {**entry, "inputs": bundled_pattern(entry["inputs"], operation)}


def bundled_spec(spec: dict, data: dict[str, dict]) -> dict:
    """A cell's spec as the plan holds it: ``inputs_from`` naming the data file's place in
    the bundle (``data``: the plan's ``data`` by inputs file) instead of this host's path."""
    if spec.get("inputs_from") is None:
        return spec
    return {**spec, "inputs_from": data[spec["inputs"]]["file"]}


def data_files(cfg: dict) -> dict[str, Path]:
    """Place in the bundle -> this host's file, for every data file of the config."""
    from numbench.config import operation_inputs_from

    files = {}
    for name, entry in cfg["operations"].items():
        pattern = operation_inputs_from(cfg, name)
        for size in sorted({int(s) for s in entry["sizes"]}) if pattern else ():
            files[bundled_data_file(pattern, name, size)] = _local_file(cfg, name, size)
    return files


def warn_large(files: dict[str, Path], say: Callable[[str], None]) -> None:
    """Say which data files are larger than an offsite bundle is meant to be: they are
    carried whole all the same."""
    for place, file in sorted(files.items()):
        size = file.stat().st_size
        if size > LARGE_DATA_BYTES:
            say(
                f"warning: the data file {file} is {size / 2**20:.1f} MiB, more than the "
                f"{LARGE_DATA_BYTES // 2**20} MiB an offsite bundle is meant to carry; it "
                f"goes into the bundle whole (as {place}), which is as much larger"
            )


def check_planned_data(plan: dict, what: str) -> None:
    """Each ``data`` of the plan's inputs entries must name a place derived from its
    operation and size, with a SHA-256 and a size in bytes; each cell's ``inputs_from`` must
    be the place of its inputs file's data (None where its inputs are drawn)."""
    places: dict[str, str | None] = {}
    for item in plan["inputs"]:
        data = item.get("data")
        places[item["path"]] = None if data is None else _checked_entry(item, data, what)
    for entry in plan["cells"]:
        spec = entry["spec"]
        want = places.get(spec["inputs"])
        if spec.get("inputs_from") != want:
            raise OffsiteError(
                f"{what}: the cell {entry['path']} names {spec.get('inputs_from')!r} as the "
                f"file its inputs are read from, not {want!r}, its inputs file's data in the "
                "plan; a plan that names another is refused"
            )


def _checked_entry(item: dict, data, what: str) -> str:
    """The place of an inputs entry's ``data``, once it is well formed."""
    op, size = item["operation"], item["size"]
    if not isinstance(data, dict):
        raise OffsiteError(f"{what}: the data of {item['path']} is no mapping: {data!r}")
    if data.get("file") not in _places(op, size):
        raise OffsiteError(
            f"{what} names the data file {data.get('file')!r} for {op} n={size}, whose data "
            f"file is one of {', '.join(sorted(_places(op, size)))} beside the plan: a data "
            "file's place is derived from its operation and size, and a plan that names "
            "another is refused"
        )
    digest, size_bytes = data.get("sha256"), data.get("bytes")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise OffsiteError(f"{what}: the data file {data['file']} has no SHA-256: {digest!r}")
    if not (isinstance(size_bytes, int) and not isinstance(size_bytes, bool) and size_bytes >= 0):
        raise OffsiteError(f"{what}: the data file {data['file']} has no size: {size_bytes!r}")
    return data["file"]


def checked_data_beside(plan: dict, folder: Path) -> dict[str, str]:
    """Inputs file -> its data file here, beside the plan in ``folder`` (where the bundle put
    it), once each hashes as the plan says: a file missing or of another SHA-256 is an
    OffsiteError naming it, the hash expected and the one found, before anything is made or
    measured."""
    found: dict[str, str | None] = {}
    files = {}
    for item in plan["inputs"]:
        data = item.get("data")
        if data is None:
            continue
        path = inside(folder, data["file"])
        if data["file"] not in found:
            found[data["file"]] = file_sha256(path) if path.is_file() else None
        got = found[data["file"]]
        if got != data["sha256"]:
            seen = "no file" if got is None else f"SHA-256 {got}"
            raise OffsiteError(
                f"the plan's data file {data['file']} (operations.{item['operation']}.inputs "
                f"at size {item['size']}) at {path}: the plan expects SHA-256 "
                f"{data['sha256']}, found {seen}. It is not the file the plan was made with; "
                "nothing was measured. The data travels in the bundle (offsite plan --bundle) "
                "beside the plan: unpack the bundle whole, or plan again"
            )
        files[item["path"]] = str(path)
    return files


def check_data_here(plan: dict, local: dict, cfg: dict) -> None:
    """Each data file the config here names (hashed into ``local``, its plan here) must be
    the one the archive's cells were measured on (the archive's ``plan``)."""
    here = {i["path"]: i.get("data") for i in local["inputs"]}
    for item in plan["inputs"]:
        there, mine = item.get("data"), here.get(item["path"])
        if there is None or mine is None:
            continue  # drawn on one side: the configs differ, check_against_config says how
        if mine["sha256"] != there["sha256"]:
            op, size = item["operation"], item["size"]
            raise OffsiteError(
                f"{_local_file(cfg, op, size)} (operations.{op}.inputs at size {size}) has "
                f"SHA-256 {mine['sha256']} here, but the archive's cells were measured on "
                f"data of SHA-256 {there['sha256']}: they were measured on other data. Import "
                "with the file as it was planned, or plan and run it again"
            )
