"""The Parquet contract: column sets, types, and atomic writes.

A cell file holds one row per sample; a cell that could not measure holds one row with
``status`` and ``error`` set and null sample columns. Files are written to a temporary name in
the same folder and renamed into place, so no partial file is ever visible. The temporary
name starts with a dot and ends in ``.tmp`` (``.{name}.XXXX.tmp``): no rule's output pattern
and no ``*.parquet`` glob ever matches it. It is created as a plain ``open`` would create the
file (``replacing``), so what lands in results/ has the mode the user's umask (or the folder's
default ACL) gives, readable by a group that shares the folder, not ``mkstemp``'s 0600.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from numbench.cells import CURVE, KEY, KEY_WITH_HOST
from numbench.errors import CorruptFile, corrupt, remake_command  # noqa: F401 - re-exported
from numbench.spec import STATUSES, CellMeta, ProcessReport
from numbench.stats import Summary

if TYPE_CHECKING:
    import pandas as pd

#: the Arrow type of a cell's key fields (``numbench.cells.KEY_WITH_HOST``) that are not text
_KEY_TYPES = {"size": pa.int64(), "threads": pa.int64()}


def key_fields(names) -> list[pa.Field]:
    """The Arrow fields of these fields of a cell's key (``numbench.cells``), in this order."""
    return [pa.field(name, _KEY_TYPES.get(name, pa.string())) for name in names]


#: the key columns a cell file and benchmarks.parquet begin with: ``cells.KEY`` without
#: ``threads``, which they keep among the cell's metadata as contract 1 did
KEY_FIELDS = key_fields(KEY[:5])
#: the sample roles (``role``): the cell's own library, and the baseline's process run beside it
MEASURED, BASELINE = "measured", "baseline"
SAMPLE_FIELDS = [
    # "measured": the cell's own library; "baseline": the baseline's process run beside it
    pa.field("role", pa.string()),
    # the round (0, 1, ...): in a paired cell, the measured and the baseline process of one
    # round ran back to back
    pa.field("replicate", pa.int64()),
    pa.field("process_started_unix", pa.float64()),
    # "latency": every call waited for; "pipelined": calls queued back to back, one sync per
    # sample (asynchronous libraries only; numbench.timing)
    pa.field("mode", pa.string()),
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
    "float": pa.float64(),
    "int": pa.int64(),
    "bool": pa.bool_(),
    "bool | None": pa.bool_(),
}
#: fields of a worker's report that are not per-process columns: the cell's status and error
#: are decided over its processes (CellMeta), the samples are the sample columns
_NOT_PROCESS_FIELDS = (
    "status",
    "error",
    "loops",
    "samples_s",
    "pipelined_loops",
    "pipelined_samples_s",
)
LATENCY, PIPELINED = "latency", "pipelined"


def _fields(cls, skip=()) -> list[pa.Field]:
    return [
        pa.field(f.name, _ARROW_TYPES[f.type])
        for f in dataclasses.fields(cls)
        if f.name not in skip
    ]


#: What each worker process saw (import, first call, error, memory...): per process.
PROCESS_FIELDS = _fields(ProcessReport, _NOT_PROCESS_FIELDS)
#: What the supervisor records about the cell and the host: the same on every row.
CELL_FIELDS = _fields(CellMeta)
CELL_META_FIELDS = PROCESS_FIELDS + CELL_FIELDS
#: The statistics of a cell over all its processes (``numbench.stats.Summary``).
STAT_FIELDS = _fields(Summary)

#: The pipelined figures of a cell (``numbench.analyse.aggregate.pipelined_row``): time per call when
#: calls are queued back to back, and how much faster that is than waiting for each
#: (latency / pipelined). A synchronous library's are its latency figures (speedup 1, no
#: pipelined samples of its own). ``end_to_end_s``: placing the inputs, one call and reading
#: the result back (null on the CPU).
PIPELINE_FIELDS = [
    pa.field("pipelined_median_s", pa.float64()),
    pa.field("pipelined_ci_low_s", pa.float64()),
    pa.field("pipelined_ci_high_s", pa.float64()),
    pa.field("pipelined_n_samples", pa.int64()),
    pa.field("pipelined_speedup", pa.float64()),
    pa.field("pipelined_speedup_ci_low", pa.float64()),
    pa.field("pipelined_speedup_ci_high", pa.float64()),
    pa.field("end_to_end_s", pa.float64()),
]


def pipelined_cells(bench: pd.DataFrame) -> pd.DataFrame:
    """The ok cells of results/benchmarks.parquet timed both ways (asynchronous libraries):
    per-call latency and pipelined. analyse and report select them alike."""
    if "pipelined_n_samples" not in bench:
        return bench.iloc[0:0]
    ok = (bench["status"] == "ok") & (bench["pipelined_n_samples"].fillna(0) > 0)
    return bench[ok]


#: Processes of the cell measured in other cells' jobs that its statistics pool (the
#: baseline's, paired beside every other library's cell); 0 for every other cell.
POOL_FIELDS = [pa.field("pooled_processes", pa.int64())]
#: What the cell's processes paid for their first calls, summed: ``first_call_s`` is what one
#: costs a user (the compiling processes' alone where the cell shared its compilations,
#: ``compile_cache``), this is what the run spent on them (its time line reads it)
PAID_FIELDS = [pa.field("first_call_paid_s", pa.float64())]

#: The cell on its host's roofline (``numbench.roofline.analyse``): flops per byte of its
#: cost model, the GFLOP/s its roof allows, the share of that it reached, the roof it was
#: held against (l2, l3, dram, compute) and why where it is a cache's or past its roof.
ROOF_FIELDS = [
    pa.field("arithmetic_intensity", pa.float64()),
    pa.field("attainable_gflop_per_s", pa.float64()),
    pa.field("roof_fraction", pa.float64()),
    pa.field("roof", pa.string()),
    pa.field("roof_note", pa.string()),
]

CELL_SCHEMA = pa.schema(KEY_FIELDS + SAMPLE_FIELDS + CELL_META_FIELDS)
BENCHMARKS_SCHEMA = pa.schema(
    KEY_FIELDS
    + STAT_FIELDS
    + POOL_FIELDS
    + PAID_FIELDS
    + PIPELINE_FIELDS
    + CELL_META_FIELDS
    + ROOF_FIELDS
)
SPEEDUPS_SCHEMA = pa.schema(
    [
        *key_fields(KEY_WITH_HOST),
        pa.field("baseline_library", pa.string()),
        pa.field("baseline_device", pa.string()),
        pa.field("speedup", pa.float64()),
        pa.field("speedup_ci_low", pa.float64()),
        pa.field("speedup_ci_high", pa.float64()),
        pa.field("significant", pa.bool_()),
        # faster / same / slower: significant *and* beyond the margin (config key margin)
        pa.field("verdict", pa.string()),
        pa.field("margin", pa.float64()),
        # true when the speedup came from baseline processes run beside the cell's own
        pa.field("paired", pa.bool_()),
        pa.field("unstable", pa.bool_()),
        # the round floor of a paired interval (relative half-width; 0 unpaired) and whether
        # it widened the bootstrap interval (numbench.analyse.speedups)
        pa.field("ci_floor", pa.float64()),
        pa.field("floored", pa.bool_()),
        # true when the interval holds neither the margin nor 1 / margin: the verdict would
        # change only if the speedup moved beyond its interval; false: in doubt (or no speedup)
        pa.field("settled", pa.bool_()),
        # the chance that a rerun gives the same verdict, from the interval
        # (numbench.stats.repeat_chance); null without a speedup
        pa.field("repeat_chance", pa.float64()),
    ]
)
#: results/samples.parquet: every sample of every ok cell, for the speedups' intervals.
SAMPLES_SCHEMA = pa.schema(
    KEY_FIELDS
    + [
        pa.field("host", pa.string()),
        pa.field("threads", pa.int64()),
        pa.field("role", pa.string()),
        pa.field("replicate", pa.int64()),
        pa.field("seconds", pa.float64()),
    ]
)
CROSSOVERS_SCHEMA = pa.schema(
    [
        *key_fields(CURVE),
        pa.field("baseline_library", pa.string()),
        pa.field("baseline_device", pa.string()),
        pa.field("crossover_size", pa.float64()),
        pa.field("kind", pa.string()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("below_size", pa.int64()),
        pa.field("above_size", pa.int64()),
        # true when every size's verdict is settled (speedups.parquet ``settled``): the kind
        # would change only if a speedup moved beyond its interval; null for speedups from
        # before that column
        pa.field("settled", pa.bool_()),
    ]
)
CELL_COLUMNS = [f.name for f in CELL_SCHEMA]
KEY_COLUMNS = [f.name for f in KEY_FIELDS]
META_COLUMNS = [f.name for f in CELL_META_FIELDS]


def cell_table(key: dict, meta: CellMeta, runs: list) -> pa.Table:
    """Build a cell's table: one row per sample of every process (``ok`` and ``mismatch``
    cells: a wrong result is still a timing), or one row without samples, carrying the
    process that ended the cell."""
    if meta.status not in STATUSES:
        raise ValueError(f"status {meta.status!r} is not one of {STATUSES}")
    cell_values = dataclasses.asdict(meta)
    rows = []
    keep_samples = meta.status in ("ok", "mismatch")
    for run in runs if keep_samples else []:
        process, report = dataclasses.asdict(run.report), run.report
        for mode, loops, samples in (
            (LATENCY, report.loops, report.samples_s),
            (PIPELINED, report.pipelined_loops, report.pipelined_samples_s),
        ):
            for i, seconds in enumerate(samples):
                sample = {"mode": mode, "sample": i, "loops": loops, "seconds": seconds}
                rows.append((run, process, sample))
    if not rows:
        run = runs[-1]
        rows.append((run, dataclasses.asdict(run.report), {}))
    columns: dict[str, list] = {f.name: [key[f.name]] * len(rows) for f in KEY_FIELDS}
    columns["role"] = [run.role for run, _, _ in rows]
    columns["replicate"] = [run.replicate for run, _, _ in rows]
    columns["process_started_unix"] = [run.started_unix for run, _, _ in rows]
    for name in ("mode", "sample", "loops", "seconds"):
        columns[name] = [sample.get(name) for _, _, sample in rows]
    for f in PROCESS_FIELDS:
        columns[f.name] = [process[f.name] for _, process, _ in rows]
    for f in CELL_FIELDS:
        columns[f.name] = [cell_values[f.name]] * len(rows)
    return pa.table(columns, schema=CELL_SCHEMA)


#: attempts at a free temporary name before giving up (each name has 64 random bits)
TEMPORARY_NAME_TRIES = 100
#: what a plain ``open(path, "w")`` asks for; the kernel takes the umask (or the folder's
#: default ACL) off it
PLAIN_FILE_MODE = 0o666


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary file beside ``path`` to write; once the block ends, fsync it
    and rename it over ``path``. On an error the temporary file is removed and ``path`` left
    as it was.

    The one way numbench writes a results file. The temporary file is created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0666, as ``open`` creates a file, so the
    kernel applies the umask or the folder's default ACL: the file gets the mode a plain
    write would give it (``tempfile.mkstemp`` would give 0600, unreadable to a group that
    shares results/). The random name cannot be taken over by a link planted in advance.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(TEMPORARY_NAME_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, PLAIN_FILE_MODE)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        os.close(fd)
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write Parquet to ``path`` whole or not at all (``replacing``)."""
    with replacing(path) as tmp:
        pq.write_table(table, tmp)


def write_bytes_atomic(data: bytes, path: str | os.PathLike) -> None:
    """Write ``data`` to ``path`` whole or not at all (``replacing``)."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write UTF-8 text to ``path`` whole or not at all (``replacing``)."""
    write_bytes_atomic(text.encode("utf-8"), path)


#: Columns added since the first cell files (contract 1), with what an older file means by
#: their absence: every sample is a per-call latency, and nothing pipelined or moved was
#: measured (null, not "synchronous": it was not asked). Such a file still reads; a rerun of
#: the workflow remeasures it anyway (the cell spec's contract changed).
LATER_COLUMNS = {
    "mode": LATENCY,
    "dispatch": None,
    "pipelined_sampling_s": None,
    "pipelined_window": None,
    "pipelined_rel_error": None,
    "h2d_s": None,
    "d2h_s": None,
    "h2d_bytes": None,
    "d2h_bytes": None,
    "cpu_taken": None,
    # a cell from before contract 11: every process was a fresh interpreter that paid its
    # whole import (read as unknown: the time line counts ``import_s`` for it)
    "import_paid_s": None,
    "worker_start": None,
    # a cell from before contract 12: every process compiled afresh
    "compile_cache": None,
    "set_aside": None,
    "cpus_allowed": None,
    "timing_settings": None,
    "replicate_settings": None,
    # a cell from before contract 6 did not record its output's bytes: the roofline's
    # first-touch estimate is left out for it until it is measured again
    "output_bytes": None,
    # a cell from before contract 7: its kernel was compiled by numbench (no as_is then),
    # but the file did not say so
    "as_is": None,
    "seed": None,
    "inputs_from": None,
    "options": None,
    # a cell from before contract 7 did not record whether its flop count is exact: past its
    # roof, it is judged as an estimate's (a cost-model error) until it is measured again
    "flops_exact": None,
    # nor what the machine did meanwhile (``numbench.measure.activity``): unknown
    "other_cpu_share": None,
    "steal_share": None,
    "load_avg_1m": None,
    # nor whether a time cap stopped it (``replicates.max_cell_s``): unknown
    "capped": None,
    # nor whether it waited for quiet (``wait_for_quiet``)
    "quiet_wait_s": None,
    "quiet_reached": None,
    # a cell from before contract 8 did not time the sentinel (``numbench.measure.activity.time_sentinel``)
    "sentinel_s": None,
    # nor, before contract 9, the workflow's own share apart: its other_cpu_share holds it
    "workflow_cpu_share": None,
    # nor, before contract 10, whether the workflow was kept off the workers' CPUs: it was not
    "workflow_moved": None,
    # nor, written before it was recorded, when its first job started: the run's time line
    # then estimates its start
    "jobs_from_unix": None,
}


def read_cell(path: str | os.PathLike) -> pa.Table:
    """Read one cell file; raise CorruptFile (file named, remake command given) if unusable."""
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("cell", path, f"{type(exc).__name__}: {exc}") from exc
    for name, value in LATER_COLUMNS.items():
        if name not in table.column_names and table.num_rows:
            typ = CELL_SCHEMA.field(name).type
            table = table.append_column(name, pa.array([value] * table.num_rows, type=typ))
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
