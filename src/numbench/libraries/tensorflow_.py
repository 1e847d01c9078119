"""TensorFlow: ``tf.function`` graphs on the CPU or GPU; ``tensorflow-eager`` runs eagerly.

On the GPU: inputs are created on the device and waited for before any timing; every call is
followed by ``tf.test.experimental.sync_devices()`` (TensorFlow offers no CUDA events); memory
growth is on (``TF_FORCE_GPU_ALLOW_GROWTH``), so TensorFlow does not take the whole card, and
the peak is the allocator's ``peak`` since the reset after placement.
"""

from __future__ import annotations

from .base import Adapter, Unavailable, affinity_count, cuda_driver_details, no_options


class TensorflowAdapter(Adapter):
    name = "tensorflow"
    family = "tensorflow"
    module = "tensorflow"
    devices = ("cpu", "gpu")
    description = "TensorFlow, tf.function"

    def environment(self) -> dict[str, str]:
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}
        if self.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = "-1"
        else:
            env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        return env

    def load(self) -> None:
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise Unavailable(f"tensorflow cannot be imported: {exc}") from exc
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        # float32 products at float32 precision: TensorFloat-32 is on by default on Ampere and
        # later GPUs, as in JAX (jax_.py), and fails the cell's float32 check.
        tf.config.experimental.enable_tensor_float_32_execution(False)
        if self.device == "gpu":
            if not tf.config.list_physical_devices("GPU"):
                why = (
                    "this tensorflow is built without CUDA (tensorflow-cpu?)"
                    if not tf.test.is_built_with_cuda()
                    else "tf.config.list_physical_devices('GPU') is empty"
                )
                raise self.gpu_unavailable(f"no GPU visible to tensorflow: {why}")
            self._dev_name = "/GPU:0"
        else:
            self._dev_name = "/CPU:0"
        self._tf = tf

    @property
    def xp(self):
        return self._tf

    def version(self) -> str:
        return self._tf.__version__

    def to_device(self, array):
        with self._tf.device(self._dev_name):
            placed = self._tf.identity(self._tf.constant(array.astype(self.dtype, copy=False)))
        if self.device == "gpu":
            self._tf.test.experimental.sync_devices()  # the copy is never inside a timed region
        return placed

    def compile(self, fn, **options):
        tf, dev = self._tf, self._dev_name

        def on_device(*args):
            with tf.device(dev):
                return fn(*args)

        # options: tf.function's own (jit_compile, reduce_retracing, ...)
        return tf.function(on_device, **options)

    @property
    def asynchronous(self) -> bool:
        # On the CPU a tf.function call returns once its outputs are computed, so a sync
        # after it finds nothing left to wait for; on the GPU kernels are queued.
        return self.device == "gpu"

    def sync(self, result):  # type: ignore[override]
        # Materialise: wait until every output is computed. sync_devices waits for all
        # pending work on every device without copying results to the host.
        self._tf.test.experimental.sync_devices()
        return result

    def device_name(self) -> str:
        if self.device == "cpu":
            return super().device_name()
        details = self._tf.config.experimental.get_device_details(
            self._tf.config.list_physical_devices("GPU")[0]
        )
        return details.get("device_name", "GPU")

    def device_details(self) -> dict[str, str]:
        if self.device == "cpu":
            return {}
        tf = self._tf
        build = tf.sysconfig.get_build_info()
        details = {
            **cuda_driver_details(),
            "cuda_runtime_version": str(build.get("cuda_version", "")),
            "cudnn_version": str(build.get("cudnn_version", "")),
            "timer": "perf_counter; tf.test.experimental.sync_devices() after every call (latency), once per sample (pipelined)",
            "peak_memory": "tf.config.experimental.get_memory_info peak since the reset",
        }
        cc = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[0]
        ).get("compute_capability")
        if cc:
            details["compute_capability"] = ".".join(map(str, cc))
        return details

    def reset_device_peak(self) -> None:
        if self.device == "gpu":
            self._tf.config.experimental.reset_memory_stats("GPU:0")

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return self._tf.config.experimental.get_memory_info("GPU:0")["peak"] / 1e6

    def threads_used(self) -> int | None:
        # 0 means "TensorFlow decides": it then sizes its pool from the CPUs it may run on
        reported = int(self._tf.config.threading.get_intra_op_parallelism_threads())
        return reported or affinity_count()


class TensorflowEagerAdapter(TensorflowAdapter):
    name = "tensorflow-eager"
    variant = True
    description = "TensorFlow, eager (no tf.function)"

    def compile(self, fn, **options):
        no_options(self, options)
        tf, dev = self._tf, self._dev_name

        def on_device(*args):
            with tf.device(dev):
                return fn(*args)

        return on_device
