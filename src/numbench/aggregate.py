"""results/benchmarks.parquet: one row per cell, its statistics and its metadata."""

from __future__ import annotations

import os

import pyarrow as pa

from numbench.stats import summarize
from numbench.tables import (
    BENCHMARKS_SCHEMA,
    KEY_COLUMNS,
    META_COLUMNS,
    STAT_FIELDS,
    read_cell,
    write_atomic,
)


def cell_row(table: pa.Table) -> dict:
    """Collapse one cell's per-sample rows into one row of statistics."""
    first = {c: table.column(c)[0].as_py() for c in KEY_COLUMNS + META_COLUMNS}
    seconds = [s for s in table.column("seconds").to_pylist() if s is not None]
    stats = summarize(seconds).as_dict() if seconds else {f.name: None for f in STAT_FIELDS}
    if not seconds:
        stats["n_samples"] = 0
    return {**first, **stats}


def aggregate(cell_paths: list[str | os.PathLike], output: str | os.PathLike) -> pa.Table:
    rows = [cell_row(read_cell(p)) for p in cell_paths]
    table = pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA)
    write_atomic(table, output)
    return table
