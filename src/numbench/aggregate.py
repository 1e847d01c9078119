"""results/benchmarks.parquet: one row per cell, its statistics and its metadata.

Nothing is skipped: a cell file or an inputs file that cannot be read stops the aggregation
with a ``CorruptFile`` that names the file and the command that remakes it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from numbench import inputs as inputs_file
from numbench.errors import corrupt
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


def check_inputs(paths: list[str | os.PathLike]) -> None:
    """Every inputs file must exist and read back intact (CRC of each array)."""
    for path in paths:
        if not Path(path).exists():
            raise corrupt("inputs", path, "it is missing")
        inputs_file.check(path)


def aggregate(
    cell_paths: list[str | os.PathLike],
    output: str | os.PathLike,
    inputs: list[str | os.PathLike] = (),
) -> pa.Table:
    """One row per cell; ``inputs`` (the cells' inputs files) are checked first."""
    check_inputs(list(inputs))
    rows = [cell_row(read_cell(p)) for p in cell_paths]
    table = pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA)
    write_atomic(table, output)
    return table
