"""The Parquet contract: column sets, types, and atomic writes.

A cell file holds one row per sample; a cell that could not measure holds one row with
``status`` and ``error`` set and null sample columns. Files are written to a temporary name in
the same folder and renamed into place, so no partial file is ever visible. The temporary
name starts with a dot and ends in ``.tmp`` (``.{name}.XXXX.tmp``): no rule's output pattern
and no ``*.parquet`` glob ever matches it.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from numbench.errors import CorruptFile, corrupt, remake_command  # noqa: F401 - re-exported
from numbench.spec import CellMeta, ProcessReport

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
#: Arrow type of each annotation used in ``numbench.spec``'s result dataclasses.
_ARROW_TYPES = {
    "str | None": pa.string(),
    "float | None": pa.float64(),
    "int | None": pa.int64(),
    "str": pa.string(),
}
#: fields of a worker's report that are sample columns, not metadata
_SAMPLE_REPORT_FIELDS = ("loops", "samples_s")


def _meta_fields() -> list[pa.Field]:
    """The cell metadata columns, derived from ``ProcessReport`` and ``CellMeta``."""
    out = []
    for cls in (ProcessReport, CellMeta):
        for f in dataclasses.fields(cls):
            if f.name not in _SAMPLE_REPORT_FIELDS:
                out.append(pa.field(f.name, _ARROW_TYPES[f.type]))
    return out


CELL_META_FIELDS = _meta_fields()
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


def cell_table(key: dict, meta: CellMeta, report: ProcessReport) -> pa.Table:
    """Build a cell's table: one row per (loops, seconds-per-call) sample, or one row without.

    Samples are kept for ``ok`` and ``mismatch`` cells (a wrong result is still a timing)."""
    if report.status not in STATUSES:
        raise ValueError(f"status {report.status!r} is not one of {STATUSES}")
    values = {**dataclasses.asdict(report), **dataclasses.asdict(meta)}
    samples = report.samples_s if report.status in ("ok", "mismatch") else []
    n = max(1, len(samples))
    columns = {f.name: [key[f.name]] * n for f in KEY_FIELDS}
    columns["sample"] = list(range(n)) if samples else [None]
    columns["loops"] = [report.loops if samples else None] * n
    columns["seconds"] = list(samples) if samples else [None]
    for f in CELL_META_FIELDS:
        columns[f.name] = [values[f.name]] * n
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
