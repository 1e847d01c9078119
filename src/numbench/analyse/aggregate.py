"""results/benchmarks.parquet: one row per cell, its statistics and its metadata.

Nothing is skipped: a cell file or an inputs file that cannot be read stops the aggregation
with a ``CorruptFile`` that names the file and the command that remakes it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from numbench import inputs_file
from numbench.analyse.speedups import cell_seed
from numbench.cells import KEY
from numbench.contract import (
    BASELINE,
    BENCHMARKS_SCHEMA,
    KEY_COLUMNS,
    LATENCY,
    MEASURED,
    META_COLUMNS,
    PIPELINE_FIELDS,
    PIPELINED,
    SAMPLES_SCHEMA,
    STAT_FIELDS,
    read_cell,
    write_atomic,
)
from numbench.errors import corrupt
from numbench.roofline.analyse import place_rows
from numbench.roofline.contract import read_roofs
from numbench.stats import ratio_ci, summarize

#: How a per-process figure becomes the cell's: typical (median) for what each process pays,
#: total for the time spent (the import its processes paid themselves included: a zygote's
#: import is paid by its first worker alone), how they started as the first one says, worst for errors and memory; the threads a library ran with: the
#: most any process saw, and the first note saying it differed from those asked; the CPU
#: time other programs took: the most from any kept process, and the attempts set aside.
#: The first call (``first_call_s``, ``first_call_paid_s``) is reduced apart: ``_first_calls``.
PROCESS_REDUCERS = {
    "import_s": "median",
    "import_paid_s": "sum",
    "worker_start": "first",
    "compile_cache": "tally",
    "sampling_s": "sum",
    "pipelined_sampling_s": "sum",
    "rel_error": "max",
    "pipelined_rel_error": "max",
    "pipelined_window": "most",
    "h2d_s": "median",
    "d2h_s": "median",
    "peak_rss_mb": "max",
    "device_peak_mb": "max",
    "threads_used": "most",
    "cpus_allowed": "fewest",
    "threads_note": "first",
    "cpu_taken": "max",
    "set_aside": "count",
}


def _reduce(values: list, how: str):
    values = [v for v in values if v is not None]
    if not values:
        return None
    if how == "tally":  # a text column: how many processes said each thing
        counts = {v: values.count(v) for v in sorted(set(values))}
        return ", ".join(f"{n} {v}" for v, n in counts.items())
    if how == "first":  # a text column: the first process that said something
        return next((v for v in values if v), None)
    if how == "most":  # a count: the largest, kept whole
        return int(max(values))
    if how == "fewest":  # a count: the smallest, kept whole
        return int(min(values))
    if how == "count":  # a count per process: their total, kept whole
        return int(sum(values))
    if how == "median":
        return float(np.median(values))
    return float(sum(values)) if how == "sum" else float(max(values))


def measured_groups(
    table: pa.Table, mode: str = LATENCY, role: str = MEASURED
) -> list[list[float]]:
    """The cell's samples of one mode (latency or pipelined) and one role (its own, or the
    paired baseline's), one list per process."""
    groups: dict[int, list[float]] = {}
    columns = (table.column(c).to_pylist() for c in ("role", "replicate", "mode", "seconds"))
    for r, rep, m, s in zip(*columns, strict=True):
        if r == role and m == mode and s is not None:
            groups.setdefault(rep, []).append(s)
    return [groups[k] for k in sorted(groups)]


def cell_key(table: pa.Table, library: str | None = None, device: str | None = None) -> tuple:
    """A cell's key (``numbench.cells.KEY``) of its table; with ``library`` and ``device``,
    the same cell of that library and device (its paired baseline's)."""
    first = {c: table.column(c)[0].as_py() for c in KEY}
    first.update(library=library or first["library"], device=device or first["device"])
    first.update(size=int(first["size"]), threads=int(first["threads"]))
    return tuple(first[c] for c in KEY)


def pipelined_row(
    latency: list[list[float]],
    pipelined: list[list[float]],
    stats: dict,
    dispatch: str | None,
    seed: int = 0,
) -> dict:
    """The pipelined figures (``tables.PIPELINE_FIELDS``). A synchronous library's (calls
    done when they return) are its latency figures, with a speedup of exactly 1; with no
    samples, or a dispatch not recorded (a cell file from before the pipelined mode), null."""
    row: dict = {f.name: None for f in PIPELINE_FIELDS}
    if pipelined:
        own = summarize(pipelined)
        paired = len(latency) == len(pipelined)  # the same processes, both modes each
        ratio, lo, hi = ratio_ci(latency, pipelined, paired=paired, seed=seed)
        row.update(
            pipelined_median_s=own.median_s,
            pipelined_ci_low_s=own.ci_low_s,
            pipelined_ci_high_s=own.ci_high_s,
            pipelined_n_samples=own.n_samples,
            pipelined_speedup=ratio,
            pipelined_speedup_ci_low=lo,
            pipelined_speedup_ci_high=hi,
        )
    elif latency and dispatch == "synchronous":
        row.update(
            pipelined_median_s=stats["median_s"],
            pipelined_ci_low_s=stats["ci_low_s"],
            pipelined_ci_high_s=stats["ci_high_s"],
            pipelined_n_samples=0,
            pipelined_speedup=1.0,
            pipelined_speedup_ci_low=1.0,
            pipelined_speedup_ci_high=1.0,
        )
    return row


def _first_calls(own: pa.Table, starts) -> tuple[float | None, float | None]:
    """(the cell's first call, what its processes paid for theirs): the first is its
    processes' median, or, where they shared their compilations (``compile_cache``), the
    median of those that compiled (``cold``), what a user's first call costs, the others
    having loaded what those compiled; the second is their sum, what the run spent."""
    caches = own.column("compile_cache").to_pylist()
    calls = own.column("first_call_s").to_pylist()
    each = [calls[i] for i in starts]
    cold = [calls[i] for i in starts if caches[i] == "cold" and calls[i] is not None]
    typical = _reduce(each, "median") if not cold else float(np.median(cold))
    return typical, _reduce(each, "sum")


def end_to_end_s(first: dict, median_s: float | None) -> float | None:
    """Placing the inputs, one call and reading the result back; None where nothing moves."""
    parts = (first.get("h2d_s"), median_s, first.get("d2h_s"))
    return None if any(p is None for p in parts) else float(sum(parts))


def cell_row(table: pa.Table, pooled: list[list[float]] = ()) -> dict:
    """Collapse one cell's per-sample rows into one row of statistics.

    ``pooled``: more processes of the same cell measured in other jobs (for the baseline: the
    baseline processes paired with other libraries' cells, ``numbench.analyse.aggregate.aggregate``);
    they join the cell's statistics (median, interval, spread), not its per-process figures.
    """
    own = table.filter(pc.equal(table.column("role"), MEASURED))
    own = own if own.num_rows else table
    first = {c: own.column(c)[0].as_py() for c in KEY_COLUMNS + META_COLUMNS}
    # One value per process: every sample row of a process repeats its figures, so reducing
    # the rows would weigh (and, for sums, multiply) each process by its number of samples.
    _, starts = np.unique(np.asarray(own.column("replicate").to_pylist()), return_index=True)
    for name, how in PROCESS_REDUCERS.items():
        values = own.column(name).to_pylist()
        first[name] = _reduce([values[i] for i in starts], how)
    first["first_call_s"], first["first_call_paid_s"] = _first_calls(own, starts)
    groups = measured_groups(table)
    ok = first["status"] == "ok"
    everything = groups + [list(g) for g in pooled] if groups and ok else groups
    stats = summarize(everything).as_dict() if groups else {f.name: None for f in STAT_FIELDS}
    if not groups:
        stats.update(n_samples=0, n_processes=0, unstable=False)
    stats["pooled_processes"] = len(everything) - len(groups)
    seed = cell_seed(tuple(first[c] for c in KEY_COLUMNS))
    pipe = pipelined_row(groups, measured_groups(table, PIPELINED), stats, first["dispatch"], seed)
    pipe["end_to_end_s"] = end_to_end_s(first, stats["median_s"])
    return {**first, **stats, **pipe}


def sample_rows(table: pa.Table) -> pa.Table:
    """The latency samples of an ``ok`` cell (both roles) for results/samples.parquet: the
    speedups and the dimensions compare libraries call for call."""
    if table.column("status")[0].as_py() != "ok":
        return SAMPLES_SCHEMA.empty_table()
    kept = table.filter(pc.is_valid(table.column("seconds")))
    kept = kept.filter(pc.equal(kept.column("mode"), LATENCY))
    return kept.select(SAMPLES_SCHEMA.names).cast(SAMPLES_SCHEMA)


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
    samples_output: str | os.PathLike | None = None,
    roofs: str | os.PathLike | None = None,
) -> pa.Table:
    """One row per cell; ``inputs`` (the cells' inputs files) are checked first. With
    ``samples_output``, every sample of every ok cell goes there too (read once, here). With
    ``roofs`` (results/roofs.parquet), each cell is placed on its host's roofline
    (``numbench.roofline.analyse``); without, its roof columns are null."""
    check_inputs(list(inputs))
    tables, samples = [], []
    # The baseline is measured beside every paired cell: those processes are genuine fresh
    # processes of the baseline's cell, spread over the whole run, so its row pools them with
    # its own (only ok ones: a failed baseline process ended its pairing and is not kept).
    borrowed: dict[tuple, list[list[float]]] = {}
    for path in cell_paths:
        table = read_cell(path)
        tables.append(table)
        samples.append(sample_rows(table))
        paired = table.column("paired_with")[0].as_py()
        if paired:
            key = cell_key(table, *paired.split("/"))
            borrowed.setdefault(key, []).extend(measured_groups(table, role=BASELINE))
    rows = [cell_row(t, borrowed.get(cell_key(t), [])) for t in tables]
    if roofs is not None:
        rows = place_rows(rows, read_roofs(roofs).to_pylist())
    result = pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA)
    if samples_output is not None:
        write_atomic(pa.concat_tables([SAMPLES_SCHEMA.empty_table(), *samples]), samples_output)
    write_atomic(result, output)
    return result
