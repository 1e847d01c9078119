"""The results site (``numbench site``): static HTML built from the history store, that opens
from the file system with no server and no network (docs/results-history.md, "The site").
This module is the build: what it writes, into which folder, and the command that runs it.

    site/
      index.html               the machines (latest run of each), the operations, the steps
                               found (``history changes``) and the runs (``history list``)
      op-<name>-<hash>.html    one page per operation: each cell's time run after run, the
                               machines side by side (``numbench.site.pages``)
      assets/vega.js           Vega, Vega-Lite and vega-embed, written once (vl-convert's
                               bundle) and referenced relatively by every page
      assets/site.css
      numbench-site.json       the files the build wrote (``MANIFEST``)

The store is read once (``numbench.history.read``: every Parquet file of its two tables, in
one pass); the pages are made from those two frames (``numbench.site.pages``). The bundle is
written only when vl-convert's version or the Vega-Lite version changed, not on every build.

The folder: a build lists every file it writes in the folder's manifest (``MANIFEST``). It
builds into a folder that is new, empty, or holds a manifest (a site it built before), and
refuses any other (``--out .``, ``--out docs``: a folder of other files), naming it. Of the
files there, it deletes only the operation pages its previous manifest listed that it did not
write again (an operation no longer in the store), never a file it did not list. The manifest
is written before the pages too (the files a build is about to write added to those listed),
so a build cut off halfway leaves a folder the next build accepts and tidies.

``run_site`` is what ``numbench site`` does and prints: ``numbench.cli`` holds its arguments,
and imports this package only when the command runs (the site needs pandas and altair).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from numbench import __version__
from numbench.contract import write_text_atomic
from numbench.history import HistoryError, read
from numbench.history.changes import changes, numbered_runs
from numbench.site import pages
from numbench.site.pages import index_page, operation_page

__all__ = ["Built", "SiteError", "build_site", "run_site"]


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


@dataclass
class Built:
    """What ``build_site`` wrote: every page, whether the bundle was (re)written, and the
    store's files it skipped ("path: why")."""

    pages: list[Path]
    bundle_written: bool
    skipped: list[str] = field(default_factory=list)


def vega_lite_version() -> str:
    """The Vega-Lite version altair writes its specs for, as vl-convert names it ('v6_4')."""
    from altair.utils._importers import vl_version_for_vl_convert

    return vl_version_for_vl_convert()


def bundle_header() -> str:
    """The bundle's first line: which vl-convert made it, for which Vega-Lite."""
    import vl_convert

    made_by = f"vl-convert {vl_convert.__version__}, Vega-Lite {vega_lite_version()}"
    return f"// vega-embed bundle: {made_by}\n"


def write_bundle(out: Path) -> bool:
    """Write ``assets/vega.js`` unless the one there was made by the same vl-convert for the
    same Vega-Lite; whether it was written."""
    from numbench.report.drawing import javascript_bundle  # the charts' own, kept between runs

    path = out / pages.BUNDLE
    header = bundle_header()
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            if f.readline() == header:
                return False
    path.parent.mkdir(parents=True, exist_ok=True)
    bundle = javascript_bundle()
    write_text_atomic(header + bundle, path)
    return True


def site_frames(store, margin: float) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(runs numbered on their hosts, ok cells with their run's number and date, steps found
    with their run's date and ratio in words) of a store."""
    runs = numbered_runs(store.runs)
    dated = runs[["run_id", "run_number", "started_at"]].rename(
        columns={"started_at": "run_started_at"}
    )
    ok = store.cells[(store.cells["status"] == "ok") & (store.cells["median_s"] > 0)]
    cells = ok.merge(dated, on="run_id")
    found = changes(store, margin).rename(columns={"started_at": "run_started_at"})
    found["ratio_text"] = [
        f"{r:.2f}x [{lo:.2f}, {hi:.2f}]"
        for r, lo, hi in zip(found["ratio"], found["ratio_low"], found["ratio_high"], strict=True)
    ]
    return runs, cells, found


def build_site(
    history: str | os.PathLike, out: str | os.PathLike, margin: float | None = None
) -> Built:
    """Build the site of the store in ``history`` into ``out``; ``margin``: the factor a step
    passes (default: the config's margin). A store without runs is refused by name
    (``HistoryError``), and so is a folder that is no site numbench built (``SiteError``:
    ``listed_before``)."""
    if margin is None:
        from numbench.config import default_margin

        margin = default_margin()
    listed = listed_before(out, history)
    store = read(history)
    if store.runs.empty:
        raise HistoryError(f"the history {history} holds no run: there is nothing to publish")
    runs, cells, found = site_frames(store, float(margin))
    out = Path(out)
    operations = sorted(cells["operation"].unique())
    names = ["index.html", pages.BUNDLE, pages.STYLESHEET]
    names += [pages.operation_file(operation) for operation in operations]
    out.mkdir(parents=True, exist_ok=True)
    # listed before a file is written: a build cut off halfway leaves a site the next accepts
    write_manifest(out, listed + names)
    written = write_bundle(out)
    write_text_atomic(pages.CSS, out / pages.STYLESHEET)
    built = [out / "index.html"]
    write_text_atomic(index_page(runs, cells, found, store.skipped), built[0])
    for operation, op_cells in cells.groupby("operation", sort=True):
        path = out / pages.operation_file(operation)
        op_steps = found[found["operation"] == operation]
        write_text_atomic(operation_page(str(operation), op_cells, op_steps), path)
        built.append(path)
    # the pages of operations no longer in the store go; no file the manifest did not list
    remove_stale(out, listed, names)
    write_manifest(out, names)
    return Built(pages=built, bundle_written=written, skipped=store.skipped)


def run_site(args: argparse.Namespace, exit_bad_input: int) -> int:
    """Build the site of ``args.history`` into ``args.out``; ``exit_bad_input`` for a store
    that cannot be used, a folder that is no site, or a margin that is no factor."""
    if args.margin is not None and not args.margin >= 1:  # nan fails this too
        print(f"site: --margin must be a factor of at least 1, not {args.margin}", file=sys.stderr)
        return exit_bad_input
    start = time.perf_counter()
    try:
        built = build_site(args.history, args.out, args.margin)
    except (HistoryError, SiteError) as exc:
        print(f"site: {exc}", file=sys.stderr)
        return exit_bad_input
    for skipped in built.skipped:
        print(f"history: skipped {skipped}", file=sys.stderr)
    took = time.perf_counter() - start
    index = built.pages[0]
    print(f"site: {len(built.pages)} pages in {args.out} ({took:.1f} s); open {index}")
    return 0
