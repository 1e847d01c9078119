"""results/roofs.parquet: what this host can do, measured per (device, dtype, threads) of
the grid before the cells and, unless the config says otherwise (``roofs_at_end``), again
after every cell (the ``round`` column), so that every cell can be held against it
(``numbench.roofline.analyse``: each roof at its best, with its spread across the run).

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
* **Best of several trials** of each kernel (``kernels``), in whichever way reaches
  more: Numba's explicit loops or NumPy's in-place ``out=``.
* **The roof is the triad; the copy is kept beside it** (``copy_value``): a large copy may
  store past the cache (glibc's ``memcpy``), faster than any cell that writes through it.
  A GPU's DRAM roof is a device-to-device copy (``gpu``, its own code path).
* **Bytes counted as STREAM counts them** (a triad moves 3 arrays, a copy 2): the roof's
  ``value``, which is how a cell's cost model counts its bytes (the fewest moved), so the
  two compare like for like. A cached store first reads the line it writes
  (write-allocate), so the memory really moves 4 and 3 arrays: ``value_write_allocate``.
* **Compute** is the matmul operation's own GEMM at a large n in each library of the grid
  that has one, through the library's adapter; the fastest counts. Beside it the theoretical
  peak (``host.theoretical_peak``), which it must not exceed.
* **The host's timing lock** is held throughout, so no timing cell runs beside it. Once
  it holds the lock, the job takes Snakemake's CPUs back where it was started while a cell
  had Snakemake kept off its worker's CPUs (``numbench.measure.apart``), so ``threads: all``
  roofs are measured on every CPU.
* **Each job is a worker process of the cells' kind** (``jobs``, through
  ``numbench.measure.process``), and one that other programs disturbed is measured again
  by the cells' rule (``numbench.measure.quiet.undisturbed``).

The modules: ``host`` (caches, flags, clock), ``kernels`` (the worker and its CPU kernels),
``gpu`` (a GPU's kernels), ``jobs`` (how a job runs), ``rows`` (the table's rows). This one
loads neither pyarrow nor NumPy when imported: every roof worker imports it first, before it
pins its CPUs.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from numbench import libraries
from numbench.cells import roof_dims
from numbench.measure.activity import workflow_pids
from numbench.measure.apart import take_workflow_affinity
from numbench.measure.host_lock import timing_lock
from numbench.measure.process import WorkerJob
from numbench.measure.quiet import busy_now as look
from numbench.roofline.measure import host
from numbench.roofline.measure.jobs import RoofJobs, run_job

if TYPE_CHECKING:
    import pyarrow as pa

#: the libraries whose matmul may set the compute roof, where the grid has them
GEMM_LIBRARIES = ("numpy", "torch", "jax", "tensorflow", "cupy")
#: the sizes n of the GEMMs that measure the compute roof, the fastest of them counting: a
#: BLAS peaks at a size that depends on it and on the caches (JAX's GEMM peaked below n = 2048
#: on the default grid, and a roof measured at 2048 alone put its cells above it:
#: docs/history.md, "Roofs"), and on a GPU it needs enough work to hide a launch
GEMM_SIZES = {"cpu": (512, 1024, 2048), "gpu": (4096, 8192)}
#: The test suite sets this (beside ``NUMBENCH_TEST_ADAPTERS=1``, without which it is ignored)
#: to measure the GEMMs at smaller sizes on every device, e.g. ``128,256``: at n = 2048 a
#: library's GEMM job took seconds of CPU a setting, and a test's runs measure many settings
#: and libraries; the tests check how the compute roof is measured, labelled and used, not
#: its value (as ``host.TEST_CACHES_ENV`` does for the memory roofs).
TEST_GEMM_ENV = "NUMBENCH_TEST_GEMM_SIZES"


def gemm_sizes(device: str, environ=os.environ) -> tuple[int, ...]:
    """The sizes n of ``device``'s GEMMs (``GEMM_SIZES``), or those ``TEST_GEMM_ENV`` names
    in a test run. A malformed value is an error naming the variable."""
    text = environ.get(TEST_GEMM_ENV, "").strip()
    if not text or environ.get(libraries.TEST_ADAPTERS_ENV) != "1":
        return GEMM_SIZES[device]
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{TEST_GEMM_ENV}={text!r}: expected sizes n > 0, comma-separated")
    return sizes


def gemm_libraries(grid_libraries, device: str) -> list[str]:
    """The libraries of the grid whose GEMM may set ``device``'s compute roof."""
    chosen = []
    for name in GEMM_LIBRARIES:
        if name in grid_libraries and device in libraries.get(name).devices:
            chosen.append(name)
    return chosen


def measure_group(
    device: str, threads: int, dtypes: list[str], grid_libraries, jobs: RoofJobs
) -> list[dict]:
    """The rows of one (device, threads) and its dtypes: each library's GEMM, then the
    memory job (CPU) or the GPU job, each a worker (``jobs``). Neither takes the host's
    timing lock nor writes anything: the caller holds the lock, and may measure again."""
    from numbench.roofline.measure import rows

    t0 = time.perf_counter()
    facts = host.host_facts(threads)
    gemms: dict[str, dict[str, dict]] = {}
    for library in gemm_libraries(grid_libraries, device):
        for dtype in dtypes:
            adapter = {"device": device, "dtype": dtype, "threads": threads}
            job = {"kind": "gemm", "library": library, "sizes": gemm_sizes(device), **adapter}
            gemms.setdefault(dtype, {})[library] = jobs.measure(job)
            jobs.say(f"roofs: {device} {dtype} t{threads} gemm {library}: done")
    if device == "cpu":
        plan, reasons = rows.plan_working_sets(facts.cache_bytes)
        job = {"kind": "memory", "threads": threads, "dtypes": dtypes, "working_sets": plan}
        memory = jobs.measure(job)
        group_rows = rows.cpu_rows(dtypes, memory, gemms, facts, plan, reasons)
        facts_of_rows: host.HostFacts | None = facts
    else:
        gpu = jobs.measure({"kind": "gpu", "threads": threads, "dtypes": dtypes})
        group_rows = rows.gpu_rows(dtypes, gpu, gemms)
        facts_of_rows = None
    seconds = time.perf_counter() - t0
    jobs.say(f"roofs: {device} t{threads} ({', '.join(dtypes)}) took {seconds:.1f} s")
    common = rows.host_columns(socket.gethostname(), facts_of_rows, threads)
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return [{**common, **row, "measured_at": when, "measure_s": seconds} for row in group_rows]


def measure_dims(dims: list[tuple[str, str, int]], grid_libraries, jobs: RoofJobs) -> list[dict]:
    """The rows of every (device, dtype, threads) of ``dims``, grouped by (device, threads)
    (``measure_group``); under the caller's lock."""
    groups: dict[tuple[str, int], list[str]] = {}
    for device, dtype, threads in dims:
        groups.setdefault((device, int(threads)), []).append(dtype)
    rows: list[dict] = []
    for (device, threads), dtypes in sorted(groups.items()):
        rows.extend(measure_group(device, threads, dtypes, grid_libraries, jobs))
    return rows


def measure_roofs(
    dims: list[tuple[str, str, int]],
    grid_libraries: list[str],
    allocator: str,
    output: str | os.PathLike,
    lock: str | None = None,
    lock_timeout_s: float | None = None,
    say: Callable[[str], None] = print,
    runner: Callable[[WorkerJob], dict] = run_job,
    max_cpu_taken: float | None = None,
    round_name: str = "start",
    earlier: str | os.PathLike | None = None,
    busy_now: Callable[[], float | None] | None = look,
) -> pa.Table:
    """Measure the roofs of every (device, dtype, threads) of ``dims`` under the host's
    timing lock, and write them to ``output``. A job that other programs disturbed by more
    than ``max_cpu_taken`` (the config's ``replicates.max_cpu_taken``) is measured again,
    unless a look at the machine first (``busy_now``; None: none) finds others still busy.
    ``runner`` runs one worker (``jobs.run_job``; the tests give their own).

    Every row records ``round_name`` (``start``: before the cells; ``end``: after every
    cell). ``earlier``: a roofs table measured before (the start's): its rows are kept
    ahead of these in ``output``, so that the analysis takes each roof at its best and
    reports the spread across the run."""
    import pyarrow as pa

    from numbench.contract import write_atomic
    from numbench.roofline.contract import ROOFS_SCHEMA, ROUNDS, read_roofs

    if round_name not in ROUNDS:
        raise ValueError(f"a roofs round is one of {ROUNDS}, not {round_name!r}")
    before = None if earlier is None else read_roofs(earlier)

    jobs = RoofJobs(allocator, max_cpu_taken, say, runner, busy_now)
    label = "roofs " + ", ".join(f"{d} {t} t{n}" for d, t, n in dims)
    with timing_lock(lock, holder=label, timeout_s=lock_timeout_s, say=say):
        take_workflow_affinity(workflow_pids(os.getppid()))
        locked_from = time.time()
        rows = measure_dims(dims, grid_libraries, jobs)
        locked_until = time.time()
    for row in rows:
        row.update(locked_from_unix=locked_from, locked_until_unix=locked_until, round=round_name)
    table = pa.Table.from_pylist(rows, schema=ROOFS_SCHEMA)
    if before is not None:
        table = pa.concat_tables([before, table])
    write_atomic(table, output)
    return table


__all__ = [
    "GEMM_LIBRARIES",
    "GEMM_SIZES",
    "TEST_GEMM_ENV",
    "RoofJobs",
    "gemm_libraries",
    "gemm_sizes",
    "measure_dims",
    "measure_group",
    "measure_roofs",
    "roof_dims",
]
