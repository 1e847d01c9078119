"""The Parquet contract: column sets, types, and atomic writes.

A cell file holds one row per sample; a cell that could not measure holds one row with
``status`` and ``error`` set and null sample columns. Files are written to a temporary name in
the same folder and renamed into place, so no partial file is ever visible.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

STATUSES = ("ok", "mismatch", "unsupported", "unavailable", "failed", "timeout", "crashed")

KEY_FIELDS = [
    pa.field("library", pa.string()),
    pa.field("device", pa.string()),
    pa.field("operation", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("dtype", pa.string()),
]
SAMPLE_FIELDS = [
    pa.field("sample", pa.int64()),
    pa.field("loops", pa.int64()),
    pa.field("seconds", pa.float64()),
]
CELL_META_FIELDS = [
    pa.field("status", pa.string()),
    pa.field("error", pa.string()),
    pa.field("first_call_s", pa.float64()),
    pa.field("import_s", pa.float64()),
    pa.field("rel_error", pa.float64()),
    pa.field("tolerance", pa.float64()),
    pa.field("params", pa.string()),
    pa.field("library_version", pa.string()),
    pa.field("device_name", pa.string()),
    pa.field("device_details", pa.string()),
    pa.field("host", pa.string()),
    pa.field("cpu_model", pa.string()),
    pa.field("threads", pa.int64()),
    pa.field("blas", pa.string()),
    pa.field("python_version", pa.string()),
    pa.field("platform", pa.string()),
    pa.field("peak_rss_mb", pa.float64()),
    pa.field("device_peak_mb", pa.float64()),
    pa.field("flops", pa.float64()),
    pa.field("bytes", pa.float64()),
    pa.field("gflop_per_s", pa.float64()),
    pa.field("gb_per_s", pa.float64()),
    pa.field("wall_s", pa.float64()),
    pa.field("started_at", pa.string()),
]
STAT_FIELDS = [
    pa.field("median_s", pa.float64()),
    pa.field("iqr_s", pa.float64()),
    pa.field("min_s", pa.float64()),
    pa.field("mean_s", pa.float64()),
    pa.field("std_s", pa.float64()),
    pa.field("ci_low_s", pa.float64()),
    pa.field("ci_high_s", pa.float64()),
    pa.field("n_samples", pa.int64()),
]

CELL_SCHEMA = pa.schema(KEY_FIELDS + SAMPLE_FIELDS + CELL_META_FIELDS)
BENCHMARKS_SCHEMA = pa.schema(KEY_FIELDS + STAT_FIELDS + CELL_META_FIELDS)
CELL_COLUMNS = [f.name for f in CELL_SCHEMA]
KEY_COLUMNS = [f.name for f in KEY_FIELDS]
META_COLUMNS = [f.name for f in CELL_META_FIELDS]


def cell_table(key: dict, meta: dict, samples: list[tuple[int, float]]) -> pa.Table:
    """Build a cell's table: one row per (loops, seconds-per-call) sample, or one row without."""
    if meta.get("status") not in STATUSES:
        raise ValueError(f"status {meta.get('status')!r} is not one of {STATUSES}")
    rows = samples or [(None, None)]
    n = len(rows)
    columns = {}
    for f in KEY_FIELDS:
        columns[f.name] = [key[f.name]] * n
    columns["sample"] = list(range(n)) if samples else [None]
    columns["loops"] = [r[0] for r in rows]
    columns["seconds"] = [r[1] for r in rows]
    for f in CELL_META_FIELDS:
        columns[f.name] = [meta.get(f.name)] * n
    return pa.table(columns, schema=CELL_SCHEMA)


def write_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write Parquet to a temporary file beside ``path``, fsync it, then rename into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class CorruptFile(Exception):
    """A results file cannot be read; the message names it and the command that remakes it."""


def read_cell(path: str | os.PathLike) -> pa.Table:
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise CorruptFile(
            f"cannot read cell file {path}: {exc}. Remake it with: "
            f"snakemake --cores 1 --forcerun {path} {path}"
        ) from exc
    missing = [c for c in CELL_COLUMNS if c not in table.column_names]
    if missing:
        raise CorruptFile(
            f"cell file {path} lacks columns {missing}. Remake it with: "
            f"snakemake --cores 1 --forcerun {path} {path}"
        )
    return table.select(CELL_COLUMNS).cast(CELL_SCHEMA)
