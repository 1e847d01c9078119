"""The cell supervisor: a light process (no numerical library imported) that runs the
measuring worker as a child and always writes the cell's Parquet with a status.

It sets the same thread limits for every library before the worker imports anything, holds
a host-wide lock so that timing cells never overlap on one host whatever Snakemake's
``--cores`` says, and turns every way the worker can end into a status: its own report,
a timeout past ``cell_timeout_s``, death by a signal (``crashed``, the signal named), or an
exit without a report (``failed``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from numbench import libraries, operations
from numbench.stats import summarize
from numbench.tables import cell_table, write_atomic

LOCK_ENV = "NUMBENCH_TIMING_LOCK"


def default_lock_path() -> Path:
    """One lock per host and user: cells of every run on this host queue on it."""
    return Path(tempfile.gettempdir()) / f"numbench-timing-{os.getuid()}.lock"


@contextlib.contextmanager
def timing_lock(path: str | os.PathLike | None = None):
    path = Path(path or os.environ.get(LOCK_ENV) or default_lock_path())
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class CellSpec:
    library: str
    device: str
    operation: str
    size: int
    dtype: str
    threads: int
    inputs: str
    timing: dict = field(default_factory=dict)
    timeout_s: float = 600.0
    params: dict = field(default_factory=dict)  # the operation's parameters (config)

    @property
    def key(self) -> dict:
        return {
            "library": self.library,
            "device": self.device,
            "operation": self.operation,
            "size": int(self.size),
            "dtype": self.dtype,
        }

    def worker_spec(self) -> dict:
        return {
            **self.key,
            "threads": self.threads,
            "inputs": self.inputs,
            "timing": self.timing,
            "params": self.params,
        }


def worker_environment(spec: CellSpec) -> dict[str, str]:
    adapter = libraries.get(spec.library)(spec.device, spec.dtype, spec.threads)
    env = dict(os.environ)
    env.update(libraries.thread_environment(spec.threads))
    env.update(adapter.environment())
    env["PYTHONUNBUFFERED"] = "1"
    # The worker imports numbench too, installed or not.
    src = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def host_metadata(spec: CellSpec) -> dict:
    op = operations.get(spec.operation)
    itemsize = 4 if spec.dtype == "float32" else 8
    params = op.resolve_params(spec.params)
    flops, bytes_moved = op.cost(spec.size, itemsize, params)
    return {
        "host": socket.gethostname(),
        "cpu_model": libraries.cpu_model(),
        "threads": spec.threads,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "params": operations.params_json(params),
        "flops": flops,
        "bytes": bytes_moved,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def run_worker(spec: CellSpec, python: str = sys.executable) -> dict:
    """Run the worker in its own session; return its report or a status for how it ended."""
    with tempfile.TemporaryDirectory(prefix="numbench-cell-") as tmp:
        spec_path, result_path = Path(tmp, "spec.json"), Path(tmp, "result.json")
        spec_path.write_text(json.dumps(spec.worker_spec()), encoding="utf-8")
        cmd = [python, "-m", "numbench.worker", str(spec_path), str(result_path)]
        sys.stdout.flush()
        sys.stderr.flush()
        proc = subprocess.Popen(cmd, env=worker_environment(spec), start_new_session=True)
        try:
            returncode = proc.wait(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {
                "status": "timeout",
                "error": f"no result within cell_timeout_s = {spec.timeout_s:g} s; worker killed",
            }
        if result_path.exists():
            return json.loads(result_path.read_text(encoding="utf-8"))
        if returncode < 0:
            return {
                "status": "crashed",
                "error": f"worker died by {_signal_name(returncode)} (exit {returncode})",
            }
        return {
            "status": "failed",
            "error": f"worker exited with status {returncode} without a result; see the cell log",
        }


def run_cell(spec: CellSpec, output: str | os.PathLike, lock: str | None = None) -> dict:
    """Measure one cell under the host lock and write its Parquet. Returns the metadata."""
    meta = host_metadata(spec)
    t0 = time.perf_counter()
    with timing_lock(lock):
        report = run_worker(spec)
    meta["wall_s"] = time.perf_counter() - t0
    samples_s = report.pop("samples_s", None) or []
    loops = report.pop("loops", None)
    meta.update(report)
    samples = [(loops, s) for s in samples_s] if meta["status"] in ("ok", "mismatch") else []
    if meta["status"] == "ok" and samples:
        median = summarize(samples_s).median_s
        if median > 0:
            meta["gflop_per_s"] = meta["flops"] / median / 1e9
            meta["gb_per_s"] = meta["bytes"] / median / 1e9
    write_atomic(cell_table(spec.key, meta, samples), output)
    return meta
