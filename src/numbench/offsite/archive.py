"""Unpacking an offsite archive, which comes from another host and is trusted in nothing.

The archive is read in two passes over one open file, so that a refused archive writes
nothing at all:

1. **Every header first.** Each member is checked from its tar header alone, before a byte of
   any member is written: its type (a plain file; a folder is skipped; a symbolic or hard
   link, a device, a fifo or a sparse file is refused), its name (one an offsite run makes:
   ``manifest.json``, ``plan.json``, a cell file, a cell's log, an inputs file's log or the
   roofs and their log (``numbench.offsite.common``), each
   matched whole by the patterns of ``numbench.cells``, so no ``..``, no absolute name, no
   stray character), its declared size against ``ARCHIVE_MEMBER_LIMIT_BYTES`` and the running
   total against ``ARCHIVE_TOTAL_LIMIT_BYTES``, and the number of members against
   ``ARCHIVE_MEMBER_COUNT_LIMIT``. A member that declares a GiB is refused from its header,
   without reading it. Each refusal names the member.
2. **Then the data.** The members are copied in pieces of ``COPY_CHUNK_BYTES`` into a staging
   folder the caller owns and removes (never into ``results/``), each copy stopping at the
   member's declared size; the caller checks them there and moves them into place.

``tarfile`` reads a member's extended header (pax records, a GNU long name) whole before the
member is seen; those reads go through ``_BoundedStream``, which refuses any one larger than
``TAR_HEADER_LIMIT_BYTES`` and any position in the decompressed stream past
``ARCHIVE_STREAM_LIMIT_BYTES``, so no header, however crafted, makes the reader hold more
than that, and a gzip bomb costs a bounded amount of decompression.

The limits lie far above what a run makes: a member may be many times the largest cell file
the default config takes, and the members together as many as a grid of thousands of cells.

3. **Then the contents** (``check_contents``), once unpacked: the manifest and the plan are
   numbench's (the plan checked as ``run`` checks it, ``check_plan``, so that its paths are
   its cells' own), the archive holds exactly its plan's cells and their logs and nothing
   else, and each cell file is the one its manifest records (its checksum), of the cell its
   plan names, measured with the operation's code the plan names.

The three are one concern, reading back an archive that is trusted in nothing, and run in
one place for ``import`` and for a run that goes on from earlier parts alike
(``numbench.offsite.parts.read_part``); what is checked against this host (the config, the
inputs files) is ``numbench.offsite.importer``'s.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numbench.cells import CELL_FILE_RE, CELL_LOG_RE, INPUTS_LOG_RE, inputs_log_path
from numbench.offsite.common import (
    ARCHIVE_FORMAT,
    COPY_CHUNK_BYTES,
    FORMAT_VERSION,
    ROOFS_MEMBERS,
    OffsiteError,
    inside,
)
from numbench.offsite.plan import check_plan

#: the most one member (a cell file, a log, the plan, the manifest) may declare
ARCHIVE_MEMBER_LIMIT_BYTES = 32 * 2**20
#: the most all members together may declare
ARCHIVE_TOTAL_LIMIT_BYTES = 2 * 2**30
#: the most members an archive may hold (a grid of 5,000 cells makes about 10,000)
ARCHIVE_MEMBER_COUNT_LIMIT = 50_000
#: the most one tar header record may hold (pax records or a long name: a few hundred bytes)
TAR_HEADER_LIMIT_BYTES = 64 * 1024
#: the most of the decompressed stream the reader goes through: the members' total and room
#: for their headers
ARCHIVE_STREAM_LIMIT_BYTES = ARCHIVE_TOTAL_LIMIT_BYTES + 256 * 2**20

#: the two members that describe the run
JSON_MEMBERS = ("manifest.json", "plan.json")


@dataclass(frozen=True)
class StagedMember:
    """A member copied into the staging folder: where, how large, and its SHA-256."""

    path: Path
    size_bytes: int
    sha256: str


class _OversizedRead(Exception):
    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class _BoundedStream:
    """The decompressed archive as ``tarfile`` reads it (``read``, ``seek``, ``tell``), with
    every read of ``tarfile``'s own bounded (see the module's docstring). The members' data
    are read through ``read_data``, in pieces."""

    def __init__(self, raw):
        self._raw = raw

    def _check_position(self, position: int) -> None:
        if position > ARCHIVE_STREAM_LIMIT_BYTES:
            raise _OversizedRead(
                f"the archive unpacks to more than {ARCHIVE_STREAM_LIMIT_BYTES} bytes"
            )

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > TAR_HEADER_LIMIT_BYTES:
            raise _OversizedRead(
                f"a tar header record of {size} bytes (at most {TAR_HEADER_LIMIT_BYTES})"
            )
        self._check_position(self._raw.tell() + size)
        return self._raw.read(size)

    def read_data(self, size: int) -> bytes:
        """Up to ``size`` bytes of a member's data (at most ``COPY_CHUNK_BYTES``)."""
        return self._raw.read(min(size, COPY_CHUNK_BYTES)) if size > 0 else b""

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset, whence = self._raw.tell() + offset, os.SEEK_SET
        if whence == os.SEEK_SET:
            self._check_position(offset)
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


def _is_inputs_log(name: str) -> bool:
    """Whether ``name`` is exactly the log an inputs file's job writes (``logs/inputs/...``):
    its operation and size read back from it, then the path derived from them again."""
    match = INPUTS_LOG_RE.fullmatch(name)
    # formatted back: a size such as 007 is no inputs file's log
    return match is not None and inputs_log_path(match["operation"], int(match["size"])) == name


def _name_problem(name: str) -> str | None:
    """Why ``name`` is not a member an offsite run makes, or None when it is one."""
    if name in JSON_MEMBERS or CELL_FILE_RE.fullmatch(name) or CELL_LOG_RE.fullmatch(name):
        return None
    if name in ROOFS_MEMBERS:
        return None
    if _is_inputs_log(name):
        return None
    if name.startswith("/") or "//" in name:
        return "an absolute name (members are named from the workflow's folder)"
    if ".." in name.split("/") or ".." in name.split("\\"):
        return "it climbs out of the folder it is unpacked into (`..`)"
    return (
        "not a file an offsite run makes (the manifest, the plan, a cell file under "
        "results/cells/, the roofs, or a log under logs/cells/ or logs/inputs/)"
    )


def _type_problem(info: tarfile.TarInfo) -> str | None:
    if info.issym():
        return f"is a symbolic link (to {info.linkname!r})"
    if info.islnk():
        return f"is a hard link (to {info.linkname!r})"
    if info.ischr() or info.isblk():
        return "is a device"
    if info.isfifo():
        return "is a fifo"
    if info.issparse() or not info.isfile():
        return f"is not a plain file (tar type {info.type!r})"
    return None


def _check_member(info: tarfile.TarInfo, archive, seen: dict[str, int], total: int) -> bool:
    """Refuse a member from its header alone; True when it is a file to unpack, False for a
    folder (skipped: the files' own paths make the folders)."""
    name = info.name
    if info.isdir():
        if _folder_of_member(name.rstrip("/")):
            return False
        raise OffsiteError(f"{archive}: unexpected member {name!r}: a folder no run makes")
    problem = _type_problem(info)
    if problem:
        raise OffsiteError(
            f"{archive}: member {name!r} {problem}: an archive of `offsite run` holds plain "
            "files only"
        )
    problem = _name_problem(name)
    if problem:
        raise OffsiteError(f"{archive}: unexpected member {name!r}: {problem}")
    if name in seen:
        raise OffsiteError(f"{archive}: member {name!r} appears twice")
    if info.size > ARCHIVE_MEMBER_LIMIT_BYTES:
        raise OffsiteError(
            f"{archive}: member {name!r} declares {info.size} bytes "
            f"({_in_units(info.size)}); a member may hold at most "
            f"{_in_units(ARCHIVE_MEMBER_LIMIT_BYTES)}"
        )
    if total + info.size > ARCHIVE_TOTAL_LIMIT_BYTES:
        raise OffsiteError(
            f"{archive}: the members up to {name!r} declare {total + info.size} bytes in all; "
            f"an archive may hold at most {_in_units(ARCHIVE_TOTAL_LIMIT_BYTES)}"
        )
    if len(seen) >= ARCHIVE_MEMBER_COUNT_LIMIT:
        raise OffsiteError(
            f"{archive}: more than {ARCHIVE_MEMBER_COUNT_LIMIT} members (the next is {name!r})"
        )
    return True


def _in_units(size_bytes: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:.4g} {unit}"
    return f"{size_bytes} bytes"


def _folder_of_member(folder: str) -> bool:
    """Whether ``folder`` is one that holds a member a run makes (a re-packed archive may
    list them): a cell's folder, or one above it, under results/cells/ or logs/."""
    parts = folder.split("/")
    if parts[0] not in ("results", "logs") or any(p in ("", ".", "..") for p in parts):
        return False
    return all(re.fullmatch(r"[a-z0-9_-]+", p) for p in parts)


def _members(fh, archive, on_member) -> list[tuple[str, int]]:
    """Go through the headers of the archive open as ``fh`` from its start, checking each;
    ``on_member(stream, info)`` is called for every file to unpack. Returns [(name, size)] in
    order; an unreadable archive is an OffsiteError."""
    seen: dict[str, int] = {}
    total, last = 0, None
    try:
        fh.seek(0)
        stream = _BoundedStream(gzip.GzipFile(fileobj=fh, mode="rb"))
        for info in tarfile.open(fileobj=stream, mode="r:"):
            if _check_member(info, archive, seen, total):
                seen[info.name] = info.size
                total += info.size
                on_member(stream, info)
            last = info.name
    except _OversizedRead as exc:
        after = f" after member {last!r}" if last else ""
        raise OffsiteError(f"{archive}: refused{after}: {exc.what}") from None
    except (
        tarfile.TarError,
        gzip.BadGzipFile,
        zlib.error,
        EOFError,
        ValueError,
        RecursionError,
    ) as exc:
        raise _unreadable(archive, exc) from None
    return list(seen.items())


def _unreadable(archive, exc: BaseException) -> OffsiteError:
    return OffsiteError(
        f"{archive} is not a readable archive (corrupt or truncated?): {type(exc).__name__}: {exc}"
    )


def unpack_archive(
    archive: str | os.PathLike, make_staging: Callable[[], Path]
) -> dict[str, StagedMember]:
    """Check every member of ``archive`` from its header, then copy them under the folder
    ``make_staging()`` gives (the caller's, to remove; asked for only once every header has
    passed); return them by name. Any problem is an OffsiteError naming the member."""
    staged: dict[str, StagedMember] = {}

    def copy(stream: _BoundedStream, info: tarfile.TarInfo) -> None:
        dest = inside(staging, info.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest, left = hashlib.sha256(), info.size
        stream.seek(info.offset_data)
        with open(dest, "xb") as out:
            while left:
                chunk = stream.read_data(left)
                if not chunk:
                    raise OffsiteError(
                        f"{archive}: member {info.name!r} is truncated: it declares "
                        f"{info.size} bytes and holds {info.size - left}"
                    )
                digest.update(chunk)
                out.write(chunk)
                left -= len(chunk)
            out.flush()
            os.fsync(out.fileno())
        # on to the next header, so that tarfile need not seek back (a gzip stream rewinds)
        stream.read_data(-info.size % tarfile.BLOCKSIZE)
        staged[info.name] = StagedMember(dest, info.size, digest.hexdigest())

    try:
        fh = open(archive, "rb")  # closed below; both passes read this one open file
    except FileNotFoundError:
        raise OffsiteError(f"no archive at {archive}") from None
    except OSError as exc:
        raise OffsiteError(f"cannot read the archive {archive}: {exc}") from None
    with fh:
        checked = _members(fh, archive, lambda stream, info: None)
        staging = make_staging()
        copied = _members(fh, archive, copy)
    if copied != checked:
        raise OffsiteError(f"{archive} changed while it was read")
    return staged


# -- then the contents, against the manifest and the plan -----------------------------------------
def _json_member(members: dict[str, StagedMember], name: str, archive) -> Any:
    if name not in members:
        raise OffsiteError(f"{archive} lacks {name}: it is not an archive made by `offsite run`")
    try:
        return json.loads(members[name].path.read_bytes())  # at most ARCHIVE_MEMBER_LIMIT_BYTES
    except ValueError as exc:
        raise OffsiteError(f"{archive}: {name} is not readable JSON: {exc}") from None


def _check_cell_file(name: str, staged: StagedMember, spec: dict, recorded: dict | None) -> None:
    import pyarrow.parquet as pq

    if not isinstance(recorded, dict):
        raise OffsiteError(f"the archive's manifest does not list {name}")
    if staged.sha256 != recorded.get("sha256"):
        raise OffsiteError(
            f"{name} in the archive does not match its checksum in the manifest: the archive "
            "is corrupt"
        )
    try:
        table = pq.read_table(staged.path)
        row = {k: table.column(k)[0].as_py() for k in ("library", "device", "operation", "size")}
        status = table.column("status")[0].as_py()
        code = table.column("operation_hash")[0].as_py()
    except Exception as exc:  # noqa: BLE001 - any reader error means the cell is unusable
        raise OffsiteError(f"{name} in the archive is not a readable cell file: {exc}") from None
    want = {k: spec[k] for k in row}
    if row != want:
        raise OffsiteError(f"{name} in the archive holds the cell {row}, not {want}")
    if code != spec.get("operation_hash"):
        raise OffsiteError(
            f"{name} in the archive was measured with the operation's code {str(code)[:12]}, "
            f"not the code its plan names ({str(spec.get('operation_hash'))[:12]})"
        )
    if not status:
        raise OffsiteError(f"{name} in the archive has no status")


def check_contents(
    archive, members: dict[str, StagedMember], partial: bool = False
) -> tuple[dict, dict]:
    """(manifest, plan) of an unpacked archive, once it holds exactly its plan's cells and
    their logs, each cell as its manifest records it. With ``partial``, a part of a run that
    stopped at its time budget (``numbench.offsite.parts``) passes too: it holds some of its
    plan's cells, exactly those its manifest lists, each checked alike."""
    manifest = _json_member(members, "manifest.json", archive)
    plan = check_plan(_json_member(members, "plan.json", archive), f"the plan in {archive}")
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != ARCHIVE_FORMAT
        or manifest.get("version") != FORMAT_VERSION
    ):
        raise OffsiteError(f"{archive}: manifest.json is not a numbench offsite manifest")
    if manifest.get("plan_hash") != plan["plan_hash"]:
        raise OffsiteError(
            f"{archive}: the manifest's plan_hash {str(manifest.get('plan_hash'))[:12]} is not "
            f"the plan's {plan['plan_hash'][:12]}: the manifest belongs to another plan"
        )
    if not isinstance(manifest.get("cells"), dict) or not isinstance(
        manifest.get("inputs") or {}, dict
    ):
        raise OffsiteError(f"{archive}: manifest.json lists no cells")
    # the paths of the plan are its cells' own (check_plan): the logs allowed are theirs
    expected_cells = {c["path"]: c for c in plan["cells"]}
    allowed_logs = {c["log"] for c in plan["cells"]} | {i["log"] for i in plan["inputs"]}
    for name in members:
        known = name in JSON_MEMBERS or name in ROOFS_MEMBERS
        if not known and name not in allowed_logs and name not in expected_cells:
            raise OffsiteError(f"{archive}: unexpected member {name!r} (not a cell of its plan)")
    strangers = sorted(set(manifest["cells"]) - set(expected_cells))
    if strangers:
        raise OffsiteError(
            f"{archive}: its manifest lists {len(strangers)} cells its plan does not have "
            f"(first: {str(strangers[0])[:200]!r})"
        )
    wanted = set(manifest["cells"]) if partial else set(expected_cells)
    missing = sorted(wanted - set(members))
    if missing:
        raise OffsiteError(
            f"{archive} lacks {len(missing)} of its plan's {len(expected_cells)} cells "
            f"(first: {missing[0]})"
            + (
                ", which its manifest lists: the archive is damaged"
                if partial
                else ": was the run interrupted? Finish it with `offsite run --resume`, or "
                "go on with `offsite run --resume-from` and import every part"
            )
        )
    for name, entry in expected_cells.items():
        if name in members:
            _check_cell_file(name, members[name], entry["spec"], manifest["cells"].get(name))
    return manifest, plan
