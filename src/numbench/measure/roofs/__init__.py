"""results/roofs.parquet: what this host can do, measured once per (device, dtype, threads)
of the grid, so that every cell can be held against it (``numbench.analyse.roofline``).

One row per roof: ``dram``, ``l3`` and ``l2`` (bandwidth, GB/s), ``compute`` (GFLOP/s), and
on a GPU ``h2d`` and ``d2h`` (pinned copies, GB/s). Each says how it was measured (kernel,
library, working set, trials) and on what (the CPU's model, flags, caches, clock, BLAS,
threads and the CPUs they ran on).

How, and why so (the rules STREAM, the Empirical Roofline Toolkit and likwid-bench follow):

* **Working sets from the caches' sizes.** The L2 roof is a triad whose three arrays fill
  half the L2s of the threads' cores, the L3 roof one that fills half the L3, and the DRAM
  roof one whose every array is at least four times the last-level cache
  (``plan_working_sets``). Each roof is labelled by the cache its working set fits in,
  never by counting plateaus in a sweep (``resident_level``): a plateau that does not show
  on this machine still gets its own name, or none.
* **Best of several trials** of each kernel (``roof_kernels``), in whichever way reaches
  more: Numba's explicit loops or NumPy's in-place ``out=``.
* **Bytes counted as STREAM counts them** (a triad moves 3 arrays, a copy 2): the roof's
  ``value``, which is how a cell's cost model counts its bytes (the fewest moved), so the
  two compare like for like. A cached store first reads the line it writes
  (write-allocate), so the memory really moves 4 and 3 arrays: ``value_write_allocate``.
* **Compute** is the matmul operation's own GEMM at a large n in each library of the grid
  that has one, through the library's adapter; the fastest counts. Beside it the theoretical
  peak (``roof_host.theoretical_peak``), which it must not exceed.
* **The host's timing lock** is held throughout, so no timing cell runs beside it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from numbench import libraries
from numbench.contract import write_atomic
from numbench.contract.roofs import BANDWIDTH_ROOFS, ROOFS_SCHEMA
from numbench.measure import roof_rows
from numbench.measure.host_lock import timing_lock
from numbench.measure.roof_host import HostFacts, host_facts, peak_check, theoretical_peak
from numbench.measure.roof_rows import plan_working_sets

#: the libraries whose matmul may set the compute roof, where the grid has them
GEMM_LIBRARIES = ("numpy", "torch", "jax", "tensorflow", "cupy")
#: the sizes n of the GEMMs that measure the compute roof, the fastest of them counting: a
#: BLAS peaks at a size that depends on it and on the caches (on the default grid here, JAX's
#: matmul ran 22% faster at n = 500 and 1000 than at 2048, which a roof measured at 2048 alone
#: put above its roof), and on a GPU it needs enough work to hide a launch
GEMM_SIZES = {"cpu": (512, 1024, 2048), "gpu": (4096, 8192)}
#: a roof's worker process still running after this long is killed (status ``timeout``)
ROOF_JOB_TIMEOUT_S = 300.0
#: a job in which other programs took more than ``max_cpu_taken`` of its CPUs is measured
#: again, up to this many times (as a cell's round is), and the least disturbed attempt kept
CPU_TAKEN_RETRIES = 2


def roof_dims(cells) -> list[tuple[str, str, int]]:
    """The (device, dtype, threads) of a grid's cells, each once, sorted."""
    return sorted({(c.device, c.dtype, int(c.threads)) for c in cells})


def gemm_libraries(grid_libraries, device: str) -> list[str]:
    """The libraries of the grid whose GEMM may set ``device``'s compute roof."""
    chosen = []
    for name in GEMM_LIBRARIES:
        if name in grid_libraries and device in libraries.get(name).devices:
            chosen.append(name)
    return chosen


def job_environment(
    threads: int,
    allocator: str,
    library: str | None = None,
    device: str = "cpu",
    dtype: str = "float64",
) -> dict[str, str]:
    """A roof worker's environment: the cells' thread limits and allocator settings, and the
    library's own variables where it runs one (``Adapter.environment``)."""
    env = dict(os.environ)
    env.update(libraries.thread_environment(threads))
    env.update(libraries.allocator_environment(allocator))
    if library is not None:
        env.update(libraries.get(library)(device, dtype, threads).environment())
    env["PYTHONUNBUFFERED"] = "1"
    # The worker imports numbench too, installed or not (as a cell's worker does).
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def run_job(job: dict, env: dict[str, str], timeout_s: float = ROOF_JOB_TIMEOUT_S) -> dict:
    """Run one job in a fresh ``python -m numbench.measure.roof_kernels`` and return what it
    wrote; a worker that fails, dies or overruns returns a status and an error instead."""
    with tempfile.TemporaryDirectory(prefix="numbench-roof-") as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        cmd = [sys.executable, "-m", "numbench.measure.roof_kernels", str(job_path)]
        proc = subprocess.Popen([*cmd, str(result_path)], env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"status": "timeout", "error": f"still running after {timeout_s:g} s"}
        if code != 0 or not result_path.exists():
            return {"status": "failed", "error": f"the roof worker exited with status {code}"}
        return json.loads(result_path.read_text(encoding="utf-8"))


def undisturbed(
    runner: Callable[[dict, dict], dict],
    job: dict,
    env: dict[str, str],
    max_cpu_taken: float | None,
    say: Callable[[str], None],
) -> dict:
    """Run a job; while other programs took more than ``max_cpu_taken`` of its CPUs (the
    worker's ``cpu_taken``), run it again, up to ``CPU_TAKEN_RETRIES`` times. The least
    disturbed attempt is kept, with the number set aside (``set_aside``)."""
    attempts = [runner(job, env)]
    while max_cpu_taken is not None and len(attempts) <= CPU_TAKEN_RETRIES:
        taken = attempts[-1].get("cpu_taken")
        if taken is None or taken <= max_cpu_taken:
            break
        say(f"roofs: other programs took {taken:.0%} of the CPUs during {job['kind']}: again")
        attempts.append(runner(job, env))
    best = min(attempts, key=lambda a: a.get("cpu_taken") or 0.0)
    return {**best, "set_aside": len(attempts) - 1}


def _host_columns(host: str, facts: HostFacts | None, threads: int) -> dict:
    caches = facts.cache_bytes if facts else {}
    return {
        "host": host,
        "threads": threads,
        "cpu_model": facts.cpu_model if facts else libraries.cpu_model(),
        "cpu_flags": facts.cpu_flags if facts else None,
        "l1_bytes": caches.get("l1"),
        "l2_bytes": caches.get("l2"),
        "l3_bytes": caches.get("l3"),
        "caches": facts.caches_json if facts else None,
        "affinity": ",".join(map(str, facts.cpus)) if facts else None,
        "clock_ghz": facts.clock.ghz if facts else None,
        "clock_source": facts.clock.source if facts else None,
    }


def cpu_rows(
    dtypes, memory: dict, gemms: dict[str, dict[str, dict]], facts: HostFacts, plan, reasons
) -> list[dict]:
    """The CPU's rows for one thread count: the bandwidth roofs (``roof_rows``) and, per
    dtype, the fastest GEMM beside the theoretical peak."""
    rows = roof_rows.bandwidth_rows(dtypes, memory, plan, reasons)
    for dtype in dtypes:
        rows.append(compute_row(dtype, gemms.get(dtype, {}), facts, len(facts.cpus)))
    return rows


def compute_row(dtype: str, gemms: dict[str, dict], facts: HostFacts, cores: int) -> dict:
    """The compute roof of one dtype: the fastest library's GEMM, every library's in
    ``candidates``, the theoretical peak beside it (and a note where it would be passed)."""
    candidates: dict[str, float | str] = {}
    best = None
    for library, result in sorted(gemms.items()):
        if result.get("status") != "ok":
            candidates[library] = f"{result.get('status')}: {result.get('error')}"
            continue
        gflops = 2.0 * result["n"] ** 3 / result["seconds"] / 1e9
        candidates[library] = gflops
        if best is None or gflops > best[0]:
            best = (gflops, library, result)
    peak = theoretical_peak(cores, facts.cpu_flags.split(), dtype, facts.clock)
    row = {
        "device": "cpu",
        "dtype": dtype,
        "roof": "compute",
        "unit": "GFLOP/s",
        "candidates": json.dumps(candidates, sort_keys=True),
        "theoretical_value": peak.gflop_per_s,
        "theoretical_note": peak.note,
    }
    if best is None:
        return {**row, "status": "failed", "error": "no library's GEMM ran: " + str(candidates)}
    value, library, result = best
    blas = {lib: r["blas"] for lib, r in gemms.items() if r.get("blas")}
    return {
        **row,
        "status": "ok",
        "value": value,
        "kernel": f"matmul n={result['n']} ({library})",
        "library": library,
        "library_version": result.get("version"),
        "blas": json.dumps(blas, sort_keys=True) if blas else None,
        "threads_used": result.get("threads_used"),
        "working_set_bytes": 3 * result["n"] ** 2 * (4 if dtype == "float32" else 8),
        "trials": result.get("trials"),
        "cpu_taken": result.get("cpu_taken"),
        "set_aside": sum(r.get("set_aside") or 0 for r in gemms.values()),
        "note": peak_check(value, peak, facts.clock),
    }


def measure_roofs(
    dims: list[tuple[str, str, int]],
    grid_libraries: list[str],
    allocator: str,
    output: str | os.PathLike,
    lock: str | None = None,
    lock_timeout_s: float | None = None,
    say: Callable[[str], None] = print,
    runner: Callable[[dict, dict], dict] = run_job,
    max_cpu_taken: float | None = None,
) -> pa.Table:
    """Measure the roofs of every (device, dtype, threads) of ``dims`` under the host's
    timing lock, and write them to ``output``. A job that other programs disturbed by more
    than ``max_cpu_taken`` (the config's ``replicates.max_cpu_taken``) is measured again."""

    def measured(job: dict, env: dict[str, str]) -> dict:
        return undisturbed(runner, job, env, max_cpu_taken, say)

    host = socket.gethostname()
    groups: dict[tuple[str, int], list[str]] = {}
    for device, dtype, threads in dims:
        groups.setdefault((device, int(threads)), []).append(dtype)
    rows: list[dict] = []
    label = "roofs " + ", ".join(f"{d} {t} t{n}" for d, t, n in dims)
    with timing_lock(lock, holder=label, timeout_s=lock_timeout_s, say=say):
        locked_from = time.time()
        for (device, threads), dtypes in sorted(groups.items()):
            t0 = time.perf_counter()
            facts = host_facts(threads)
            gemms: dict[str, dict[str, dict]] = {}
            for library in gemm_libraries(grid_libraries, device):
                for dtype in dtypes:
                    adapter = {"device": device, "dtype": dtype, "threads": threads}
                    job = {
                        "kind": "gemm",
                        "library": library,
                        "sizes": GEMM_SIZES[device],
                        **adapter,
                    }
                    env = job_environment(threads, allocator, library, device, dtype)
                    gemms.setdefault(dtype, {})[library] = measured(job, env)
                    say(f"roofs: {device} {dtype} t{threads} gemm {library}: done")
            if device == "cpu":
                plan, reasons = plan_working_sets(facts.cache_bytes)
                job = {"kind": "memory", "threads": threads, "dtypes": dtypes, "working_sets": plan}
                memory = measured(job, job_environment(threads, allocator))
                group_rows = cpu_rows(dtypes, memory, gemms, facts, plan, reasons)
                host_facts_of_rows: HostFacts | None = facts
            else:
                job = {"kind": "gpu", "threads": threads, "dtypes": dtypes}
                gpu = measured(job, job_environment(threads, allocator))
                group_rows = roof_rows.gpu_rows(dtypes, gpu, gemms)
                host_facts_of_rows = None
            seconds = time.perf_counter() - t0
            say(f"roofs: {device} t{threads} ({', '.join(dtypes)}) took {seconds:.1f} s")
            common = _host_columns(host, host_facts_of_rows, threads)
            when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            for row in group_rows:
                rows.append({**common, **row, "measured_at": when, "measure_s": seconds})
        locked_until = time.time()
    for row in rows:
        row.update(locked_from_unix=locked_from, locked_until_unix=locked_until)
    table = pa.Table.from_pylist(rows, schema=ROOFS_SCHEMA)
    write_atomic(table, output)
    return table


__all__ = ["BANDWIDTH_ROOFS", "ROOFS_SCHEMA", "measure_roofs", "roof_dims"]
