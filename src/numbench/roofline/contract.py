"""The roofline's tables: the roofs table (results/roofs.parquet) and the notes of a cell's
place on it.

The roofs table: its columns, the names of its roofs, the cache a working set is held against,
and its reader. measure writes it (``numbench.roofline.measure.rows``), analyse places every
cell on it, report draws and words it; all three take its vocabulary from here.

The notes of benchmarks.parquet's ``roof_note`` column, and the noise they are judged by:
analyse writes them (``numbench.roofline.analyse``), report explains them; and the roofline's
facts (``RoofFinding``), which ``numbench.contract.facts`` tells with the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from numbench.errors import corrupt

#: the bandwidth roofs, fastest first; ``compute``; on a GPU the transfers
BANDWIDTH_ROOFS = ("l2", "l3", "dram")
COMPUTE_ROOF = "compute"
TRANSFER_ROOFS = ("h2d", "d2h")
ROOF_NAMES = (*BANDWIDTH_ROOFS, COMPUTE_ROOF, *TRANSFER_ROOFS)
#: when in the run a row was measured (the ``round`` column): before the cells, or again
#: after every cell (``roofs_at_end``; an offsite run measures once, after its cells)
ROUNDS = ("start", "end")
#: what a roof means; the workflow's roofs rules carry it as a param, so a workspace measured
#: under another meaning measures its roofs again instead of mixing the two (2: a CPU
#: bandwidth roof is the best triad, the copy kept beside it in ``copy_value``)
ROOFS_VERSION = 2
ITEMSIZE = {"float32": 4, "float64": 8}

ROOFS_SCHEMA = pa.schema(
    [
        pa.field("host", pa.string()),
        pa.field("device", pa.string()),
        pa.field("dtype", pa.string()),
        pa.field("threads", pa.int64()),
        # l2, l3, dram, compute; on a GPU also h2d, d2h
        pa.field("roof", pa.string()),
        # ok, unsupported (no such working set here), unavailable (no device, no library),
        # failed, timeout, crashed (the worker died): as a cell's statuses
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("unit", pa.string()),
        pa.field("kernel", pa.string()),
        pa.field("library", pa.string()),
        pa.field("library_version", pa.string()),
        pa.field("working_set_bytes", pa.int64()),
        pa.field("trials", pa.int64()),
        # how ``value`` counts bytes: "stream" (reads + writes, no write-allocate)
        pa.field("bytes_counted", pa.string()),
        # CPU bandwidth rows: the best copy at the same working set, counted as ``value`` is
        # (the roof is the best triad; a copy may store past the cache and reach more)
        pa.field("copy_value", pa.float64()),
        # the same measurement counting the write-allocate read of every stored line
        pa.field("value_write_allocate", pa.float64()),
        # every way measured, as JSON: "library kernel" -> value (or why it did not run)
        pa.field("candidates", pa.string()),
        # where the roof looks wrong (a cache roof below DRAM's, a peak passed)
        pa.field("note", pa.string()),
        # theoretical peak (GFLOP/s; on a GPU the DRAM's GB/s) and how it was formed
        pa.field("theoretical_value", pa.float64()),
        pa.field("theoretical_note", pa.string()),
        # dram rows: copying into a fresh array against a reused one (page faults)
        pa.field("first_touch_s_per_gb", pa.float64()),
        pa.field("first_touch_faults_per_mib", pa.float64()),
        pa.field("cpu_model", pa.string()),
        pa.field("device_name", pa.string()),
        pa.field("cpu_flags", pa.string()),
        # cache bytes per level for the CPUs the threads ran on, and every instance as JSON
        pa.field("l1_bytes", pa.int64()),
        pa.field("l2_bytes", pa.int64()),
        pa.field("l3_bytes", pa.int64()),
        pa.field("caches", pa.string()),
        pa.field("blas", pa.string()),
        pa.field("threads_used", pa.int64()),
        # the CPUs the threads were pinned to
        pa.field("affinity", pa.string()),
        pa.field("clock_ghz", pa.float64()),
        pa.field("clock_source", pa.string()),
        # GPU: NVML's clocks (JSON); each library's own float32 matmul mode (JSON)
        pa.field("clocks", pa.string()),
        pa.field("tf32", pa.string()),
        pa.field("measured_at", pa.string()),
        # the share of the CPUs' time other programs took while the job that made the row
        # ran (as a cell's), and the attempts set aside for it (``numbench.measure.quiet.undisturbed``)
        pa.field("cpu_taken", pa.float64()),
        pa.field("set_aside", pa.int64()),
        # wall seconds of measuring this (device, threads), every dtype and library
        pa.field("measure_s", pa.float64()),
        # when the roofs held the host's timing lock (Unix seconds): no cell ran meanwhile
        pa.field("locked_from_unix", pa.float64()),
        pa.field("locked_until_unix", pa.float64()),
        # when in the run: "start" (before the cells) or "end" (after every cell); ROUNDS
        pa.field("round", pa.string()),
    ]
)


#: columns a roofs table from before them lacks: ``read_roofs`` reads them as null
OLDER_TABLES = (
    # from before the roofs were measured twice: when in the run is not known
    "round",
    # from before a bandwidth roof was the best triad (it was the faster of triad and copy,
    # its ``kernel`` says which): the copy's figure is in ``candidates`` only
    "copy_value",
)


def resident_level(working_set_bytes: float, cache_bytes: dict[str, int]) -> str:
    """The smallest measured cache a working set fits in (``l2``, ``l3``), else ``dram``.
    A set that fits the L1 is held against the L2 roof: the L1 has none of its own."""
    for level in ("l2", "l3"):
        size = cache_bytes.get(level)
        if size and working_set_bytes <= size:
            return level
    return "dram"


def read_roofs(path: str | os.PathLike) -> pa.Table:
    """results/roofs.parquet, checked: a file that cannot be read, or lacks a column, stops
    the analysis with a ``CorruptFile`` naming it and the command that remakes it."""
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("roofs", path, f"{type(exc).__name__}: {exc}") from exc
    for name in OLDER_TABLES:
        if name not in table.column_names:
            kind = ROOFS_SCHEMA.field(name).type
            table = table.append_column(name, pa.nulls(table.num_rows, kind))
    missing = [name for name in ROOFS_SCHEMA.names if name not in table.column_names]
    if missing:
        raise corrupt("roofs", path, f"it lacks the columns {missing}")
    try:
        return table.select(ROOFS_SCHEMA.names).cast(ROOFS_SCHEMA)
    except Exception as exc:  # noqa: BLE001 - wrong column types: unusable as well
        raise corrupt("roofs", path, f"its columns have the wrong types ({exc})") from exc


# -- the notes of a cell's place on the roofline -----------------------------------------------
#: how far past its roof a cell may be before it is called a cost-model error (or, for an
#: operation whose flop count is exact, a roof measured low)
ROOF_NOISE_FACTOR = 1.1
CACHE_RESIDENT = "cache-resident"
WITHIN_NOISE = "within noise"
#: past its roof further than noise explains, where the cost model can be wrong (its flops
#: an estimate: ``Operation.flops_exact`` false)
COST_MODEL_ERROR = "cost-model error"
#: past its roof further than noise explains, where the cost model cannot be wrong (its
#: flops are the arithmetic every implementation does: matmul's 2 n^3): the roof was
#: measured below what the machine can do (a disturbed moment, a kernel slower than the
#: library's)
ROOF_MEASURED_LOW = "roof measured low"
#: past a bandwidth roof (the best triad) further than noise explains, but within noise of
#: the copy measured beside it (the roofs' ``copy_value``): the cell moves its bytes as a
#: large copy does, storing past the cache without the write-allocate read a triad's cached
#: stores pay, so it may pass the triad; neither the roof nor the cost model is wrong
STREAMS_LIKE_COPY = "streams like a copy"
#: an operation that gives bytes but no flop count (sort's work is comparisons): held
#: against the bandwidth roof of its working set by its GB/s, and left off the charts,
#: whose axis is flops per byte
PLACED_BY_BYTES = "placed by its bytes (no flop count)"


# -- the roofline's facts ----------------------------------------------------------------------
#: a memory-bound cell below this share of the DRAM roof gets the first-touch estimate
LOW_DRAM_SHARE = 0.6


@dataclass(frozen=True)
class FirstTouch:
    """Touching a fresh output, as the roofs rule measured it on the cell's host."""

    output_bytes: float
    seconds: float
    s_per_gb: float
    faults_per_mib: float | None
    share_of_time: float
    fraction_without: float


@dataclass(frozen=True)
class RoofFinding:
    """The fastest library of one (host, device, dtype, threads) and operation at the largest
    size placed on the roofline: its share of the roof it was held against (placed by its
    bytes: no ``gflop_per_s``, a ``gb_per_s``); ``roof_spread``: the roof's best over worst;
    ``copy_share``: its share of the copy's bandwidth at that roof."""

    host: str
    device: str
    dtype: str
    threads: int
    operation: str
    size: int
    library: str
    median_s: float
    gflop_per_s: float | None
    roof: str
    roof_fraction: float
    roof_note: str | None
    first_touch: FirstTouch | None
    roof_spread: float | None = None
    gb_per_s: float | None = None
    #: what it reached over what the copy beside its bandwidth roof allows (``copy_value``);
    #: None where that roof has no copy (the compute roof, a GPU's, an older roofs table)
    copy_share: float | None = None

    @property
    def bound(self) -> str | None:  # None: placed by its bytes, no intensity to say
        if self.gflop_per_s is None:
            return None
        return "arithmetic" if self.roof == COMPUTE_ROOF else "memory"
