"""The results site (``numbench site``): static HTML built from the history store, that opens
from the file system with no server and no network (docs/results-history.md, "The site").

    site/
      index.html               the machines (latest run of each), the operations, the steps
                               found (``history changes``) and the runs (``history list``)
      op-<name>-<hash>.html    one page per operation: each cell's time run after run, the
                               machines side by side (``numbench.site.charts``)
      assets/vega.js           Vega, Vega-Lite and vega-embed, written once (vl-convert's
                               bundle) and referenced relatively by every page
      assets/site.css
      numbench-site.json       the files the build wrote: a build writes into a new or empty
                               folder or a site it built, and deletes only pages it listed
                               (``numbench.site.folder``)

The store is read once (``numbench.history.read``: every Parquet file of its two tables, in
one pass); the pages are made from those two frames. The bundle (about 1 MB) is written only
when vl-convert's version or the Vega-Lite version changed, not on every build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from numbench.contract import write_text_atomic
from numbench.history import HistoryError, read
from numbench.history.changes import changes, numbered_runs
from numbench.site import pages
from numbench.site.folder import SiteError, listed_before, remove_stale, write_manifest
from numbench.site.index import index_page
from numbench.site.operation import operation_page

__all__ = ["Built", "SiteError", "build_site"]


@dataclass
class Built:
    """What ``build_site`` wrote: every page, whether the bundle was (re)written, and the
    store's files it skipped ("path: why")."""

    pages: list[Path]
    bundle_written: bool
    skipped: list[str] = field(default_factory=list)


def vega_lite_version() -> str:
    """The Vega-Lite version altair writes its specs for, as vl-convert names it ('v6_4')."""
    import altair as alt

    return "_".join(alt.SCHEMA_VERSION.split(".")[:2])


def bundle_header() -> str:
    """The bundle's first line: which vl-convert made it, for which Vega-Lite."""
    import vl_convert

    made_by = f"vl-convert {vl_convert.__version__}, Vega-Lite {vega_lite_version()}"
    return f"// vega-embed bundle: {made_by}\n"


def write_bundle(out: Path) -> bool:
    """Write ``assets/vega.js`` unless the one there was made by the same vl-convert for the
    same Vega-Lite; whether it was written."""
    import vl_convert

    path = out / pages.BUNDLE
    header = bundle_header()
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            if f.readline() == header:
                return False
    path.parent.mkdir(parents=True, exist_ok=True)
    bundle = vl_convert.javascript_bundle(vl_version=vega_lite_version())
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
    ``numbench.site.folder``)."""
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
