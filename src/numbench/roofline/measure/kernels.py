"""The kernels that measure a roof, run in a fresh worker process of their own.

``python -m numbench.roofline.measure.kernels JOB RESULT`` reads one job (JSON) and writes its
result (JSON). The process that starts it (``numbench.roofline.measure.RoofJobs``, through the
cells' process machinery) has set the threads' environment and the allocator's before this
interpreter started; here the process pins itself to its CPUs, as a cell's worker does,
before any numerical library is imported.

Three kinds of job:

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
* ``gpu``: a GPU's roofs (``measure_gpu``), with PyTorch (or CuPy where PyTorch has no GPU):

  * ``dram``: a device-to-device copy of ``GPU_COPY_BYTES``, timed with CUDA events, the L2
    cleared between samples by writing a buffer twice its size, the best of
    ``GPU_TRIALS``; counted as STREAM counts a copy (read + write). Beside it, the peak the
    memory's clock and bus width give (NVML: ``max memory clock x 2 (double data rate) x bus
    width / 8``), which a measured copy approaches but never reaches. A copy, where the
    CPU's bandwidth roofs are a triad (``rows.level_row``): this is a code path of its own,
    no triad is timed here, and a GPU cell is held against the copy (no ``copy_value``).
  * ``h2d``, ``d2h``: copies between pinned host memory and the device, the same size.
  * ``compute``: the matmul GEMMs of the libraries (jobs of kind ``gemm``, with TF32 switched
    off, ``vector_precision``) and, with CuPy, an FMA-bound kernel; the higher counts.
  * the clocks (SM and memory, now and at most) as NVML reads them, recorded with every row.

  On a host without a GPU nothing is measured: the job reports ``unavailable`` with the
  reason each library gives, and the rows say so.

TF32: on an Ampere or later GPU a float32 matmul may run on tensor cores in TF32 (10-bit
mantissa), several times the float32 vector peak. TensorFlow does so by default, JAX's
default precision does on GPU, PyTorch does not for matmuls, CuPy only with ``CUPY_TF32=1``.
The GEMM roof is measured with TF32 off (the float32 vector peak), and each library's own
default is recorded, so that a float32 cell above the compute roof can be told from a
cost-model error.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
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
                # first_touch holds b, a copy of it and a fresh one: let a and c go first,
                # so the process never holds more than the triad's three arrays
                a = c = None
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
        before = vector_precision(library, adapter)
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


# -- a GPU's roofs (job kind ``gpu``) and the float32 precision mode of each library ---------

#: bytes copied per sample (device to device, host to device, device to host)
GPU_COPY_BYTES = 1 << 30
#: samples of each copy; the best counts
GPU_TRIALS = 10
#: FMAs per element of the FMA-bound kernel, and its elements
FMA_PER_ELEMENT = 4096
FMA_ELEMENTS = 1 << 22
#: NVML's clock kinds (nvmlClockType_t)
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
#: double data rate: two transfers per memory clock
TRANSFERS_PER_CLOCK = 2
#: flops of one fused multiply-add
FLOPS_PER_FMA = 2


def nvml_facts(index: int = 0) -> dict:
    """Clocks (MHz, now and at most) and memory bus width (bits) from NVML, through ctypes;
    an empty mapping where NVML cannot be loaded (no driver). Never raises."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return {}
    out: dict = {}
    try:
        if nvml.nvmlInit_v2() != 0:
            return {}
        handle = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0:
            value = ctypes.c_uint(0)
            for key, getter, kind in (
                ("sm_clock_mhz", "nvmlDeviceGetClockInfo", NVML_CLOCK_SM),
                ("memory_clock_mhz", "nvmlDeviceGetClockInfo", NVML_CLOCK_MEM),
                ("max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_SM),
                ("max_memory_clock_mhz", "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_MEM),
            ):
                if getattr(nvml, getter)(handle, kind, ctypes.byref(value)) == 0:
                    out[key] = int(value.value)
            if nvml.nvmlDeviceGetMemoryBusWidth(handle, ctypes.byref(value)) == 0:
                out["memory_bus_bits"] = int(value.value)
        nvml.nvmlShutdown()
    except (AttributeError, OSError):
        return out
    return out


def peak_bandwidth_gb_per_s(facts: dict) -> float | None:
    """The memory's peak in GB/s from its maximum clock and bus width, or None."""
    clock, bits = facts.get("max_memory_clock_mhz"), facts.get("memory_bus_bits")
    if not clock or not bits:
        return None
    return clock * 1e6 * TRANSFERS_PER_CLOCK * bits / 8 / 1e9


def tf32_mode(library: str, module) -> str:
    """The library's own float32 matmul precision on a GPU, in words (before any change)."""
    if library == "torch":
        return (
            f"allow_tf32={module.backends.cuda.matmul.allow_tf32}, "
            f"float32_matmul_precision={module.get_float32_matmul_precision()}"
        )
    if library == "tensorflow":
        on = module.config.experimental.is_tensor_float_32_execution_enabled()
        return f"tensor_float_32_execution={on}"
    if library == "jax":
        return f"default_matmul_precision={module.config.jax_default_matmul_precision}"
    if library == "cupy":
        return f"CUPY_TF32={os.environ.get('CUPY_TF32', '0')}"
    return "n/a"


def vector_precision(library: str, adapter) -> dict:
    """Switch TF32 off for the GEMM that measures the float32 vector peak; return the
    library's default mode, recorded with the roof."""
    if library == "jax":
        import jax as module
    else:
        module = adapter.xp  # torch, tensorflow, cupy: the module itself
    mode = tf32_mode(library, module)
    if library == "torch":
        module.backends.cuda.matmul.allow_tf32 = False
        module.set_float32_matmul_precision("highest")
    elif library == "tensorflow":
        module.config.experimental.enable_tensor_float_32_execution(False)
    elif library == "jax":
        module.config.update("jax_default_matmul_precision", "highest")
    return {library: mode}


def _torch_gpu():
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"torch {torch.__version__} sees no CUDA device"
            + (" (a CPU-only build)" if torch.version.cuda is None else "")
        )
    return torch


def _timed_copies(torch, dst, src, flush, trials: int) -> float:
    """Best seconds of ``dst.copy_(src)``, CUDA events around each, the L2 flushed first."""
    best = math.inf
    for _ in range(trials):
        if flush is not None:
            flush.fill_(1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def measure_with_torch(nbytes: int, trials: int) -> dict:
    """Device-to-device, pinned host-to-device and device-to-host copies."""
    torch = _torch_gpu()
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda") if l2 else None
    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    copy_s = _timed_copies(torch, dst, src, flush, trials)
    h2d_s = _timed_copies(torch, dst, host, flush, trials)
    d2h_s = _timed_copies(torch, host, src, flush, trials)
    return {
        "library": "torch",
        "version": torch.__version__,
        "device_name": props.name,
        "l2_bytes": l2,
        "dram": {"seconds": copy_s, "bytes": 2 * nbytes, "kernel": "device-to-device copy"},
        "h2d": {"seconds": h2d_s, "bytes": nbytes, "kernel": "pinned host-to-device copy"},
        "d2h": {"seconds": d2h_s, "bytes": nbytes, "kernel": "device-to-pinned-host copy"},
    }


def fma_with_cupy(dtype: str, trials: int) -> dict:
    """An FMA-bound CuPy kernel: each element runs ``FMA_PER_ELEMENT`` dependent FMAs in
    four independent chains; GFLOP/s = 2 x FMAs / seconds."""
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("cupy sees no CUDA device")
    ctype = {"float32": "float", "float64": "double"}[dtype]
    chains = 4
    body = "\n".join(
        [f"{ctype} v{k} = x + {k};" for k in range(chains)]
        + [f"for (int r = 0; r < {FMA_PER_ELEMENT // chains}; ++r) {{"]
        + [f"  v{k} = fma(v{k}, a, b);" for k in range(chains)]
        + ["}", "y = " + " + ".join(f"v{k}" for k in range(chains)) + ";"]
    )
    kernel = cupy.ElementwiseKernel(f"{ctype} x, {ctype} a, {ctype} b", f"{ctype} y", body)
    x = cupy.ones(FMA_ELEMENTS, dtype=dtype)
    y = cupy.empty_like(x)
    a, b = cupy.asarray(0.999, dtype=dtype), cupy.asarray(1e-3, dtype=dtype)
    kernel(x, a, b, y)
    best = math.inf
    for _ in range(trials):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        kernel(x, a, b, y)
        end.record()
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end) / 1e3)
    flops = FLOPS_PER_FMA * FMA_PER_ELEMENT * FMA_ELEMENTS
    return {"seconds": best, "flops": flops, "library": "cupy", "version": cupy.__version__}


def measure_gpu(job: dict) -> dict:
    """The GPU job: copies (torch), an FMA kernel per dtype (CuPy), NVML's clocks. A part
    that cannot run says why; nothing here raises for a missing GPU."""
    nbytes, trials = int(job.get("bytes", GPU_COPY_BYTES)), int(job.get("trials", GPU_TRIALS))
    out: dict = {"status": "ok", "nvml": nvml_facts(), "errors": {}, "trials": trials}
    try:
        out["copies"] = measure_with_torch(nbytes, trials)
    except Exception as exc:  # noqa: BLE001 - the reason is the row's error
        out["errors"]["copies"] = f"{type(exc).__name__}: {exc}"
    out["fma"] = {}
    for dtype in job["dtypes"]:
        try:
            out["fma"][dtype] = fma_with_cupy(dtype, trials)
        except Exception as exc:  # noqa: BLE001 - CuPy missing, or no device
            out["errors"][f"fma {dtype}"] = f"{type(exc).__name__}: {exc}"
    if "copies" not in out and not out["fma"]:
        out["status"] = "unavailable"
        out["error"] = "; ".join(f"{k}: {v}" for k, v in out["errors"].items())
    return out


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
        out = measure_gpu(job)
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
