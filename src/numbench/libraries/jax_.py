"""JAX: ``jax.jit`` on the CPU or CUDA backend; ``jax-eager`` runs op by op."""

from __future__ import annotations

from .base import Adapter, Unavailable


class JaxAdapter(Adapter):
    name = "jax"
    family = "jax"
    module = "jax"
    devices = ("cpu", "gpu")
    description = "JAX, jax.jit"

    def environment(self) -> dict[str, str]:
        env = {
            "JAX_PLATFORMS": "cpu" if self.device == "cpu" else "cuda",
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
        try:
            devices = jax.devices()
        except RuntimeError as exc:
            raise self.gpu_unavailable(f"no CUDA device visible to jax: {exc}") from exc
        if self.device == "gpu" and not any(d.platform == "gpu" for d in devices):
            raise self.gpu_unavailable("no CUDA device visible to jax")
        self._jax, self._jnp, self._dev = jax, jnp, devices[0]

    @property
    def xp(self):
        return self._jnp

    def version(self) -> str:
        return self._jax.__version__

    def to_device(self, array):
        return self._jax.device_put(array.astype(self.dtype), self._dev)

    def compile(self, fn):
        return self._jax.jit(fn)

    def sync(self, result):  # type: ignore[override]
        return self._jax.block_until_ready(result)

    def device_name(self) -> str:
        if self.device == "cpu":
            return super().device_name()
        return self._dev.device_kind

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        stats = self._dev.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return None if peak is None else peak / 1e6


class JaxEagerAdapter(JaxAdapter):
    name = "jax-eager"
    description = "JAX without jit: op-by-op dispatch"

    def compile(self, fn):
        return fn
