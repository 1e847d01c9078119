"""The Parquet contract: column sets, types, and atomic writes.

A cell file holds one row per sample; a cell that could not measure holds one row with
``status`` and ``error`` set and null sample columns. Files are written to a temporary name in
the same folder and renamed into place, so no partial file is ever visible. The temporary
name starts with a dot and ends in ``.tmp`` (``.{name}.XXXX.tmp``): no rule's output pattern
and no ``*.parquet`` glob ever matches it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from numbench.errors import CorruptFile, corrupt, remake_command  # noqa: F401 - re-exported

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
    pa.field("cpu_count", pa.int64()),
    pa.field("ram_gb", pa.float64()),
    # When this cell held the host's timing lock (Unix seconds): shows cells never overlap.
    pa.field("locked_from_unix", pa.float64()),
    pa.field("locked_until_unix", pa.float64()),
    # Seconds the worker spent calibrating and sampling (with import_s and first_call_s,
    # the cell's in-process time).
    pa.field("sampling_s", pa.float64()),
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
SPEEDUPS_SCHEMA = pa.schema(
    [
        pa.field("library", pa.string()),
        pa.field("device", pa.string()),
        pa.field("operation", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("dtype", pa.string()),
        pa.field("host", pa.string()),
        pa.field("baseline_library", pa.string()),
        pa.field("baseline_device", pa.string()),
        pa.field("speedup", pa.float64()),
        pa.field("speedup_ci_low", pa.float64()),
        pa.field("speedup_ci_high", pa.float64()),
        pa.field("significant", pa.bool_()),
    ]
)
CROSSOVER_KINDS = ("crosses", "always_faster", "never_faster", "crosses_back", "insufficient")
CROSSOVERS_SCHEMA = pa.schema(
    [
        pa.field("library", pa.string()),
        pa.field("device", pa.string()),
        pa.field("operation", pa.string()),
        pa.field("dtype", pa.string()),
        pa.field("host", pa.string()),
        pa.field("baseline_library", pa.string()),
        pa.field("baseline_device", pa.string()),
        pa.field("crossover_size", pa.float64()),
        pa.field("kind", pa.string()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("below_size", pa.int64()),
        pa.field("above_size", pa.int64()),
    ]
)
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


def read_cell(path: str | os.PathLike) -> pa.Table:
    """Read one cell file; raise CorruptFile (file named, remake command given) if unusable."""
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("cell", path, f"{type(exc).__name__}: {exc}") from exc
    missing = [c for c in CELL_COLUMNS if c not in table.column_names]
    if missing:
        raise corrupt("cell", path, f"it lacks the columns {missing}")
    if table.num_rows == 0:
        raise corrupt("cell", path, "it has no rows")
    try:
        table = table.select(CELL_COLUMNS).cast(CELL_SCHEMA)
    except Exception as exc:  # noqa: BLE001 - wrong column types: unusable as well
        raise corrupt("cell", path, f"its columns have the wrong types ({exc})") from exc
    bad = sorted(set(table.column("status").to_pylist()) - set(STATUSES))
    if bad:
        raise corrupt("cell", path, f"unknown status {bad}; allowed: {', '.join(STATUSES)}")
    return table
