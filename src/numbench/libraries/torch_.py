"""PyTorch: eager on the CPU or CUDA; ``torch-compile`` wraps the function in torch.compile.

On the GPU: inputs are copied to the CUDA device and synchronized before any timing; every
call is followed by ``torch.cuda.synchronize()``; samples are timed by CUDA events
(``torch.cuda.Event``); the peak is ``torch.cuda.max_memory_allocated`` since the reset after
the inputs were placed (the inputs stay allocated, so they count).
"""

from __future__ import annotations

from .base import Adapter, Unavailable, cuda_driver_details


class TorchAdapter(Adapter):
    name = "torch"
    family = "torch"
    module = "torch"
    devices = ("cpu", "gpu")
    description = "PyTorch, eager"

    def load(self) -> None:
        try:
            import torch
        except ImportError as exc:
            raise Unavailable(f"torch cannot be imported: {exc}") from exc
        torch.set_num_threads(self.threads)
        # float32 products at float32 precision, as in every library here (jax_.py): torch's
        # default already, set so that no environment or earlier import turns TF32 on.
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if self.device == "gpu":
            if not torch.cuda.is_available():
                why = (
                    f"torch {torch.__version__} is a CPU-only build"
                    if torch.version.cuda is None
                    else f"torch {torch.__version__} (CUDA {torch.version.cuda}) found no GPU"
                )
                raise self.gpu_unavailable(f"no CUDA device visible to torch: {why}")
            self._dev = torch.device("cuda", 0)
        else:
            self._dev = torch.device("cpu")
        self._torch = torch
        self._dtype = getattr(torch, self.dtype)

    @property
    def xp(self):
        return self._torch

    def version(self) -> str:
        return self._torch.__version__

    def to_device(self, array):
        placed = self._torch.from_numpy(array.astype(self.dtype, copy=False)).to(self._dev)
        if self.device == "gpu":
            self._torch.cuda.synchronize(self._dev)  # the copy is never inside a timed region
        return placed

    @property
    def sync(self):  # type: ignore[override]
        if self.device == "gpu":
            cuda = self._torch.cuda
            return lambda _result: cuda.synchronize()
        return None

    def device_timer(self):
        if self.device != "gpu":
            return None
        from numbench.timing import EventTimer

        cuda = self._torch.cuda
        return EventTimer(
            lambda: cuda.Event(enable_timing=True),
            lambda start, end: start.elapsed_time(end),
        )

    def _to_numpy_one(self, value):
        return value.detach().cpu().numpy()

    def device_name(self) -> str:
        if self.device == "cpu":
            return super().device_name()
        return self._torch.cuda.get_device_name(self._dev)

    def device_details(self) -> dict[str, str]:
        if self.device == "cpu":
            return {}
        props = self._torch.cuda.get_device_properties(self._dev)
        return {
            **cuda_driver_details(),
            "cuda_runtime_version": str(self._torch.version.cuda),
            "cudnn_version": str(self._torch.backends.cudnn.version()),
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_total_mb": f"{props.total_memory / 1e6:.0f}",
            "timer": "torch.cuda.Event; torch.cuda.synchronize() after every call (latency), once per sample (pipelined)",
            "peak_memory": "torch.cuda.max_memory_allocated since the reset after placement",
        }

    def reset_device_peak(self) -> None:
        if self.device == "gpu":
            self._torch.cuda.reset_peak_memory_stats(self._dev)

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return self._torch.cuda.max_memory_allocated(self._dev) / 1e6

    def blas(self) -> str:
        cfg = self._torch.__config__.show()
        for line in cfg.splitlines():
            if "BLAS_INFO" in line:
                return line.split("=", 1)[-1].strip().rstrip(",")
        return ""

    def threads_used(self) -> int | None:
        return int(self._torch.get_num_threads())


class TorchCompileAdapter(TorchAdapter):
    name = "torch-compile"
    variant = True
    description = "PyTorch, torch.compile (compile time lands in first_call_s)"

    def compile(self, fn, **options):
        # options: torch.compile's own (mode, fullgraph, dynamic, backend, ...)
        return self._torch.compile(fn, **options)
