"""How do the history's commands scale with the runs kept? (a benchmark, not a test)

Builds a synthetic store of RUNS runs of CELLS cells each (the default grid has 225 cells on
a CPU host) in a temporary folder: every run's cells are those of one constructed results
folder, each median moved by 3% log-normal noise, added through ``numbench.history.add``.
Then it times reading the store, ``history list``'s text and ``history changes`` (every
cell's series), each in this process, and gives the store's size on disk.

    .venv/bin/python benchmarks/history_scale.py [--runs 1000] [--cells 225] [--markdown]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from _report import publish  # also puts src/ on the path

from numbench.history import add, read
from numbench.history.changes import changes
from numbench.history.store import runs_of
from numbench.history.views import list_text
from numbench.report.markdown import md_table

LIBRARIES = ("numpy", "jax", "torch", "tensorflow", "numba")


def template(folder: Path, cells: int, operations: int = 1) -> tuple[pa.Table, pa.Table]:
    """One run of ``cells`` cells (a constructed results folder), as the store's tables: the
    cells shared among ``operations`` operations, each size measured by every library in turn."""
    per_operation = -(-cells // operations)
    rows = [
        {
            "library": LIBRARIES[i % len(LIBRARIES)],
            "device": "cpu",
            "operation": f"op{i // per_operation}",
            "size": 1000 * (1 + (i % per_operation) // len(LIBRARIES)),
            "dtype": "float64",
            "threads": 1,
            "host": "host",
            "status": "ok",
            "median_s": 1e-4,
            "ci_low_s": 0.97e-4,
            "ci_high_s": 1.03e-4,
            "library_version": "1.0",
            "started_at": "2026-01-01T00:00:00+00:00",
        }
        for i in range(cells)
    ]
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "benchmarks.parquet", index=False)
    return runs_of(folder)[0]


def build(store: Path, runs: int, cells: int, seed: int = 0, operations: int = 1) -> float:
    """Add ``runs`` runs of ``cells`` cells of ``operations`` operations to ``store``; the
    seconds it took."""
    rng = np.random.default_rng(seed)
    run, table = template(store.parent / "template", cells, operations)
    medians = table.column("median_s").to_numpy()
    start = time.perf_counter()
    for i in range(runs):
        run_id = f"{i:016x}"
        moved = medians * np.exp(rng.normal(0.0, 0.03, cells))
        date = (pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(hours=i)).isoformat()
        this_run = run.set_column(0, "run_id", pa.array([run_id]))
        this_run = this_run.set_column(1, "started_at", pa.array([date]))
        these = table.set_column(0, "run_id", pa.array([run_id] * cells))
        at = these.schema.get_field_index("median_s")
        these = these.set_column(at, "median_s", pa.array(moved))
        add(store, this_run, these)
    return time.perf_counter() - start


def timed(what):
    start = time.perf_counter()
    result = what()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cells", type=int, default=225)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "history"
        added = build(store, args.runs, args.cells)
        found, read_s = timed(lambda: read(store))
        _, list_s = timed(lambda: list_text(found.runs))
        steps, changes_s = timed(lambda: changes(found))
        size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    figures = [
        [
            "add every run (one at a time)",
            f"{added:.1f} s ({added / args.runs * 1e3:.0f} ms a run)",
        ],
        ["read the store", f"{read_s:.1f} s"],
        ["history list (after reading)", f"{list_s:.1f} s"],
        ["history changes (after reading)", f"{changes_s:.1f} s, {len(steps)} steps found"],
        ["size on disk", f"{size / 2**20:.1f} MiB ({size / args.runs / 1024:.0f} KiB a run)"],
    ]
    body = f"A synthetic store of {args.runs} runs of {args.cells} cells.\n\n" + md_table(
        ["what", "figure"], figures
    )
    publish("history_scale.py", body, args.markdown, None)


if __name__ == "__main__":
    main()
