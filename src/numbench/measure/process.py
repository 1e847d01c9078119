"""One worker process, as its supervisor sees it: its environment (threads, allocator,
the library's own settings, set before anything is imported), its start, and every way it can
end turned into a status (``ProcessReport``).

A worker is a ``WorkerJob``: a cell's (``cell_job``, ``run_worker``: the module
``numbench.measure.worker``) or a roof's (``numbench.roofline.measure.worker_job``). Both are made,
started and watched here, by the same code (``job_environment``, ``prepare``, ``run_job``),
so a roof is measured in the environment and under the limits a cell is measured in.

Its report, a timeout past ``cell_timeout_s`` (``timeout``), memory beyond
``cell_memory_limit_mb`` (``crashed``, said as out of memory), death by a signal (``crashed``,
the signal named), or an exit without a report (``failed``) are the library's outcomes. A
worker that cannot start, or that exits with ``MACHINERY_FAULT_EXIT``, is numbench's or the
host's fault: ``MachineryFault``.

The memory limit is enforced by watching the resident memory (RSS, from ``/proc``) of the
worker and its children every ``POLL_S`` seconds, not by ``RLIMIT_AS``: JAX, TensorFlow and
CUDA reserve far more address space than they touch, so an address-space limit would fail
them at import while they use little memory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from numbench import libraries
from numbench.errors import MachineryFault, machinery
from numbench.machine.system import descendants
from numbench.measure import compile_cache, zygote
from numbench.spec import MACHINERY_FAULT_EXIT, STATUSES, SUPERVISOR_ENV, CellSpec, ProcessReport

POLL_S = 0.05
T = TypeVar("T")


@dataclass(frozen=True)
class WorkerJob:
    """One worker process of any kind (a cell's, a roof's): the module it runs, the job it
    reads, and what its environment and its supervision are made from.

    The worker runs ``INTERPRETER -m MODULE JOB RESULT`` in a temporary folder of its own:
    it reads ``JOB`` (``job_text``, written to ``job_file``) and writes its ``RESULT``.
    """

    #: the module the worker runs (``python -m``)
    module: str
    #: the job's file name in the worker's folder, and its text
    job_file: str
    job_text: str
    threads: int
    allocator: str
    #: killed past this many seconds (status ``timeout``); ``limit_name`` names the limit in
    #: the error
    timeout_s: float
    limit_name: str = "cell_timeout_s"
    #: killed past this resident memory (status ``crashed``); None: no limit
    memory_limit_mb: float | None = None
    #: the library whose own variables the worker needs (``Adapter.environment``), if one
    library: str | None = None
    device: str = "cpu"
    dtype: str = "float64"
    #: an environment's own variables (``Environment.variables``), set last
    variables: Mapping[str, str] = field(default_factory=dict)
    #: the ``python`` it runs; None: this one
    interpreter: str | None = None
    #: how its temporary folder's name begins
    scratch_prefix: str = "numbench-worker-"
    #: "fork": from a zygote that has imported ``library`` (``numbench.measure.zygote``),
    #: where it can; "exec": a fresh interpreter
    start: str = "exec"
    #: the cell's compilation cache (``numbench.measure.compile_cache``), or None
    compile_folder: str | None = None


def job_environment(job: WorkerJob) -> dict[str, str]:
    """A worker's environment, set before anything is imported: the threads' limits, the
    allocator's settings, the library's own variables, an environment's variables, and the
    ``PYTHONPATH`` by which it imports numbench, installed or not."""
    env = dict(os.environ)
    env.update(libraries.thread_environment(job.threads))
    env.update(libraries.allocator_environment(job.allocator))
    if job.library is not None:
        adapter = libraries.get(job.library)(job.device, job.dtype, job.threads)
        env.update(adapter.environment())
    env.update(job.variables)
    env.pop(compile_cache.FOLDER_ENV, None)
    if job.compile_folder is not None:
        env[compile_cache.FOLDER_ENV] = job.compile_folder
    env["PYTHONUNBUFFERED"] = "1"
    env[SUPERVISOR_ENV] = str(os.getpid())
    for variable in (zygote.JOB_PID_ENV, zygote.JOB_PARENT_ENV):  # the job's, not the worker's
        env.pop(variable, None)
    src = str(zygote.package_root().parent)
    env["PYTHONPATH"] = zygote.with_first(src, env.get("PYTHONPATH"))
    return env


def cell_job(spec: CellSpec, interpreter: str | None = None) -> WorkerJob:
    """A cell's worker (``numbench.measure.worker``) as a job: its spec, its limits, its
    library's and its environment's settings, and the ``interpreter`` it runs."""
    return WorkerJob(
        module="numbench.measure.worker",
        job_file="spec.json",
        job_text=spec.to_json(),
        threads=spec.threads,
        allocator=spec.allocator,
        timeout_s=spec.timeout_s,
        memory_limit_mb=spec.memory_limit_mb,
        library=spec.adapter_name,
        device=spec.device,
        dtype=spec.dtype,
        variables=spec.environment.variables if spec.environment is not None else {},
        interpreter=interpreter,
        scratch_prefix="numbench-cell-",
        start=spec.worker_start,
        compile_folder=cell_compile_folder(spec),
    )


def cell_compile_folder(spec: CellSpec) -> str | None:
    """The folder a cell's processes share their compilations in, for this run, where the
    cell asks for one (``compile_cache: cell``) and its library can keep them."""
    if spec.compile_cache != "cell":
        return None
    adapter = libraries.get(spec.adapter_name)(spec.device, spec.dtype, spec.threads)
    if not adapter.caches_compiles:
        return None
    return str(compile_cache.folder_for(spec, run_pid()))


def worker_environment(spec: CellSpec) -> dict[str, str]:
    """A cell's worker's environment (``job_environment``)."""
    return job_environment(cell_job(spec))


def worker_interpreter(spec: CellSpec) -> str:
    """The ``python`` a cell's worker runs: its environment's, or this one."""
    python = spec.interpreter
    if python is None:
        return sys.executable
    if not os.access(python, os.X_OK):
        raise MachineryFault(
            f"environment {spec.environment.name!r}: its interpreter {python} is missing "
            "(the workflow's environment job makes it)"
        )
    return os.path.abspath(python)


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _rss_mb(pid: int) -> float:
    return zygote.rss_mb(pid) or 0.0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (0 where /proc lacks it)."""
    return sum(_rss_mb(p) for p in [pid, *descendants(pid)])


def kill_group(proc: subprocess.Popen) -> None:
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
    kill_group(proc)
    return ProcessReport(
        status="crashed",
        error=f"out of memory: the worker used {rss:.0f} MB, over "
        f"cell_memory_limit_mb = {memory_limit_mb:g}; worker killed",
        peak_rss_mb=rss,
    )


def supervise(
    proc: subprocess.Popen,
    timeout_s: float,
    memory_limit_mb: float | None,
    limit_name: str = "cell_timeout_s",
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
            kill_group(proc)
            return ProcessReport(
                status="timeout",
                error=f"no result within {limit_name} = {timeout_s:g} s; worker killed",
            )


def prepare(job: WorkerJob, tmp: str) -> tuple[list[str], dict[str, str], Path]:
    """The worker's command, environment and result file, in the temporary folder ``tmp``
    (its job file is written there).

    The worker gets its own temporary folder too, removed with this one: a cell's worker
    leaves without the interpreter's teardown (worker.leave), so the temporary files
    libraries delete at exit (TensorFlow's autograph modules, one per tf.function) would
    stay in /tmp, and compiler caches there (torch.compile's) would carry over from other
    processes.
    """
    job_path, result_path = Path(tmp, job.job_file), Path(tmp, "result.json")
    job_path.write_text(job.job_text, encoding="utf-8")
    python = job.interpreter or sys.executable
    cmd = [python, "-m", job.module, str(job_path), str(result_path)]
    env = job_environment(job)
    env["TMPDIR"] = str(Path(tmp, "tmp"))
    Path(env["TMPDIR"]).mkdir()
    sys.stdout.flush()
    sys.stderr.flush()
    return cmd, env, result_path


def prepare_worker(spec: CellSpec, tmp: str) -> tuple[list[str], dict[str, str], Path]:
    """A cell's worker prepared (``prepare``), in the temporary folder ``tmp``.

    The worker is the ``python`` of the environment the rule runs in (the one first on
    ``PATH``, as a venv or Snakemake's ``--sdm conda`` arranges): the supervisor's own
    interpreter, which the rule started the same way. A cell of one of the config's
    ``environments`` runs that environment's interpreter instead; one that is not there is
    a fault of the machinery (its ``environment`` job has not made it), not the library's.
    """
    return prepare(cell_job(spec, worker_interpreter(spec)), tmp)


def scratch_folder(stack: contextlib.ExitStack, prefix: str = "numbench-cell-") -> str:
    """A temporary folder for one worker, removed when ``stack`` closes."""
    with machinery("the worker cannot start: no temporary folder"):
        return stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix))


@functools.cache
def run_pid() -> int:
    """The process of the run this one measures for, which a zygote it starts ends with:
    the Snakemake above this job (``activity.workflow_pids``), or, with none (``numbench
    offsite run``, a test), this process."""
    from numbench.measure.activity import job_parent, job_pid, workflow_pids

    found = workflow_pids(job_parent())
    return found[-1] if found else job_pid()


def spawn(
    job: WorkerJob, cmd: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> tuple[subprocess.Popen | zygote.ForkedWorker, str]:
    """Start a prepared worker in a session of its own: (the process, how it started:
    "fork", "exec", or "exec: why" where a fork was asked for and cannot be had)."""
    how = "exec"
    if job.start == "fork" and job.library is not None and job.module == zygote.WORKER_MODULE:
        forked, how = zygote.fork_worker(
            job.library,
            cmd,
            env,
            pass_fds,
            job.timeout_s,
            watch=run_pid(),
            code=zygote.worker_code(env),
        )
        if forked is not None:
            return forked, how
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, pass_fds=pass_fds)
    return proc, how


def run_job(job: WorkerJob, read: Callable[[int, Path], T]) -> T | ProcessReport:
    """Run one worker of any kind in its own session, under its time and memory limits:
    the status of a kill (a ``ProcessReport``), or what ``read`` makes of how it ended (its
    exit status and its result file). A worker that cannot start is a ``MachineryFault``."""
    with contextlib.ExitStack() as stack:
        tmp = scratch_folder(stack, job.scratch_prefix)
        with machinery("the worker cannot start"):
            cmd, env, result_path = prepare(job, tmp)
            proc, how = spawn(job, cmd, env)
        try:
            killed = supervise(proc, job.timeout_s, job.memory_limit_mb, job.limit_name)
        except BaseException:
            kill_group(proc)  # the supervisor itself is stopped: take the worker along
            raise
        out = killed if killed is not None else read(proc.returncode, result_path)
        if isinstance(out, ProcessReport):
            out.worker_start = how
        return out


def run_worker(spec: CellSpec) -> ProcessReport:
    """Run one cell's worker (``run_job``); return its report or a status for how it ended.
    A worker that cannot start is a ``MachineryFault``."""
    with machinery("the worker cannot start"):
        job = cell_job(spec, worker_interpreter(spec))
    return run_job(job, ended_report)


def ended_report(returncode: int, result_path: Path) -> ProcessReport:
    """The report of a worker that ended by itself: the one it wrote or, without one, a
    status for how it ended. A report that cannot be read, or a worker that says it could
    not read its spec or write its report (``MACHINERY_FAULT_EXIT``), is a
    ``MachineryFault``: numbench's fault, or the host's, never the library's."""
    if result_path.exists():
        try:
            report = ProcessReport.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            raise MachineryFault(f"the worker's report {result_path} is unreadable: {exc}") from exc
        if report.status not in STATUSES:
            raise MachineryFault(f"the worker reported an unknown status {report.status!r}")
        return report
    if returncode == MACHINERY_FAULT_EXIT:
        raise MachineryFault(
            "the worker could not read its spec or write its report, or found its "
            f"operation's code changed (exit {returncode}); its reason is in the cell log"
        )
    return ended_without_report(returncode, "the cell log")


def ended_without_report(returncode: int, log: str) -> ProcessReport:
    """The status of a worker that ended without a result: ``crashed`` by a signal (named),
    ``failed`` by an exit status (its output is in ``log``)."""
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
        error=f"worker exited with status {returncode} without a result; see {log}",
    )
