"""What a library adapter does: environment before import, import, device placement,
compilation, sync, conversion back to NumPy, and the metadata a reviewer needs.

Adapters are plain classes registered by name. A *variant* (``jax-eager``,
``torch-compile``) is a subclass that overrides one or two methods, never a copy.
Nothing here imports a numerical library at module level: the registry is read by
Snakemake and by the light cell supervisor, which must stay cheap.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

from numbench.machine.system import cpu_info


class Unavailable(Exception):
    """The library or the requested device is missing here; the message says why."""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what the platform says where it has none."""
    return cpu_info().get("model name") or platform.processor() or platform.machine()


class Adapter:
    #: registry name, as written in the config's ``libraries`` list
    name: str = ""
    #: which implementation of each operation it runs (operations key them by family)
    family: str = ""
    #: the import name whose version is reported
    module: str = ""
    #: devices the library can run on at all
    devices: tuple[str, ...] = ("cpu",)
    #: one line for the README and the summary
    description: str = ""
    #: test-only adapters are never in the defaults and are listed apart in docs
    test_only: bool = False
    #: a variant runs its family's builder another way (``jax-eager``): it has no cell of a
    #: kernel handed over as it is (``numbench.as_is``), which comes compiled already
    variant: bool = False

    #: it can keep its compilations in a folder for later processes (``compile_cache``)
    caches_compiles: bool = False

    def __init__(self, device: str, dtype: str, threads: int):
        self.device = device
        self.dtype = dtype
        self.threads = threads
        #: the cell's compilation cache (``numbench.measure.compile_cache``), set before
        #: ``load`` where the cell shares one; None: compile afresh
        self.compile_folder: str | None = None

    # -- before import ---------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """Environment variables this library needs set before it is imported."""
        return {}

    # -- import and set-up -----------------------------------------------------------
    def load(self) -> None:
        """Import the library and check the device; raise Unavailable with a reason."""
        raise NotImplementedError

    @property
    def xp(self) -> Any:
        """The array module handed to the operation's builder."""
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    # -- data and calls --------------------------------------------------------------
    def to_device(self, array):
        raise NotImplementedError

    def compile(self, fn: Callable, **options: Any) -> Callable:
        """Wrap the operation's plain function (jit, tf.function, njit), with the library's
        compile ``options`` (``numbench.operations.kernels``) passed to its compiler; eager
        by default, and an eager library takes no options."""
        no_options(self, options)
        return fn

    def cache_seen(self) -> tuple[int, int] | None:
        """(loaded, compiled): the compilations this process loaded from its cell's folder
        and those it compiled and wrote there (``compile_cache``), as the library counts
        them; None where it keeps none."""
        return None

    def as_is(self, kernel: Callable) -> Callable:
        """A kernel handed over as it is (``numbench.as_is``), called as it is: numbench
        compiles nothing (the tests' slowdown, ``tests/adapters/slowed.py``, stretches it as it
        stretches what ``compile`` gives)."""
        return kernel

    #: ``sync(result)`` waits until the result is really computed; None when calls are
    #: synchronous already (NumPy, Numba, PyTorch on the CPU), which keeps the timed loop bare.
    sync: Callable[[Any], Any] | None = None

    @property
    def asynchronous(self) -> bool:
        """True when a call returns before its work is done and ``sync`` waits for it (JAX,
        libraries on CUDA): such cells are timed per call *and* pipelined. By default, any
        adapter with a sync; one whose calls finish before they return says False."""
        return self.sync is not None

    @property
    def host_memory(self) -> bool:
        """True when the device computes in the host's memory (the CPU): nothing is moved,
        and the transfer figures are null."""
        return self.device == "cpu"

    def to_numpy(self, result) -> Any:
        if isinstance(result, dict):
            return {name: self._to_numpy_one(r) for name, r in result.items()}
        if isinstance(result, (tuple, list)):
            return tuple(self._to_numpy_one(r) for r in result)
        return self._to_numpy_one(result)

    def _to_numpy_one(self, value):
        import numpy as np

        return np.asarray(value)

    # -- metadata --------------------------------------------------------------------
    def device_name(self) -> str:
        if self.device == "cpu":
            return cpu_model()
        raise NotImplementedError

    def device_details(self) -> dict[str, str]:
        """Driver, CUDA version and the like, where the library knows them."""
        return {}

    def device_timer(self) -> Any:
        """A ``numbench.timing.EventTimer`` where the library offers device (CUDA) events;
        None times on the host clock. Only GPU cells of torch, CuPy and Numba return one."""
        return None

    def reset_device_peak(self) -> None:
        """Reset the device's peak-memory counter (GPU libraries), after inputs are placed."""

    def device_peak_mb(self) -> float | None:
        """Peak device memory during the cell, in MB; None on the CPU."""
        return None

    def blas(self) -> str:
        return ""

    def threads_used(self) -> int | None:
        """Threads the library really runs with, as it reports them (after ``load``). By
        default the CPUs this process may run on: XLA, for one, sizes its pool from them."""
        return affinity_count()

    def gpu_unavailable(self, reason: str) -> Unavailable:
        return Unavailable(f"{reason} (device=gpu asked for {self.name})")


def no_options(adapter: Adapter, options: dict) -> None:
    """ValueError where compile options are given to a library that compiles nothing."""
    if options:
        raise ValueError(
            f"{adapter.name} compiles nothing, so it takes no options "
            f"(given: {', '.join(sorted(options))})"
        )


def _c_library(*names: str):
    import ctypes

    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cuda_driver_details() -> dict[str, str]:
    """The NVIDIA driver version (NVML) and the CUDA version the driver supports (libcuda).

    Read through ctypes, so they are the same whichever library runs the cell; a key is left
    out when its library cannot be loaded (no driver), and nothing here raises.
    """
    import ctypes

    details: dict[str, str] = {}
    nvml = _c_library("libnvidia-ml.so.1", "libnvidia-ml.so")
    if nvml is not None:
        try:
            if nvml.nvmlInit_v2() == 0:
                buf = ctypes.create_string_buffer(96)
                if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
                    details["driver_version"] = buf.value.decode()
                nvml.nvmlShutdown()
        except (AttributeError, OSError):
            pass
    cuda = _c_library("libcuda.so.1", "libcuda.so")
    if cuda is not None:
        version = ctypes.c_int(0)
        try:
            if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
                details["cuda_driver_version"] = cuda_version_string(version.value)
        except (AttributeError, OSError):
            pass
    return details


def cuda_version_string(version: int) -> str:
    """CUDA's integer version (12040) as '12.4'."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def cpu_only_check(adapter: Adapter) -> None:
    if adapter.device != "cpu":
        raise Unavailable(f"{adapter.name} runs on the CPU only, not on {adapter.device}")


def thread_environment(threads: int) -> dict[str, str]:
    """The same thread limits for every library, set before any of them is imported."""
    n = str(threads)
    return {
        "OMP_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "BLIS_NUM_THREADS": n,
        "VECLIB_MAXIMUM_THREADS": n,
        "NUMEXPR_NUM_THREADS": n,
        "NUMBA_NUM_THREADS": n,
        "TF_NUM_INTRAOP_THREADS": n,
        "TF_NUM_INTEROP_THREADS": "1",
    }


#: glibc malloc's settings under ``allocator: steady`` (the config's default). By default glibc
#: hands blocks above a threshold (128 KiB at start) to ``mmap`` and gives freed memory at
#: the top of its heap back to the system past a trim threshold; both thresholds rise the
#: first time the process frees a large ``mmap``-ed block. So whether a call's temporaries
#: (an 800 KB array for n = 1e5) are fresh pages, faulted in and zeroed on every call, or
#: reused heap depends on what that process happened to free before: the same cell's
#: processes then differ in time per call, and a speedup moves with the baseline's page
#: faults alone (the figures: docs/history.md, "The allocator"). These settings put every
#: process in the same state from its start: blocks up to 32 MiB (glibc's largest mmap
#: threshold) come from the heap, and the heap is not trimmed below 1 GiB, so freed memory
#: is reused.
STEADY_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(2**30),
}
ALLOCATORS = ("steady", "system")


def allocator_environment(allocator: str) -> dict[str, str]:
    """The malloc settings of ``allocator`` (``steady``: ``STEADY_MALLOC``; ``system``: none,
    the C library's own, which then depends on each process's history)."""
    if allocator not in ALLOCATORS:
        raise ValueError(f"unknown allocator {allocator!r}: use one of {', '.join(ALLOCATORS)}")
    return dict(STEADY_MALLOC) if allocator == "steady" else {}


def affinity_count() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pin_cpus(threads: int) -> list[int]:
    """Restrict this process to ``threads`` of the CPUs it may use (inherited by children).

    Thread-count variables do not bind every library (XLA sizes its pool from the CPUs it
    may run on), so the affinity mask is what makes ``threads`` hold for all of them alike.
    """
    if not hasattr(os, "sched_getaffinity"):
        return []
    chosen = chosen_cpus(os.sched_getaffinity(0), threads)
    os.sched_setaffinity(0, chosen)
    return chosen


def chosen_cpus(allowed, threads: int) -> list[int]:
    """The CPUs ``pin_cpus`` keeps of ``allowed``: the ``threads`` lowest-numbered (one at
    least). The cell's supervisor reads them to keep the workflow off them
    (``numbench.measure.apart``)."""
    return sorted(allowed)[: max(1, threads)]
