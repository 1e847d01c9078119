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
  roof one whose every array is at least four times the last-level cache, up to a cap on
  its working set (``rows.plan_working_sets``, ``DRAM_WORKING_SET_MAX``). Each roof is labelled by the cache its working set fits in,
  never by counting plateaus in a sweep (``resident_level``): a plateau that does not show
  on this machine still gets its own name, or none.
* **Best of several trials** of each kernel (``kernels``), in whichever way reaches
  more: Numba's explicit loops or NumPy's in-place ``out=``.
* **The roof is the triad; the copy is kept beside it** (``copy_value``): a large copy may
  store past the cache (glibc's ``memcpy``), faster than any cell that writes through it.
  A GPU's DRAM roof is a device-to-device copy (``kernels.measure_gpu``, its own code path).
* **Bytes counted as STREAM counts them** (a triad moves 3 arrays, a copy 2): the roof's
  ``value``, which is how a cell's cost model counts its bytes (the fewest moved), so the
  two compare like for like. A cached store first reads the line it writes
  (write-allocate), so the memory really moves 4 and 3 arrays: ``value_write_allocate``.
* **Compute** is the matmul operation's own GEMM at a large n in each library of the grid
  that has one, through the library's adapter; the fastest counts. Beside it the theoretical
  peak (``theoretical_peak``), which it must not exceed.
* **The host's timing lock** is held throughout, so no timing cell runs beside it. Once
  it holds the lock, the job takes Snakemake's CPUs back where it was started while a cell
  had Snakemake kept off its worker's CPUs (``numbench.measure.apart``), so ``threads: all``
  roofs are measured on every CPU.
* **Each job is a worker process of the cells' kind** (``RoofJobs``, through
  ``numbench.measure.process``), and one that other programs disturbed is measured again
  by the cells' rule (``numbench.measure.quiet.undisturbed``).

What the roofs are measured on (``host_facts``): the cache sizes come from
``/sys/devices/system/cpu/cpuN/cache/index*`` (Linux), never from counting plateaus in a
bandwidth sweep: a plateau can be missing (an L3 barely larger than the L2s, a virtual
machine's noise) or doubled, while the kernel's own description of the caches is what the
hardware is. The capacity a run of ``threads`` threads has at one level is the sum over the
distinct cache instances of the CPUs it runs on (the first ``threads`` CPUs of the affinity
mask, as ``numbench.libraries.pin_cpus`` pins them): two threads on two cores with private
L2s have two L2s; on one shared L3 they have one.

The theoretical compute peak is ``cores x flops per cycle x clock``: flops per cycle from the
widest vector unit the flags name (AVX-512, AVX, SSE2; NEON on Arm), two fused multiply-adds
per cycle (``ASSUMED_FMA_UNITS``, the most x86 and Arm server cores issue, so the figure is an
upper bound), and the clock from cpufreq's ``cpuinfo_max_freq``, the highest clock the cores
may boost to. Where cpufreq is absent (most virtual machines), /proc/cpuinfo's ``cpu MHz`` is
the nominal clock, which boosting cores pass: no upper bound can be formed from it, so the
peak is left out and the note says what that clock would give.

A roof's jobs: each runs in a fresh worker process (``python -m
numbench.roofline.measure.kernels JOB RESULT``), made, started and watched by the cells' own
process machinery (``numbench.measure.process``: the same threads' limits, allocator,
library variables, interpreter, private temporary folder, time limit and kill of the whole
session), and measured again when other programs disturbed it, by the rule a cell's round
follows (``numbench.measure.quiet.undisturbed``). A job is a mapping, written to the worker
as JSON: its ``kind`` (``memory``, ``gemm`` or ``gpu``), its ``threads`` and what the kind
needs (a GEMM's ``library``, ``device``, ``dtype`` and ``sizes``; the memory job's
``dtypes`` and ``working_sets``). Its result is the mapping the worker wrote, or a
``status`` and an ``error`` where it wrote none. ``RoofJobs`` holds how jobs run (the
allocator, the disturbance limit, where to say what happens, the runner) apart from what
they measure, so a run may measure its roofs again later with the same settings.

The modules: this one (the host's facts, how a job runs, measuring under the lock),
``kernels`` (the worker and its kernels, a CPU's and a GPU's), ``rows`` (the table's rows).
This one loads neither pyarrow nor NumPy when imported: every roof worker imports it first,
before it pins its CPUs; ``rows``, which takes the table's vocabulary, is imported only by
the measuring that needs it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from numbench import libraries
from numbench.cells import roof_dims
from numbench.errors import MachineryFault
from numbench.machine.system import cpu_info
from numbench.measure import process
from numbench.measure.activity import job_parent, workflow_pids
from numbench.measure.apart import take_workflow_affinity
from numbench.measure.host_lock import timing_lock
from numbench.measure.process import WorkerJob
from numbench.measure.quiet import QUIETEST, STILL_BUSY, undisturbed
from numbench.measure.quiet import busy_now as look
from numbench.spec import ProcessReport

if TYPE_CHECKING:
    import pyarrow as pa

# -- what the roofs are measured on: the CPU's caches, flags and clock ---------------------
SYS_CPU = Path("/sys/devices/system/cpu")
#: fused multiply-add units assumed per core: an upper bound (Zen 4 issues AVX-512 as two
#: 256-bit halves, so for it the bound is twice what the core can do)
ASSUMED_FMA_UNITS = 2
#: flops of one fused multiply-add
FLOPS_PER_FMA = 2
#: the widest vector registers a flag promises, in bits, widest first
VECTOR_FLAGS = (("avx512f", 512), ("avx", 256), ("sse2", 128), ("asimd", 128), ("neon", 128))
DTYPE_BITS = {"float32": 32, "float64": 64}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_cache_size(text: str) -> int | None:
    """'1024K' -> 1048576 bytes; None for anything else."""
    match = _SIZE.match(text)
    if not match:
        return None
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the kernel's CPU list format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


@dataclass(frozen=True)
class CacheInstance:
    """One cache as the kernel describes it: level, size and the CPUs that share it."""

    level: int
    size_bytes: int
    shared_cpus: frozenset[int]


def read_caches(cpus: list[int], root: Path = SYS_CPU) -> list[CacheInstance]:
    """The data and unified caches of ``cpus`` (instruction caches left out), each distinct
    instance once."""
    found: dict[tuple[int, frozenset[int]], CacheInstance] = {}
    for cpu in cpus:
        for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                kind = (index / "type").read_text().strip()
                level = int((index / "level").read_text())
                size = parse_cache_size((index / "size").read_text())
                shared = parse_cpu_list((index / "shared_cpu_list").read_text())
            except (OSError, ValueError):
                continue
            if kind == "Instruction" or size is None:
                continue
            found.setdefault((level, shared), CacheInstance(level, size, shared))
    return sorted(found.values(), key=lambda c: (c.level, min(c.shared_cpus, default=0)))


def capacities(caches: list[CacheInstance]) -> dict[str, int]:
    """Bytes of cache per level for the CPUs the caches were read for: ``{"l1": ...,
    "l2": ..., "l3": ...}``, the sum of the distinct instances at each level."""
    out: dict[str, int] = {}
    for cache in caches:
        key = f"l{cache.level}"
        out[key] = out.get(key, 0) + cache.size_bytes
    return out


def pinned_cpus(threads: int) -> list[int]:
    """The CPUs a run of ``threads`` threads is pinned to (``libraries.pin_cpus``'s choice)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    return allowed[: max(1, threads)]


def cpu_flags(info: dict[str, str]) -> list[str]:
    """The CPU's flags (x86 ``flags``, Arm ``features``)."""
    return (info.get("flags") or info.get("features") or "").split()


def vector_bits(flags: list[str]) -> int | None:
    """The widest vector registers the flags promise, in bits."""
    have = set(flags)
    return next((bits for flag, bits in VECTOR_FLAGS if flag in have), None)


def flops_per_cycle(flags: list[str], dtype: str) -> int | None:
    """Floating-point operations one core may issue per cycle in ``dtype``: FMA units x
    2 x lanes of the widest vector (an upper bound, ``ASSUMED_FMA_UNITS``)."""
    bits = vector_bits(flags)
    if bits is None:
        return None
    return ASSUMED_FMA_UNITS * FLOPS_PER_FMA * (bits // DTYPE_BITS[dtype])


@dataclass(frozen=True)
class Clock:
    """The clock the theoretical peak uses, in GHz, and where it was read; ``is_maximum``
    is true only for a maximum (boost) clock, the one an upper bound can use."""

    ghz: float | None
    source: str
    is_maximum: bool


def read_clock(cpu: int = 0, root: Path = SYS_CPU, info: dict[str, str] | None = None) -> Clock:
    """cpufreq's ``cpuinfo_max_freq`` (kHz) where present; else /proc/cpuinfo's ``cpu MHz``,
    marked as not a maximum."""
    max_freq = root / f"cpu{cpu}" / "cpufreq" / "cpuinfo_max_freq"
    try:
        khz = int(max_freq.read_text().strip())
        return Clock(khz / 1e6, "cpufreq cpuinfo_max_freq", True)
    except (OSError, ValueError):
        pass
    mhz = (info if info is not None else cpu_info()).get("cpu mhz")
    try:
        return Clock(float(mhz) / 1e3, "/proc/cpuinfo cpu MHz (nominal)", False)
    except (TypeError, ValueError):
        return Clock(None, "no clock readable", False)


@dataclass(frozen=True)
class Peak:
    """The theoretical compute peak in GFLOP/s (None where no upper bound can be formed)
    and how it was formed."""

    gflop_per_s: float | None
    note: str


def theoretical_peak(cores: int, flags: list[str], dtype: str, clock: Clock) -> Peak:
    """``cores x flops per cycle x clock`` at the clock that could be read; the note gives
    the formula and says whether that clock is a maximum (an upper bound) or the nominal one
    (which boosting cores pass)."""
    per_cycle = flops_per_cycle(flags, dtype)
    if per_cycle is None:
        return Peak(None, "no vector unit named in the CPU's flags")
    if clock.ghz is None:
        return Peak(None, f"{cores} cores x {per_cycle} flops/cycle; {clock.source}")
    formula = (
        f"{cores} cores x {per_cycle} flops/cycle ({ASSUMED_FMA_UNITS} FMA units x "
        f"{vector_bits(flags)}-bit vectors) x {clock.ghz:.4g} GHz ({clock.source})"
    )
    if not clock.is_maximum:
        formula += "; no maximum clock readable here (no cpufreq), and boosting cores pass this one"
    return Peak(cores * per_cycle * clock.ghz, formula)


def peak_check(measured: float | None, peak: Peak, clock: Clock) -> str | None:
    """Why a measured compute roof cannot stand beside the theoretical peak, or None. It may
    never exceed a peak formed from a maximum clock; past one formed from the nominal clock,
    the cores ran faster than that clock, and the note says how fast at least."""
    if measured is None or peak.gflop_per_s is None or measured <= peak.gflop_per_s:
        return None
    if clock.is_maximum:
        return (
            f"the measured {measured:.4g} GFLOP/s exceeds the theoretical "
            f"{peak.gflop_per_s:.4g}: the flags, the clock or the GEMM's cost model is wrong"
        )
    implied = clock.ghz * measured / peak.gflop_per_s
    return (
        f"the measured {measured:.4g} GFLOP/s exceeds the peak at the nominal clock "
        f"({peak.gflop_per_s:.4g}): the cores ran at {implied:.3g} GHz or more"
    )


@dataclass
class HostFacts:
    """What every roof row of one thread count records about the host."""

    cpu_model: str
    cpu_flags: str
    cache_bytes: dict[str, int]
    caches_json: str
    cpus: list[int]
    clock: Clock
    extra: dict[str, str] = field(default_factory=dict)


#: The test suite sets this (beside ``NUMBENCH_TEST_ADAPTERS=1``, without which it is ignored)
#: to plan the roofs from smaller caches than the host names, e.g. ``l2=1,l3=4`` (MiB): on a
#: VM that names a 480 MiB L3, the DRAM triad moves 5.8 GB a pass and one setting's roofs take
#: a minute; the tests check how roofs are measured, labelled and used, not their values.
TEST_CACHES_ENV = "NUMBENCH_TEST_CACHES_MIB"


def named_caches(found: dict[str, int], environ=os.environ) -> dict[str, int]:
    """``found``, or the sizes ``TEST_CACHES_ENV`` names in a test run (a level it leaves out
    keeps its size). A malformed value is an error naming the variable."""
    text = libraries.setting_of_tests(TEST_CACHES_ENV, environ)
    if text is None:
        return found
    sizes = dict(found)
    for part in text.split(","):
        level, _, mib = part.partition("=")
        try:
            sizes[level.strip()] = int(float(mib) * 2**20)
        except ValueError:
            raise ValueError(f"{TEST_CACHES_ENV}={text!r}: expected level=MiB pairs") from None
    return sizes


def host_facts(threads: int, root: Path = SYS_CPU) -> HostFacts:
    """The CPU's model, flags, caches (for the CPUs a run of ``threads`` is pinned to) and
    clock, read from the system."""
    from numbench.libraries import cpu_model

    info = cpu_info()
    cpus = pinned_cpus(threads)
    caches = read_caches(cpus, root)
    listed = [
        {"level": c.level, "bytes": c.size_bytes, "shared_cpus": sorted(c.shared_cpus)}
        for c in caches
    ]
    found = capacities(caches)
    cache_bytes = named_caches(found)
    if cache_bytes != found:
        listed = [
            {"level": int(k[1:]), "bytes": v, "test_size": True} for k, v in cache_bytes.items()
        ]
    return HostFacts(
        cpu_model=cpu_model(),
        cpu_flags=" ".join(cpu_flags(info)),
        cache_bytes=cache_bytes,
        caches_json=json.dumps(listed),
        cpus=cpus,
        clock=read_clock(cpus[0], root, info),
    )


# -- a roof's jobs: each a worker process of the cells' kind ---------------------------------
#: the module a roof's worker runs
KERNELS_MODULE = "numbench.roofline.measure.kernels"
#: a roof's worker process still running after this long is killed (status ``timeout``)
ROOF_JOB_TIMEOUT_S = 300.0
#: how the time limit is named in a killed job's error
LIMIT_NAME = "a roof job's limit"


def worker_job(job: dict, allocator: str, timeout_s: float = ROOF_JOB_TIMEOUT_S):
    """A roof job as a worker of the process machinery (``process.WorkerJob``): the cells'
    thread limits and allocator, and a GEMM's library's own variables
    (``Adapter.environment``), in this interpreter."""
    return process.WorkerJob(
        module=KERNELS_MODULE,
        job_file="job.json",
        job_text=json.dumps(job),
        threads=int(job["threads"]),
        allocator=allocator,
        timeout_s=timeout_s,
        limit_name=LIMIT_NAME,
        library=job.get("library"),
        device=job.get("device", "cpu"),
        dtype=job.get("dtype", "float64"),
        scratch_prefix="numbench-roof-",
    )


def read_result(returncode: int, result_path: Path) -> dict:
    """What a roof worker that ended by itself wrote, or, without it, the status of how it
    ended (``process.ended_without_report``). A result that cannot be read is a
    ``MachineryFault``."""
    if result_path.exists():
        try:
            return json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            why = f"the roof worker's result {result_path} is unreadable: {exc}"
            raise MachineryFault(why) from exc
    ended = process.ended_without_report(returncode, "the roofs' log")
    return {"status": ended.status, "error": ended.error}


def run_job(job: process.WorkerJob) -> dict:
    """Run one roof worker (``process.run_job``) and return its result; a worker killed past
    its limits returns the kill's status and error instead."""
    out = process.run_job(job, read_result)
    if isinstance(out, ProcessReport):
        return {"status": out.status, "error": out.error}
    return out


def _shares(result: dict) -> list[float | None]:
    return [result.get("cpu_taken")]


@dataclass(frozen=True)
class RoofJobs:
    """How the roof jobs of one measurement run: the config's ``allocator``, its
    ``replicates.max_cpu_taken`` (None: every job once), where progress is said, the
    runner (``run_job``; the tests give their own) and the look at the machine before a
    retry (``busy_now``, given the job's threads: ``numbench.measure.quiet.busy_now``; None: no
    look)."""

    allocator: str
    max_cpu_taken: float | None = None
    say: Callable[[str], None] = print
    runner: Callable[[process.WorkerJob], dict] = run_job
    busy_now: Callable[[int], float | None] | None = None

    def measure(self, job: dict) -> dict:
        """Run ``job``; while other programs took more than ``max_cpu_taken`` of its CPUs,
        run it again (``disturbed.undisturbed``). The quietest attempt is kept, with the
        number of the others (``set_aside``). Where a look at the machine before a retry
        (``busy_now``) finds that others would still take more than that of the job's CPUs,
        no retry is made."""
        worker = worker_job(job, self.allocator)

        def again(result: dict) -> None:
            taken = result["cpu_taken"]
            self.say(
                f"roofs: other programs took {taken:.0%} of the CPUs during {job['kind']}: again"
            )

        def still_busy(result: dict, now: float) -> None:
            self.say(
                f"roofs: other programs took {result['cpu_taken']:.0%} of the CPUs during "
                f"{job['kind']} and would still take {now:.0%} of the worker's CPUs: {STILL_BUSY}"
            )

        kept, set_aside = undisturbed(
            lambda _: self.runner(worker),
            _shares,
            self.max_cpu_taken,
            again,
            QUIETEST,
            busy_now=None if self.busy_now is None else lambda: self.busy_now(worker.threads),
            still_busy=still_busy,
        )
        return {**kept, "set_aside": set_aside}


# -- measuring the roofs under the host's timing lock -----------------------------------------
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
#: its value (as ``TEST_CACHES_ENV`` does for the memory roofs).
TEST_GEMM_ENV = "NUMBENCH_TEST_GEMM_SIZES"


def gemm_sizes(device: str, environ=os.environ) -> tuple[int, ...]:
    """The sizes n of ``device``'s GEMMs (``GEMM_SIZES``), or those ``TEST_GEMM_ENV`` names
    in a test run. A malformed value is an error naming the variable."""
    text = libraries.setting_of_tests(TEST_GEMM_ENV, environ)
    if text is None:
        return GEMM_SIZES[device]
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{TEST_GEMM_ENV}={text!r}: expected sizes n > 0, comma-separated")
    return sizes


def gemm_libraries(device_libraries: Mapping[str, Sequence[str]], device: str) -> list[str]:
    """The libraries whose GEMM may set ``device``'s compute roof: those of
    ``device_libraries[device]`` (the libraries with cells there: ``cells.roof_libraries``)
    that have a GEMM on it."""
    here = device_libraries.get(device, ())
    return [n for n in GEMM_LIBRARIES if n in here and device in libraries.get(n).devices]


def measure_group(
    device: str,
    threads: int,
    dtypes: list[str],
    device_libraries: Mapping[str, Sequence[str]],
    jobs: RoofJobs,
) -> list[dict]:
    """The rows of one (device, threads) and its dtypes: each library's GEMM, then the
    memory job (CPU) or the GPU job, each a worker (``RoofJobs``). Neither takes the host's
    timing lock nor writes anything: the caller holds the lock, and may measure again."""
    from numbench.roofline.measure import rows

    t0 = time.perf_counter()
    facts = host_facts(threads)
    gemms: dict[str, dict[str, dict]] = {}
    for library in gemm_libraries(device_libraries, device):
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
        facts_of_rows: HostFacts | None = facts
    else:
        gpu = jobs.measure({"kind": "gpu", "threads": threads, "dtypes": dtypes})
        group_rows = rows.gpu_rows(dtypes, gpu, gemms)
        facts_of_rows = None
    seconds = time.perf_counter() - t0
    jobs.say(f"roofs: {device} t{threads} ({', '.join(dtypes)}) took {seconds:.1f} s")
    common = rows.host_columns(socket.gethostname(), facts_of_rows, threads)
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return [{**common, **row, "measured_at": when, "measure_s": seconds} for row in group_rows]


def measure_dims(
    dims: list[tuple[str, str, int]],
    device_libraries: Mapping[str, Sequence[str]],
    jobs: RoofJobs,
) -> list[dict]:
    """The rows of every (device, dtype, threads) of ``dims``, grouped by (device, threads)
    (``measure_group``); under the caller's lock."""
    groups: dict[tuple[str, int], list[str]] = {}
    for device, dtype, threads in dims:
        groups.setdefault((device, int(threads)), []).append(dtype)
    rows: list[dict] = []
    for (device, threads), dtypes in sorted(groups.items()):
        rows.extend(measure_group(device, threads, dtypes, device_libraries, jobs))
    return rows


def measure_roofs(
    dims: list[tuple[str, str, int]],
    device_libraries: Mapping[str, Sequence[str]],
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
    timing lock, and write them to ``output``; ``device_libraries``: each device's libraries
    (``cells.roof_libraries``), whose GEMMs may set its compute roof. A job that other
    programs disturbed by more
    than ``max_cpu_taken`` (the config's ``replicates.max_cpu_taken``) is measured again,
    unless a look at the machine first (``busy_now``; None: none) finds others still busy.
    ``runner`` runs one worker (``run_job``; the tests give their own).

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
        take_workflow_affinity(workflow_pids(job_parent()))
        locked_from = time.time()
        rows = measure_dims(dims, device_libraries, jobs)
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
