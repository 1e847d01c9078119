"""The kernels that measure a roof, run in a fresh worker process of their own.

``python -m numbench.roofline.measure.kernels JOB RESULT`` reads one job (JSON) and writes its
result (JSON). The process that starts it (``numbench.roofline.measure.jobs``, through the
cells' process machinery) has set the threads' environment and the allocator's before this
interpreter started; here the process pins itself to its CPUs, as a cell's worker does,
before any numerical library is imported.

Two kinds of job:

* ``memory``: a STREAM-like triad (``a = b + q * c``) and copy (``a = b``) at each working
  set the parent chose from the caches' sizes, in two ways (the faster triad is the roof,
  the faster copy is kept beside it: ``rows.level_row``): Numba with explicit loops (one chunk per thread, every thread repeating its own chunk, so an
  L2-sized chunk stays in that core's L2) and NumPy with in-place ``out=`` (no temporaries,
  one thread). Each repetition uses another scale ``q``, so no compiler may drop a repeated
  pass. The best of several trials counts, as STREAM takes it. At the DRAM size it also
  times a copy into a *fresh* array (allocated by the call, as an operation's output is)
  beside the copy into a reused one, and counts the page faults: what first touching new
  memory costs on this host.
* ``gemm``: the matmul operation's own builder in one library, through the library's
  adapter (its threads, device, compilation and sync, exactly as a cell runs it), at a
  large n: the best of several calls after a warm-up.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from pathlib import Path

#: a trial of a cache-resident kernel lasts at least this long (its repetitions are counted
#: so); a DRAM-sized pass takes longer on its own
MIN_TRIAL_S = 0.01
#: trials of each bandwidth kernel; the best counts (STREAM's NTIMES is 10)
BANDWIDTH_TRIALS = 10
#: single passes timed to count a trial's repetitions, and how often the count may be
#: taken again (``time_kernel``)
CALIBRATION_CALLS = 5
CALIBRATION_ROUNDS = 3
#: trials of the fresh-output copy (each maps, faults in and frees a DRAM-sized array)
FIRST_TOUCH_TRIALS = 5
#: trials of a GEMM after its warm-up call; the best counts
GEMM_TRIALS = 5
#: bytes each element moves per pass, as STREAM counts them (reads + writes) and with the
#: write-allocate read of the destination line that a cached store costs
STREAM_ARRAYS = {"triad": 3, "copy": 2}
WRITE_ALLOCATE_ARRAYS = {"triad": 4, "copy": 3}


def _numba_kernels():
    import numba

    # Each thread works on its own chunk through a view: a loop from 0 over a view lets
    # Numba drop its negative-index check, and the loop vectorises.
    @numba.njit(parallel=True)
    def triad(a, b, c, scales, chunks):  # pragma: no cover - compiled
        n = a.size
        for t in numba.prange(chunks):
            lo, hi = t * n // chunks, (t + 1) * n // chunks
            x, y, z = a[lo:hi], b[lo:hi], c[lo:hi]
            for r in range(scales.size):
                q = scales[r]
                for i in range(x.size):
                    x[i] = y[i] + q * z[i]

    @numba.njit(parallel=True)
    def copy(a, b, c, scales, chunks):  # pragma: no cover - compiled
        n = a.size
        for t in numba.prange(chunks):
            lo, hi = t * n // chunks, (t + 1) * n // chunks
            x, y = a[lo:hi], b[lo:hi]
            for _ in range(scales.size):
                for i in range(x.size):
                    x[i] = y[i]

    return {"triad": triad, "copy": copy}


def _numpy_kernels():
    import numpy as np

    def triad(a, b, c, scales, chunks):
        for q in scales:
            np.multiply(c, q, out=a)
            np.add(a, b, out=a)

    def copy(a, b, c, scales, chunks):
        for _ in scales:
            np.copyto(a, b)

    return {"triad": triad, "copy": copy}


def _best_seconds(call, trials: int) -> float:
    best = math.inf
    for _ in range(trials):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


def time_kernel(kernel, arrays, dtype, threads: int, trials: int) -> tuple[float, int]:
    """(best seconds per pass, passes per trial): the kernel once to warm up (and compile),
    then repetitions counted so a trial lasts ``MIN_TRIAL_S``.

    The count comes from the fastest of ``CALIBRATION_CALLS`` single passes: one call may
    also pay a stall that is no part of the kernel (waking a worker thread whose virtual CPU
    the hypervisor had descheduled took milliseconds here), and a count taken from such a
    call would leave every trial that short, the stall dominating. Where the best trial still
    lasts under half of ``MIN_TRIAL_S``, the count is taken again from it."""
    import numpy as np

    one = np.ones(1, dtype=dtype)
    kernel(*arrays, one, threads)
    per_pass = _best_seconds(lambda: kernel(*arrays, one, threads), CALIBRATION_CALLS)
    for _ in range(CALIBRATION_ROUNDS):
        reps = max(1, math.ceil(MIN_TRIAL_S / max(per_pass, 1e-9)))
        scales = (1.0 + np.arange(reps) * 1e-3).astype(dtype)
        best = _best_seconds(lambda s=scales: kernel(*arrays, s, threads), trials)
        if best >= MIN_TRIAL_S / 2:
            break
        per_pass = best / reps
    return best / reps, reps


def measure_memory(job: dict) -> dict:
    """Every kernel of every library at every planned working set, per dtype."""
    import numpy as np

    families = {"numpy": _numpy_kernels()}
    errors = {}
    try:
        families["numba"] = _numba_kernels()
    except ImportError as exc:
        errors["numba"] = f"numba cannot be imported: {exc}"
    threads = int(job["threads"])
    results = []
    for dtype in job["dtypes"]:
        itemsize = np.dtype(dtype).itemsize
        for level, working_set in job["working_sets"].items():
            # three arrays of equal length make up the working set (the copy uses two)
            n = max(threads * 64, int(working_set) // (3 * itemsize))
            a = np.zeros(n, dtype=dtype)
            b = np.full(n, 1.5, dtype=dtype)
            c = np.full(n, 0.5, dtype=dtype)
            for library, kernels in families.items():
                for kernel_name, kernel in kernels.items():
                    seconds, reps = time_kernel(kernel, (a, b, c), dtype, threads, BANDWIDTH_TRIALS)
                    results.append(
                        {
                            "dtype": dtype,
                            "level": level,
                            "library": library,
                            "kernel": kernel_name,
                            "elements": n,
                            "working_set_bytes": STREAM_ARRAYS[kernel_name] * n * itemsize,
                            "seconds": seconds,
                            "passes_per_trial": reps,
                            "trials": BANDWIDTH_TRIALS,
                        }
                    )
            if level == "dram":
                results.append({"dtype": dtype, **first_touch(b, families)})
            del a, b, c
    threads_used = sys.modules["numba"].get_num_threads() if "numba" in families else 1
    return {
        "results": results,
        "errors": errors,
        "versions": _versions(families),
        "threads_used": threads_used,
    }


def _fresh_copiers(families: dict) -> tuple[str, object]:
    """(library, a function returning a fresh copy of its argument): Numba's where there is
    one, whose output comes from plain ``malloc`` as an operation's does in Numba (NumPy
    asks the kernel for huge pages on large arrays, which take far fewer faults)."""
    import numpy as np

    if "numba" in families:
        import numba

        @numba.njit
        def fresh(b):  # pragma: no cover - compiled
            out = np.empty_like(b)
            for i in range(b.size):
                out[i] = b[i]
            return out

        return "numba", fresh
    return "numpy", np.copy


def first_touch(source, families: dict) -> dict:
    """Copying into a fresh array (allocated per call, as an operation's output is) against
    copying into a reused one, with the page faults a fresh one takes."""
    import numpy as np

    library, fresh = _fresh_copiers(families)
    reused = np.empty_like(source)
    np.copyto(reused, source)
    reused_s = _best_seconds(lambda: np.copyto(reused, source), FIRST_TOUCH_TRIALS)
    fresh(source[:1])  # compile (Numba), outside the trials
    fresh_s, faults = math.inf, []
    for _ in range(FIRST_TOUCH_TRIALS):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        out = fresh(source)
        fresh_s = min(fresh_s, time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del out
    return {
        "level": "first_touch",
        "library": library,
        "bytes": int(source.nbytes),
        "fresh_s": fresh_s,
        "reused_s": reused_s,
        "page_faults": int(min(faults)),
        "trials": FIRST_TOUCH_TRIALS,
    }


def _versions(families: dict) -> dict[str, str]:
    out = {}
    for name in families:
        module = sys.modules.get(name)
        out[name] = getattr(module, "__version__", "")
    return out


def measure_gemm(job: dict) -> dict:
    """The matmul operation in one library at each of the ``sizes``, through its adapter: the
    best of ``GEMM_TRIALS`` calls after a warm-up at each; the size whose rate is highest is
    the one reported (its ``n`` and ``seconds``), every size's rate in ``rates``."""
    import numpy as np

    from numbench import libraries, operations
    from numbench.libraries import Unavailable

    library, device, dtype = job["library"], job["device"], job["dtype"]
    adapter = libraries.get(library)(device, dtype, int(job["threads"]))
    try:
        adapter.load()
    except (Unavailable, ImportError) as exc:
        return {"status": "unavailable", "error": str(exc)}
    before = {}
    if device == "gpu":
        from numbench.roofline.measure import gpu

        before = gpu.vector_precision(library, adapter)
    rng = np.random.default_rng(0)
    fn = adapter.compile(operations.get("matmul").build(adapter.family, adapter.xp, dtype))
    rates: dict[int, float] = {}
    best = None
    for n in (int(size) for size in job["sizes"]):
        a, b = (adapter.to_device(rng.standard_normal((n, n))) for _ in range(2))

        def call(a=a, b=b):
            result = fn(a, b)
            if adapter.sync is not None:
                adapter.sync(result)

        call()
        seconds = _best_seconds(call, GEMM_TRIALS)
        rates[n] = 2.0 * n**3 / seconds / 1e9
        if best is None or rates[n] > 2.0 * best[0] ** 3 / best[1] / 1e9:
            best = (n, seconds)
        del a, b
    n, seconds = best
    return {
        "status": "ok",
        "library": library,
        "n": n,
        "seconds": seconds,
        "gflop_per_s_by_n": {str(k): v for k, v in rates.items()},
        "trials": GEMM_TRIALS,
        "version": adapter.version(),
        "blas": adapter.blas(),
        "threads_used": adapter.threads_used(),
        "tf32": before,
    }


def run(job: dict) -> dict:
    from numbench.libraries import pin_cpus
    from numbench.measure.cpu_taken import CpuTaken

    cpus = pin_cpus(int(job["threads"]))
    taken = CpuTaken()
    if job["kind"] == "memory":
        out = measure_memory(job)
    elif job["kind"] == "gemm":
        out = measure_gemm(job)
    elif job["kind"] == "gpu":
        from numbench.roofline.measure import gpu

        out = gpu.measure(job)
    else:
        raise ValueError(f"unknown roof job kind {job['kind']!r}")
    out["cpus"] = cpus
    # the share of its CPUs' time other programs took meanwhile (as a cell's worker reports)
    out["cpu_taken"] = taken.share()
    return out


def main(argv: list[str]) -> int:
    job_path, result_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    result = run(job)
    result_path.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
