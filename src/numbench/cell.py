"""The cell supervisor: a light process (no numerical library imported) that runs the
measuring worker as a child and always writes the cell's Parquet with a status.

It sets the same thread limits for every library before the worker imports anything, holds
a host-wide lock so that timing cells never overlap on one host whatever Snakemake's
``--cores`` says, and turns every way the worker can end into a status: its own report,
a timeout past ``cell_timeout_s`` (``timeout``), memory beyond ``cell_memory_limit_mb``
(``crashed``, said as out of memory), death by a signal (``crashed``, the signal named), or
an exit without a report (``failed``). Whatever happens, the cell's Parquet is written and
the supervisor exits 0, so the workflow goes on.

The memory limit is enforced by watching the resident memory (RSS, from ``/proc``) of the
worker and its children every ``POLL_S`` seconds, not by ``RLIMIT_AS``: JAX, TensorFlow and
CUDA reserve far more address space than they touch, so an address-space limit would fail
them at import while they use little memory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import importlib.abc
import json
import os
import platform
import random
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from numbench import libraries, operations
from numbench.replicates import (
    BASELINE,
    MEASURED,
    ProcessRun,
    measure_replicates,
    measure_round,
    read_rounds,
    write_round,
)
from numbench.spec import CellMeta, CellSpec, ProcessReport
from numbench.tables import STATUSES, cell_table, write_atomic
from numbench.turns import ENOUGH, GO, MORE, READY, SAMPLE, TURNS_ENV, LineChannel
from numbench.worker import SUPERVISOR_ENV

LOCK_ENV = "NUMBENCH_TIMING_LOCK"


class _NoPandas(importlib.abc.MetaPathFinder):
    """Makes ``import pandas`` fail in the supervisor, as if pandas were not installed.

    The supervisor never uses pandas, but pyarrow imports it lazily the first time it builds
    an array (to check whether the input is a DataFrame): a quarter of a second per cell spent
    on nothing. pyarrow treats a failed import as "no pandas" and carries on.
    """

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"the cell supervisor does not load {name}", name=name)
        return None


def keep_pandas_out() -> None:
    """Install ``_NoPandas`` (in the supervisor's own process only: the entry point calls it)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


POLL_S = 0.05


def default_lock_path() -> Path:
    """One lock per host and user: cells of every run on this host queue on it.

    /tmp rather than $TMPDIR: batch systems often give each job its own TMPDIR, and cells
    of different jobs on one node must still share the lock.
    """
    folder = Path("/tmp") if os.access("/tmp", os.W_OK) else Path(tempfile.gettempdir())
    return folder / f"numbench-timing-{os.getuid()}.lock"


@contextlib.contextmanager
def timing_lock(path: str | os.PathLike | None = None):
    path = Path(path or os.environ.get(LOCK_ENV) or default_lock_path())
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def worker_environment(spec: CellSpec) -> dict[str, str]:
    adapter = libraries.get(spec.library)(spec.device, spec.dtype, spec.threads)
    env = dict(os.environ)
    env.update(libraries.thread_environment(spec.threads))
    env.update(libraries.allocator_environment(spec.allocator))
    env.update(adapter.environment())
    env["PYTHONUNBUFFERED"] = "1"
    env[SUPERVISOR_ENV] = str(os.getpid())
    # The worker imports numbench too, installed or not.
    src = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def host_metadata(spec: CellSpec) -> CellMeta:
    op = operations.get(spec.operation)
    itemsize = 4 if spec.dtype == "float32" else 8
    params = op.resolve_params(spec.params)
    flops, bytes_moved = op.cost(spec.size, itemsize, params)
    return CellMeta(
        host=socket.gethostname(),
        cpu_model=libraries.cpu_model(),
        threads=spec.threads,
        allocator=spec.allocator,
        python_version=platform.python_version(),
        python_executable=sys.executable,
        platform=platform.platform(),
        params=operations.params_json(params),
        flops=flops,
        bytes=bytes_moved,
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        cpu_count=os.cpu_count(),
        ram_gb=ram_gb(),
    )


def ram_gb() -> float | None:
    """Physical memory of the host in GB (10^9 bytes), where the OS tells."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/children", encoding="ascii") as fh:
                kids.extend(int(k) for k in fh.read().split())
    except OSError:
        pass
    return kids


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError):
        pass
    return 0.0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (0 where /proc lacks it)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _rss_mb(p)
        todo.extend(_children(p))
    return total


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_over_memory(proc: subprocess.Popen, memory_limit_mb: float | None) -> ProcessReport | None:
    """Kill the worker's whole session if its tree's resident memory is over the limit, and
    return the status of the kill; None while it is within (or there is no limit)."""
    if not memory_limit_mb:
        return None
    rss = tree_rss_mb(proc.pid)
    if rss <= memory_limit_mb:
        return None
    _kill_group(proc)
    return ProcessReport(
        status="crashed",
        error=f"out of memory: the worker used {rss:.0f} MB, over "
        f"cell_memory_limit_mb = {memory_limit_mb:g}; worker killed",
        peak_rss_mb=rss,
    )


def supervise(
    proc: subprocess.Popen, timeout_s: float, memory_limit_mb: float | None
) -> ProcessReport | None:
    """Wait for the worker; kill its whole session past the time or memory limit.

    Returns the status of a kill, or None when the worker ended by itself.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            return None
        except subprocess.TimeoutExpired:
            pass
        killed = kill_over_memory(proc, memory_limit_mb)
        if killed is not None:
            return killed
        if time.monotonic() >= deadline:
            _kill_group(proc)
            return ProcessReport(
                status="timeout",
                error=f"no result within cell_timeout_s = {timeout_s:g} s; worker killed",
            )


def _prepare(spec: CellSpec, tmp: str) -> tuple[list[str], dict[str, str], Path]:
    """The worker's command, environment and result file, in the temporary folder ``tmp``.

    The worker is the ``python`` of the environment the rule runs in (the one first on
    ``PATH``, as a venv or Snakemake's ``--sdm conda`` arranges): the supervisor's own
    interpreter, which the rule started the same way.
    """
    spec_path, result_path = Path(tmp, "spec.json"), Path(tmp, "result.json")
    spec_path.write_text(spec.to_json(), encoding="utf-8")
    cmd = [sys.executable, "-m", "numbench.worker", str(spec_path), str(result_path)]
    # The worker's own temporary folder, removed with this one: a worker leaves without
    # the interpreter's teardown (worker.leave), so the temporary files libraries delete
    # at exit (TensorFlow's autograph modules, one per tf.function) would stay in /tmp,
    # and compiler caches there (torch.compile's) would carry over from other processes.
    env = worker_environment(spec)
    env["TMPDIR"] = str(Path(tmp, "tmp"))
    Path(env["TMPDIR"]).mkdir()
    sys.stdout.flush()
    sys.stderr.flush()
    return cmd, env, result_path


def run_worker(spec: CellSpec) -> ProcessReport:
    """Run one worker in its own session; return its report or a status for how it ended."""
    with tempfile.TemporaryDirectory(prefix="numbench-cell-") as tmp:
        cmd, env, result_path = _prepare(spec, tmp)
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            killed = supervise(proc, spec.timeout_s, spec.memory_limit_mb)
        except BaseException:
            _kill_group(proc)  # the supervisor itself is stopped: take the worker along
            raise
        if killed is not None:
            return killed
        return ended_report(proc.returncode, result_path)


def ended_report(returncode: int, result_path: Path) -> ProcessReport:
    """The report of a worker that ended by itself: the one it wrote or, without one, a
    status for how it ended."""
    if result_path.exists():
        try:
            report = ProcessReport.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            return ProcessReport(status="failed", error=f"the worker's result is unreadable: {exc}")
        if report.status not in STATUSES:
            return ProcessReport(
                status="failed",
                error=f"the worker reported an unknown status {report.status!r}",
            )
        return report
    if returncode < 0:
        name = _signal_name(returncode)
        hint = ""
        if -returncode == signal.SIGKILL:
            hint = "; a SIGKILL nobody sent by hand is usually the kernel's out-of-memory killer"
        return ProcessReport(
            status="crashed", error=f"worker died by {name} (exit {returncode}){hint}"
        )
    return ProcessReport(
        status="failed",
        error=f"worker exited with status {returncode} without a result; see the cell log",
    )


@dataclass
class _Partner:
    """One live worker of a lockstep round, as the supervisor sees it."""

    spec: CellSpec
    proc: subprocess.Popen
    channel: LineChannel
    result_path: Path
    started_unix: float
    #: seconds the supervisor has waited on it while it ran (its time limit counts these)
    active_s: float = 0.0
    #: the last word it said (``ready``, ``more``, ``enough``); None once it has ended
    said: str | None = None
    report: ProcessReport | None = None


def _start_partner(spec: CellSpec, tmp: str) -> _Partner:
    cmd, env, result_path = _prepare(spec, tmp)
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    env[TURNS_ENV] = f"{to_worker_r},{from_worker_w}"
    started = time.time()
    try:
        proc = subprocess.Popen(
            cmd, env=env, start_new_session=True, pass_fds=(to_worker_r, from_worker_w)
        )
    except BaseException:
        for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
            os.close(fd)
        raise
    os.close(to_worker_r)
    os.close(from_worker_w)
    return _Partner(spec, proc, LineChannel(from_worker_r, to_worker_w), result_path, started)


def _hear(partner: _Partner) -> str | None:
    """Wait for the partner's next word while it runs, its memory watched and its time
    counted against its limit; None once it has ended (its report is then set)."""
    spec, proc = partner.spec, partner.proc
    t0 = time.monotonic()
    try:
        while True:
            if partner.channel.has_line():
                return partner.channel.take_line()
            remaining = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
            readable, _, _ = select.select(
                [partner.channel.read_fd], [], [], max(0.0, min(POLL_S, remaining))
            )
            if readable and partner.channel.read_some():
                continue
            if readable or proc.poll() is not None:
                # the pipe closed or the worker exited: it is ending, under its limits
                left = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
                killed = supervise(proc, max(0.0, left), spec.memory_limit_mb)
                partner.report = killed or ended_report(proc.returncode, partner.result_path)
                return None
            partner.report = kill_over_memory(proc, spec.memory_limit_mb)
            if partner.report is not None:
                return None
            if remaining <= 0:
                _kill_group(proc)
                partner.report = ProcessReport(
                    status="timeout",
                    error=f"no result within cell_timeout_s = {spec.timeout_s:g} s of its "
                    "own (its partner's turns not counted); worker killed",
                )
                return None
    finally:
        partner.active_s += time.monotonic() - t0


def run_lockstep(specs: list[CellSpec], seed: int) -> list[tuple[float, ProcessReport]]:
    """Run the processes of a lockstep round (``numbench.turns``): started in this order,
    each one prepared while the other waits, their samples taken in turns in an order seeded
    by ``seed``, then each finished in turn. Returns each one's start (Unix seconds) and its
    report, in the order given.

    Every way a worker can end is its own status, as with ``run_worker``; its time limit
    counts only the time it runs, not its partner's turns. A partner that ends, however it
    ends, frees the other, which takes the samples it still needs alone.
    """
    rng = random.Random(seed)
    partners: list[_Partner] = []
    with contextlib.ExitStack() as stack:
        try:
            for spec in specs:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="numbench-cell-"))
                partner = _start_partner(spec, tmp)
                partners.append(partner)
                partner.said = _hear(partner)  # ready, or ended before its samples
            while all(p.said in (READY, MORE) for p in partners):
                for partner in rng.sample(partners, len(partners)):
                    partner.channel.say(SAMPLE)  # a gone worker is seen by _hear
                    partner.said = _hear(partner)
            # those still sampling finish first, so their samples stay close to the others'
            for partner in sorted(partners, key=lambda p: p.said == ENOUGH):
                if partner.report is None:
                    partner.channel.say(GO)
                while partner.report is None:
                    _hear(partner)
        except BaseException:
            for partner in partners:
                if partner.proc.poll() is None:
                    _kill_group(partner.proc)  # the supervisor is stopped: take them along
            raise
        finally:
            for partner in partners:
                partner.channel.close()
    return [(p.started_unix, p.report) for p in partners]


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


def run_round(
    spec: CellSpec, replicate: int, output: str | os.PathLike, lock: str | None = None
) -> list[ProcessRun]:
    """Measure one spread round of a cell (its own process and, paired, a baseline process)
    under the host lock, and write it for the cell's job (``replicates.write_round``).

    A fault is written like any other outcome: the cell's job reads it and ends the cell.
    """
    t0 = time.perf_counter()
    try:
        with timing_lock(lock):
            runs = measure_round(spec, replicate, run_worker, spec.paired_spec(), run_lockstep)
    except Exception as exc:  # noqa: BLE001 - still write the round, with the reason
        report = ProcessReport(
            status="failed", error=f"supervisor error: {type(exc).__name__}: {exc}"
        )
        runs = [ProcessRun(MEASURED, replicate, time.time(), report)]
    write_round(output, spec, runs, time.perf_counter() - t0)
    return runs


def run_cell(
    spec: CellSpec,
    output: str | os.PathLike,
    lock: str | None = None,
    earlier: list[str | os.PathLike] = (),
) -> CellResult:
    """Measure one cell (its replicate processes) under the host lock and write its Parquet.

    ``earlier``: the files of the cell's spread rounds, measured by jobs of their own; the
    cell continues from them. Every outcome writes the Parquet, an error of the supervisor
    itself (an unreadable round file included) too.
    """
    t0 = time.perf_counter()
    pairing_error = None
    earlier_wall = 0.0
    try:
        meta = host_metadata(spec)
        before, earlier_wall = read_rounds(list(earlier), spec)
        with timing_lock(lock):
            meta.locked_from_unix = time.time()
            runs, pairing_error = measure_replicates(spec, run_worker, before, run_lockstep)
            meta.locked_until_unix = time.time()
    except Exception as exc:  # noqa: BLE001 - still write the cell, with the reason
        meta = CellMeta(
            host=socket.gethostname(),
            threads=spec.threads,
            started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
        report = ProcessReport(
            status="failed", error=f"supervisor error: {type(exc).__name__}: {exc}"
        )
        runs = [ProcessRun(MEASURED, 0, time.time(), report)]
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
        if median > 0 and meta.flops is not None:
            meta.gflop_per_s = meta.flops / median / 1e9
            meta.gb_per_s = meta.bytes / median / 1e9
    write_atomic(cell_table(spec.key, meta, runs), output)
    return CellResult(meta, runs)
