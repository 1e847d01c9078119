"""Inference of a fixed 3-layer ReLU perceptron, 1024 -> 1024 -> 1024 -> 10, on a batch.

relu(relu(x W1 + b1) W2 + b2) W3 + b3 (no activation on the output layer, which gives the
logits). The weights are drawn once per seed (He initialisation, so activations keep their
scale through the layers) and are the same for every batch size; the size is the batch.
"""

from __future__ import annotations

import numpy as np

from .base import Operation

LAYERS = (1024, 1024, 1024, 10)
WEIGHT_NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")
#: numbers in every weight matrix and bias vector together
WEIGHT_ELEMENTS = sum(fi * fo + fo for fi, fo in zip(LAYERS[:-1], LAYERS[1:], strict=True))


def make_fixed(rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for i, (fan_in, fan_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:], strict=True), start=1):
        out[f"w{i}"] = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
        out[f"b{i}"] = rng.uniform(-0.1, 0.1, fan_out)
    return out


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((size, LAYERS[0]))}


def reference(x, w1, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1 + b1, 0.0)
    h = np.maximum(h @ w2 + b2, 0.0)
    return h @ w3 + b3


def _numpy(np_, dtype):
    # NumPy and jax.numpy.
    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = np_.maximum(np_.matmul(x, w1) + b1, 0.0)
        h = np_.maximum(np_.matmul(h, w2) + b2, 0.0)
        return np_.matmul(h, w3) + b3

    return mlp


def _numba(np_, dtype):
    zero = np.dtype(dtype).type(0)  # a typed zero keeps float32 work in float32

    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = np.maximum(np.dot(x, w1) + b1, zero)
        h = np.maximum(np.dot(h, w2) + b2, zero)
        return np.dot(h, w3) + b3

    return mlp


def _torch(torch, dtype):
    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = torch.relu(torch.matmul(x, w1) + b1)
        h = torch.relu(torch.matmul(h, w2) + b2)
        return torch.matmul(h, w3) + b3

    return mlp


def _tensorflow(tf, dtype):
    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = tf.nn.relu(tf.linalg.matmul(x, w1) + b1)
        h = tf.nn.relu(tf.linalg.matmul(h, w2) + b2)
        return tf.linalg.matmul(h, w3) + b3

    return mlp


def flops(batch: int) -> float:
    """2 * fan_in * fan_out per sample and layer for the products, plus the bias additions
    and the ReLUs of the two hidden layers."""
    pairs = list(zip(LAYERS[:-1], LAYERS[1:], strict=True))
    per_sample = sum(2 * fi * fo + fo for fi, fo in pairs) + sum(fo for _, fo in pairs[:-1])
    return float(batch * per_sample)


def bytes_moved(batch: int, itemsize: int) -> float:
    """Read the batch and every weight and bias once, write the logits once."""
    return float((batch * LAYERS[0] + WEIGHT_ELEMENTS + batch * LAYERS[-1]) * itemsize)


OPERATION = Operation(
    name="mlp",
    summary="inference of a fixed 3-layer ReLU perceptron 1024 -> 1024 -> 1024 -> 10; size = batch",
    input_names=("x", *WEIGHT_NAMES),
    make_inputs=make_inputs,
    make_fixed=make_fixed,
    reference=reference,
    flops=flops,
    bytes_moved=bytes_moved,
    input_elements=lambda batch: batch * LAYERS[0] + WEIGHT_ELEMENTS,
    output_elements=lambda batch: batch * LAYERS[-1],
    tolerance={"float32": 1e-4, "float64": 1e-10},
    implementations={
        "numpy": _numpy,
        "jax": _numpy,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "numba": _numba,
        "cupy": _numpy,
    },
    unsupported={
        "numba-cuda": "numba.cuda has no BLAS: the three matrix products would be hand-written kernels, not a library's",
    },
)
