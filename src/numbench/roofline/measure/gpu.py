"""A GPU's roofs, measured in a worker process (``numbench.roofline.measure.kernels``, job kind
``gpu``), and the float32 precision mode of each library.

What is measured, with PyTorch (or CuPy where PyTorch has no GPU):

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

On a host without a GPU nothing is measured: the job reports ``unavailable`` with the reason
each library gives, and the rows say so.

TF32: on an Ampere or later GPU a float32 matmul may run on tensor cores in TF32 (10-bit
mantissa), several times the float32 vector peak. TensorFlow does so by default, JAX's
default precision does on GPU, PyTorch does not for matmuls, CuPy only with ``CUPY_TF32=1``.
The GEMM roof is measured with TF32 off (the float32 vector peak), and each library's own
default is recorded, so that a float32 cell above the compute roof can be told from a
cost-model error.
"""

from __future__ import annotations

import ctypes
import math
import os

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


def measure(job: dict) -> dict:
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
