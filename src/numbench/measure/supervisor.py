"""The cell supervisor: a light process (no numerical library, no pandas) that measures one
cell, or one early round of it, and writes what came of it.

Under the host's timing lock (``host_lock``) it runs the cell's worker processes
(``process.run_worker``, or two at once in lockstep rounds: ``lockstep.run_lockstep``) as
many times as the replicate rules ask (``replicates``), and writes the cell's Parquet with a
status. Every way a worker can end is the library's outcome: the file is written and the job
goes on. A fault of numbench's own machinery or of the host (the lock cannot be taken, a
file cannot be written, a worker cannot start, numbench itself raises) is never stored as one:
it raises ``MachineryFault``, no cell file is written, and the job fails with the reason, so
Snakemake's ``--retries`` and the next run measure the cell again (``scripts/run_cell.py``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from numbench import libraries, operations
from numbench.contract import cell_table, write_atomic
from numbench.errors import MachineryFault, machinery
from numbench.measure.activity import Activity, ActivityWatch, combined, time_sentinel
from numbench.measure.apart import keep_apart
from numbench.measure.compile_cache import forget
from numbench.measure.host_lock import cell_label, timing_lock
from numbench.measure.lockstep import (
    run_lockstep,
)
from numbench.measure.process import cell_compile_folder, run_worker, worker_interpreter
from numbench.measure.quiet import QuietSettings
from numbench.measure.replicates import (
    BASELINE,
    MEASURED,
    CellClock,
    ProcessRun,
    RoundFileError,
    RunSd,
    measure_replicates,
    measure_round,
    read_rounds,
    rounds_fields,
    run_round_sd,
    write_round,
    write_round_sd,
)
from numbench.operations.kernels import library_options, options_json
from numbench.spec import CellMeta, CellSpec


def cell_operation(spec: CellSpec) -> operations.Operation:
    """The cell's operation, from the file its spec names (or by name), whose code must be
    the code the cell was planned with: code edited since, or a file gone, is no outcome of
    the library, and fails the job (``MachineryFault``) before anything is measured."""
    try:
        return operations.load(spec.operation, spec.operation_file, spec.operation_hash).operation
    except operations.OperationError as exc:
        raise MachineryFault(f"cannot load the operation {spec.operation}: {exc}") from None


def host_metadata(spec: CellSpec) -> CellMeta:
    op = cell_operation(spec)
    itemsize = 4 if spec.dtype == "float32" else 8
    params = op.resolve_params(spec.params)
    flops, bytes_moved = op.cost(spec.size, itemsize, params)
    return CellMeta(
        host=socket.gethostname(),
        threads=spec.threads,
        allocator=spec.allocator,
        timing_settings=json.dumps(asdict(spec.timing), sort_keys=True),
        replicate_settings=json.dumps(spec.replicates.to_dict(), sort_keys=True),
        python_version=platform.python_version(),
        python_executable=worker_interpreter(spec),
        platform=platform.platform(),
        params=operations.params_json(params),
        operation_hash=spec.operation_hash,
        seed=spec.seed,
        inputs_from=spec.inputs_from,
        options=options_json(library_options(op, spec.adapter_name, spec.options)),
        flops=flops,
        bytes=bytes_moved,
        flops_exact=op.flops_exact if flops is not None else None,
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **machine_fingerprint(),
    )


def machine_fingerprint() -> dict:
    """What tells this machine from another in a cell's row: its CPU model, logical CPUs and
    memory (``numbench.offsite.common`` compares an archive's with these)."""
    return {"cpu_model": libraries.cpu_model(), "cpu_count": os.cpu_count(), "ram_gb": ram_gb()}


def ram_gb() -> float | None:
    """Physical memory of the host in GB (10^9 bytes), where the OS tells."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None


@dataclass
class CellResult:
    """What a cell produced: the host's metadata (with the cell's status) and its processes."""

    meta: CellMeta
    runs: list[ProcessRun]

    @property
    def status(self) -> str:
        return self.meta.status

    @property
    def error(self) -> str | None:
        return self.meta.error


def cell_status(runs: list[ProcessRun]) -> tuple[str, str | None]:
    """The first process of the cell's own library that was not ``ok`` decides the status."""
    for run in runs:
        if run.role == MEASURED and run.report.status != "ok":
            return run.report.status, run.report.error
    return "ok", None


def check_writable(output: str | os.PathLike) -> None:
    """Fail before measuring when the cell's (or round's) file could not be written: its
    folder cannot be made, or a file cannot be created in it. Minutes of measuring would
    otherwise be lost at the end."""
    output = Path(output)
    with machinery(f"cannot write {output}"):
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
        os.close(fd)
        os.unlink(probe)


def run_round(
    spec: CellSpec,
    replicate: int,
    output: str | os.PathLike,
    lock: str | None = None,
    lock_timeout_s: float | None = None,
    quiet: QuietSettings | None = None,
    job_started_unix: float | None = None,
) -> list[ProcessRun]:
    """Measure one early round of a cell (its own process and, paired, a baseline process)
    under the host lock, and write it for the cell's job (``replicates.write_round``).
    ``quiet``: wait for the machine to quiet down first (``numbench.measure.quiet``).
    ``job_started_unix``: when the round's job started (its process, ``numbench.measure.job``);
    by default, now.

    A process's fault is written like any other outcome: the cell's job reads it and ends
    the cell. A fault of the machinery raises (``MachineryFault``) and writes nothing.
    """
    t0, job_started_unix = time.perf_counter(), job_started_unix or time.time()
    check_writable(output)
    cell_operation(spec)  # its code must still be the code the cell was planned with
    label = cell_label(spec, replicate)
    with timing_lock(lock, holder=label, timeout_s=lock_timeout_s):
        waited = quiet.wait() if quiet is not None else None
        with keep_apart(spec.threads) as apart:
            watch = ActivityWatch()
            runs = measure_round(spec, replicate, run_worker, spec.paired_spec(), run_lockstep)
            activity = replace(watch.stop(), workflow_moved=apart.moved)
    waited_s = None if waited is None else waited.waited_s
    with machinery(f"cannot write the round's file {output}"):
        wall_s = time.perf_counter() - t0
        write_round(output, spec, runs, wall_s, waited_s, activity.to_dict(), job_started_unix)
    return runs


def _read_earlier(paths: list[str | os.PathLike], spec: CellSpec) -> tuple[list[ProcessRun], float]:
    """The cell's early rounds (``replicates.read_rounds``). One that cannot be used is
    removed, so that the next run measures that round again, and the job fails naming it."""
    try:
        return read_rounds(paths, spec)
    except RoundFileError as exc:
        with contextlib.suppress(OSError):
            Path(exc.path).unlink(missing_ok=True)
        raise MachineryFault(
            f"{exc}; removed it, so that the next run measures that round again"
        ) from None


def record_quiet_wait(meta: CellMeta, waited, rounds_waited_s: float | None) -> None:
    """The cell's wait for quiet (``quiet_wait_s``, ``quiet_reached``): its own job's and
    its early rounds'; None where none was asked."""
    if waited is None and rounds_waited_s is None:
        return
    meta.quiet_wait_s = (0.0 if waited is None else waited.waited_s) + (rounds_waited_s or 0.0)
    meta.quiet_reached = None if waited is None else waited.reached


def _run_sd(round_sd_at, spec: CellSpec, host: str | None) -> RunSd | None:
    """The run's round spread so far (``replicates.run_round_sd``), said in the log where
    known; None without ``round_sd_at`` or enough finished cells."""
    if round_sd_at is None:
        return None
    run_sd = run_round_sd(round_sd_at[0], spec.device, host, but=round_sd_at[1])
    if run_sd is not None:
        print(
            f"stopping rule: the run's round spread, {run_sd.sd:.3g} over {run_sd.cells} cells",
            flush=True,
        )
    return run_sd


def run_cell(
    spec: CellSpec,
    output: str | os.PathLike,
    lock: str | None = None,
    earlier: list[str | os.PathLike] = (),
    lock_timeout_s: float | None = None,
    quiet: QuietSettings | None = None,
    sentinel: Callable[[], float | None] = time_sentinel,
    round_sd_at: tuple[str | os.PathLike, str] | None = None,
    job_started_unix: float | None = None,
) -> CellResult:
    """Measure one cell (its replicate processes) under the host lock and write its Parquet.

    ``earlier``: the files of the cell's early rounds, measured by jobs of their own; the
    cell continues from them. ``lock_timeout_s``: how long to wait for the host's timing
    lock (the config's ``lock_timeout_s``; None waits without a limit). ``quiet``: wait,
    lock held, for the machine to quiet down before measuring (the config's
    ``wait_for_quiet``, ``numbench.measure.quiet``). ``sentinel``: times the sentinel once,
    lock held, after the wait and before the rounds (``sentinel_s``; the tests give their
    own). ``round_sd_at``: the folder and name (``numbench.cells.round_sd_place``) where the
    run's finished cells leave their round variance: the stopping rule takes their typical
    spread for ``replicates.round_sd`` once there are enough (``replicates.run_round_sd``),
    and this cell, paired, leaves its own once written. ``job_started_unix``: when the
    cell's job started (as ``run_round``'s); the earliest of its jobs' starts is the cell's
    ``jobs_from_unix``. Every outcome of the library writes the Parquet; a fault of
    numbench's machinery or of the host (the lock, an unusable round file, a worker that
    cannot start, a file that cannot be written) raises ``MachineryFault`` and writes none.
    """
    t0, job_started_unix = time.perf_counter(), job_started_unix or time.time()
    check_writable(output)
    meta = host_metadata(spec)
    before, earlier_wall = _read_earlier(list(earlier), spec)
    extras = rounds_fields(list(earlier), ("quiet_wait_s", "job_started_unix", "activity"))
    waits = extras["quiet_wait_s"]
    rounds_waited_s = float(sum(waits)) if waits else None
    meta.jobs_from_unix = min([job_started_unix, *extras["job_started_unix"]])
    with timing_lock(lock, holder=cell_label(spec), timeout_s=lock_timeout_s):
        meta.locked_from_unix = time.time()
        waited = quiet.wait() if quiet is not None else None
        meta.sentinel_s = sentinel()
        run_sd = _run_sd(round_sd_at, spec, meta.host)
        with keep_apart(spec.threads) as apart:
            watch = ActivityWatch()
            clock = CellClock(earlier_s=earlier_wall - (rounds_waited_s or 0.0))
            runs, pairing_error = measure_replicates(
                spec, run_worker, before, run_lockstep, clock, run_sd=run_sd
            )
            own_stretch = replace(watch.stop(), workflow_moved=apart.moved)
        meta.locked_until_unix = time.time()
    forget(cell_compile_folder(spec))  # its rounds are over (compile_cache)
    rounds = [Activity.from_dict(a) for a in extras["activity"]]
    activity = combined([*rounds, own_stretch])
    meta.other_cpu_share, meta.steal_share = activity.other_cpu_share, activity.steal_share
    meta.load_avg_1m = activity.load_avg_1m
    meta.workflow_cpu_share = activity.workflow_cpu_share
    meta.workflow_moved = activity.workflow_moved
    meta.capped = clock.capped if spec.replicates.max_cell_s is not None else None
    record_quiet_wait(meta, waited, rounds_waited_s)
    meta.wall_s = time.perf_counter() - t0 + earlier_wall
    meta.status, meta.error = cell_status(runs)
    if meta.status == "ok" and pairing_error:
        meta.error = pairing_error
    own = [r for r in runs if r.role == MEASURED]
    meta.replicates = len(own)
    meta.paired_with = spec.paired_with if any(r.role == BASELINE for r in runs) else None
    meta.lockstep = spec.replicates.lockstep if meta.paired_with else None
    samples = [s for r in own for s in r.report.samples_s]
    if meta.status == "ok" and samples:
        median = statistics.median(samples)
        # an operation without a cost model has null rates
        if median > 0 and meta.flops is not None:
            meta.gflop_per_s = meta.flops / median / 1e9
        if median > 0 and meta.bytes is not None:
            meta.gb_per_s = meta.bytes / median / 1e9
    with machinery(f"cannot write the cell's file {output}"):
        write_atomic(cell_table(spec.key, meta, runs), output)
    if round_sd_at is not None and meta.status == "ok" and meta.paired_with:
        with contextlib.suppress(OSError):  # a guide to later cells' stopping, no result
            write_round_sd(*round_sd_at, spec, meta.host, runs)
    return CellResult(meta, runs)
