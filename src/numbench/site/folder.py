"""The site's folder: where a build may write, and what it may delete.

A build lists every file it writes in the folder's manifest (``MANIFEST``). It builds into a
folder that is new, empty, or holds a manifest (a site it built before), and refuses any
other (``--out .``, ``--out docs``: a folder of other files), naming it. Of the files there,
it deletes only the operation pages its previous manifest listed that it did not write again
(an operation no longer in the store), never a file it did not list. The manifest is written
before the pages too (the files a build is about to write added to those listed), so a build
cut off halfway leaves a folder the next build accepts and tidies.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from numbench import __version__
from numbench.contract import write_text_atomic

#: the manifest: the files the last build wrote, relative to the site's folder
MANIFEST = "numbench-site.json"
MANIFEST_FORMAT = 1
#: the most bytes of a manifest read (a page's name is under 70 bytes)
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
#: the only files a build deletes: operation pages (``numbench.site.pages.operation_file``)
OPERATION_PAGE = re.compile(r"op-[A-Za-z0-9_-]+-[0-9a-f]{8}\.html")


class SiteError(Exception):
    """A folder the site cannot be built into; the message names it and why."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def listed_before(out: str | os.PathLike, history: str | os.PathLike) -> list[str]:
    """The files the previous build into ``out`` listed (none for a new or empty folder).
    Raise ``SiteError`` for a folder inside the store, or one that holds other files and no
    manifest of a site numbench built."""
    out, history = Path(out), Path(history)
    where = Path(os.path.normpath(Path.cwd() / out))
    if _inside(where, Path(os.path.normpath(Path.cwd() / history))):
        raise SiteError(
            f"the site's folder {out} is the history store {history} or inside it: build the "
            "site beside the store (default history-site)"
        )
    if out.exists() and not out.is_dir():
        raise SiteError(f"the site's folder {out} is a file, not a folder")
    if not out.exists() or not any(out.iterdir()):
        return []
    path = out / MANIFEST
    if not path.is_file():
        raise SiteError(
            f"the site's folder {out} holds other files and no {MANIFEST}: it is no site "
            "numbench built, and a build would write over and delete files there. Name a new "
            "or empty folder, or a site built before (numbench site --out, the config's "
            "history.site); a site from a numbench that wrote no manifest: delete it first"
        )
    try:
        with open(path, "rb") as fh:
            described = json.loads(fh.read(MAX_MANIFEST_BYTES))
        files = described["files"]
        if int(described["format"]) > MANIFEST_FORMAT or not isinstance(files, list):
            raise ValueError(f"format {described['format']}, files {type(files).__name__}")
        if not all(isinstance(name, str) for name in files):
            raise ValueError("a file's name is not a string")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SiteError(
            f"{path} is not the manifest of a site this numbench built ({type(exc).__name__}: "
            f"{exc}); delete {out} and build the site again"
        ) from None
    return files


def write_manifest(out: Path, files: list[str]) -> None:
    """List ``files`` (relative to ``out``) as the site's."""
    described = {"format": MANIFEST_FORMAT, "numbench": __version__, "files": sorted(set(files))}
    write_text_atomic(json.dumps(described, indent=1) + "\n", out / MANIFEST)


def remove_stale(out: Path, listed: list[str], built: list[str]) -> list[str]:
    """Delete the operation pages ``listed`` before and not ``built`` now; their names."""
    gone = []
    for name in sorted(set(listed) - set(built)):
        path = out / name
        if OPERATION_PAGE.fullmatch(name) and path.is_file() and not path.is_symlink():
            path.unlink()
            gone.append(name)
    return gone
