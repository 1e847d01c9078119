"""JAX: ``jax.jit`` on the CPU or CUDA backend; ``jax-eager`` runs op by op.

On the GPU: inputs are committed to the CUDA device (``device_put``, waited for) before any
timing, so jitted calls run there; every call is waited for with ``block_until_ready`` (JAX
offers no CUDA events); preallocation is off (``XLA_PYTHON_CLIENT_PREALLOCATE=false``) so the
cell holds only what it uses, and the device's ``peak_bytes_in_use`` is the peak memory. XLA
cannot reset that counter, so it covers the whole cell, inputs included.

Matrix products run at full float32 precision (``jax_default_matmul_precision="highest"``):
on an Ampere or later GPU, JAX's default rounds float32 products through TensorFloat-32, which
fails the cell's float32 check (it did on an H100: docs/history.md, "Float32 on a GPU host")
and would time a coarser product than the other libraries compute.
"""

from __future__ import annotations

import importlib.util

from .base import Adapter, Unavailable, cuda_driver_details, no_options

#: modules of the JAX CUDA plugins (jax[cuda12] / jax[cuda13])
JAX_CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins.xla_cuda12")


def jax_cuda_plugin() -> str | None:
    for name in JAX_CUDA_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


class JaxAdapter(Adapter):
    name = "jax"
    family = "jax"
    module = "jax"
    devices = ("cpu", "gpu")
    description = "JAX, jax.jit"
    caches_compiles = True

    def environment(self) -> dict[str, str]:
        env = {
            # "cuda" alone makes jax.devices() fail with a bare AssertionError when no CUDA
            # plugin is installed; with "cuda,cpu" the absence is a readable RuntimeError.
            "JAX_PLATFORMS": "cpu" if self.device == "cpu" else "cuda,cpu",
            "JAX_ENABLE_X64": "1" if self.dtype == "float64" else "0",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "TF_CPP_MIN_LOG_LEVEL": "2",
        }
        if self.device == "cpu" and self.threads == 1:
            env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        return env

    def load(self) -> None:
        try:
            import jax
            import jax.numpy as jnp
        except ImportError as exc:
            raise Unavailable(f"jax cannot be imported: {exc}") from exc
        jax.config.update("jax_enable_x64", self.dtype == "float64")
        jax.config.update("jax_default_matmul_precision", "highest")
        if self.compile_folder:
            # before anything compiles: JAX decides once per process whether it caches.
            # Every compilation is kept, however quick (XLA's GPU autotuning results too).
            jax.config.update("jax_compilation_cache_dir", self.compile_folder)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            self._seen = [0, 0]
            jax.monitoring.register_event_listener(self._count)
        if self.device == "gpu":
            try:
                devices = jax.devices("cuda")
            except Exception as exc:  # noqa: BLE001 - RuntimeError, or AssertionError
                plugin = jax_cuda_plugin()
                why = (
                    f"jax's CUDA plugin ({plugin}) found no usable GPU"
                    if plugin
                    else "no CUDA plugin installed (pip install 'jax[cuda13]')"
                )
                raise self.gpu_unavailable(
                    f"no CUDA device visible to jax: {why}; jax says: {exc or type(exc).__name__}"
                ) from exc
        else:
            devices = jax.devices("cpu")
        self._jax, self._jnp, self._dev = jax, jnp, devices[0]

    def _count(self, event: str, **_details) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self._seen[0] += 1
        elif event == "/jax/compilation_cache/cache_misses":  # compiled, and written
            self._seen[1] += 1

    def cache_seen(self) -> tuple[int, int] | None:
        seen = getattr(self, "_seen", None)
        return None if seen is None else (seen[0], seen[1])

    @property
    def xp(self):
        return self._jnp

    def version(self) -> str:
        return self._jax.__version__

    def to_device(self, array):
        # Committed to the device, and waited for: the copy is never inside a timed region.
        return self._jax.block_until_ready(
            self._jax.device_put(array.astype(self.dtype, copy=False), self._dev)
        )

    def compile(self, fn, **options):
        # options: jax.jit's own (donate_argnums, static_argnums, ...)
        return self._jax.jit(fn, **options)

    def sync(self, result):  # type: ignore[override]
        return self._jax.block_until_ready(result)

    def device_name(self) -> str:
        if self.device == "cpu":
            return super().device_name()
        return self._dev.device_kind

    def device_details(self) -> dict[str, str]:
        if self.device == "cpu":
            return {}
        details = {
            **cuda_driver_details(),
            "timer": "perf_counter; block_until_ready after every call (latency), once per sample (pipelined)",
            "peak_memory": "XLA peak_bytes_in_use over the whole cell (no reset in XLA)",
            "preallocate": "false",
        }
        try:
            details["platform_version"] = str(self._dev.client.platform_version)
        except Exception:  # noqa: BLE001 - metadata only
            pass
        cc = getattr(self._dev, "compute_capability", None)
        if cc:
            details["compute_capability"] = str(cc)
        return details

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        stats = self._dev.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return None if peak is None else peak / 1e6


class JaxEagerAdapter(JaxAdapter):
    name = "jax-eager"
    variant = True
    description = "JAX without jit: op-by-op dispatch"
    caches_compiles = False

    def compile(self, fn, **options):
        no_options(self, options)
        return fn
