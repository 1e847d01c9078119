"""How long does ``numbench site`` take, and how large is the site? (a benchmark, not a test)

For each number of runs asked (by default 50 and 1,000), builds a synthetic store shaped like
the default grid on a CPU host (``history_scale.build``: OPERATIONS operations, 225 cells, each
median moved by 3% log-normal noise run to run) in a temporary folder, then times the site's
build into an empty folder (the bundle written) and again into the same folder (the bundle
kept), each in this process, and gives the site's size on disk and its largest page.

    .venv/bin/python benchmarks/site_build.py [--runs 50 1000] [--cells 225] [--markdown]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _report import publish  # also puts src/ on the path
from history_scale import build

from numbench.report.markdown import md_table
from numbench.site import build_site

#: the default grid's operations (config/config.yaml)
OPERATIONS = 9


def timed(what):
    start = time.perf_counter()
    result = what()
    return result, time.perf_counter() - start


def figures(runs: int, cells: int) -> list[str]:
    """One row of figures: the store of ``runs`` runs, its site built twice."""
    with tempfile.TemporaryDirectory() as tmp:
        store, out = Path(tmp) / "history", Path(tmp) / "site"
        build(store, runs, cells, operations=OPERATIONS)
        first, first_s = timed(lambda: build_site(store, out, margin=1.1))
        again, again_s = timed(lambda: build_site(store, out, margin=1.1))
        assert first.bundle_written and not again.bundle_written
        files = [p for p in out.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        largest = max(p.stat().st_size for p in first.pages)
    return [
        f"{runs} runs x {cells} cells",
        f"{first_s:.1f} s",
        f"{again_s:.1f} s",
        f"{len(first.pages)}",
        f"{size / 2**20:.1f} MiB",
        f"{largest / 2**20:.2f} MiB",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[50, 1000])
    parser.add_argument("--cells", type=int, default=225)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = [figures(runs, args.cells) for runs in args.runs]
    header = ["store", "build (bundle written)", "rebuild (bundle kept)", "pages"]
    header += ["site on disk", "largest page"]
    body = (
        f"The site of a synthetic store shaped like the default grid ({OPERATIONS} operations, "
        f"{args.cells} cells a run, one host), built by `numbench.site.build_site` in this "
        "process; the store's reading and its change points are part of each build.\n\n"
        + md_table(header, rows)
    )
    publish("site_build.py", body, args.markdown, None)


if __name__ == "__main__":
    main()
