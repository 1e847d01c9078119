"""TensorFlow: ``tf.function`` graphs on the CPU or GPU; ``tensorflow-eager`` runs eagerly."""

from __future__ import annotations

from .base import Adapter, Unavailable


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
        return env

    def load(self) -> None:
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise Unavailable(f"tensorflow cannot be imported: {exc}") from exc
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        if self.device == "gpu":
            if not tf.config.list_physical_devices("GPU"):
                raise self.gpu_unavailable("no GPU visible to tensorflow")
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
            return self._tf.identity(self._tf.constant(array.astype(self.dtype)))

    def compile(self, fn):
        tf, dev = self._tf, self._dev_name

        def on_device(*args):
            with tf.device(dev):
                return fn(*args)

        return tf.function(on_device)

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

    def reset_device_peak(self) -> None:
        if self.device == "gpu":
            self._tf.config.experimental.reset_memory_stats("GPU:0")

    def device_peak_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return self._tf.config.experimental.get_memory_info("GPU:0")["peak"] / 1e6


class TensorflowEagerAdapter(TensorflowAdapter):
    name = "tensorflow-eager"
    description = "TensorFlow, eager (no tf.function)"

    def compile(self, fn):
        tf, dev = self._tf, self._dev_name

        def on_device(*args):
            with tf.device(dev):
                return fn(*args)

        return on_device
