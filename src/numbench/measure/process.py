"""One worker process, as its supervisor sees it: its environment (threads, allocator,
the library's own settings, set before anything is imported), its start, and every way it can
end turned into a status (``ProcessReport``).

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
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from numbench import libraries
from numbench.errors import MachineryFault, machinery
from numbench.spec import MACHINERY_FAULT_EXIT, STATUSES, SUPERVISOR_ENV, CellSpec, ProcessReport

POLL_S = 0.05


def worker_environment(spec: CellSpec) -> dict[str, str]:
    adapter = libraries.get(spec.library)(spec.device, spec.dtype, spec.threads)
    env = dict(os.environ)
    env.update(libraries.thread_environment(spec.threads))
    env.update(libraries.allocator_environment(spec.allocator))
    env.update(adapter.environment())
    if spec.environment is not None:
        env.update(spec.environment.variables)
    env["PYTHONUNBUFFERED"] = "1"
    env[SUPERVISOR_ENV] = str(os.getpid())
    # The worker imports numbench too, installed or not.
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


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
            kill_group(proc)
            return ProcessReport(
                status="timeout",
                error=f"no result within cell_timeout_s = {timeout_s:g} s; worker killed",
            )


def prepare_worker(spec: CellSpec, tmp: str) -> tuple[list[str], dict[str, str], Path]:
    """The worker's command, environment and result file, in the temporary folder ``tmp``.

    The worker is the ``python`` of the environment the rule runs in (the one first on
    ``PATH``, as a venv or Snakemake's ``--sdm conda`` arranges): the supervisor's own
    interpreter, which the rule started the same way. A cell of one of the config's
    ``environments`` runs that environment's interpreter instead; one that is not there is
    a fault of the machinery (its ``environment`` job has not made it), not the library's.
    """
    spec_path, result_path = Path(tmp, "spec.json"), Path(tmp, "result.json")
    spec_path.write_text(spec.to_json(), encoding="utf-8")
    python = worker_interpreter(spec)
    cmd = [python, "-m", "numbench.measure.worker", str(spec_path), str(result_path)]
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


def scratch_folder(stack: contextlib.ExitStack) -> str:
    """A temporary folder for one worker, removed when ``stack`` closes."""
    with machinery("the worker cannot start: no temporary folder"):
        return stack.enter_context(tempfile.TemporaryDirectory(prefix="numbench-cell-"))


def run_worker(spec: CellSpec) -> ProcessReport:
    """Run one worker in its own session; return its report or a status for how it ended.
    A worker that cannot start is a ``MachineryFault``."""
    with contextlib.ExitStack() as stack:
        tmp = scratch_folder(stack)
        with machinery("the worker cannot start"):
            cmd, env, result_path = prepare_worker(spec, tmp)
            proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            killed = supervise(proc, spec.timeout_s, spec.memory_limit_mb)
        except BaseException:
            kill_group(proc)  # the supervisor itself is stopped: take the worker along
            raise
        if killed is not None:
            return killed
        return ended_report(proc.returncode, result_path)


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
