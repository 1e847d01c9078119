"""Gradient of L(w) = sum((w_i * x_i)^2) with respect to w.

JAX, PyTorch and TensorFlow differentiate automatically. NumPy, Numba and CuPy have no
autodiff, so, as the published comparison does, they use forward finite differences: one
forward pass of L per parameter (n + 1 passes in all, O(n^2) work). The step is h = sqrt(eps * max(L, 1)),
which balances truncation against rounding; the finite-difference result is therefore checked
against a looser tolerance (``approx_tolerance``) than the exact autodiff result.
"""

from __future__ import annotations

import math

import numpy as np

from .base import DTYPE_EPS, Operation


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"w": rng.standard_normal(size), "x": rng.standard_normal(size)}


def reference(w, x):
    return 2.0 * w * x * x


def _finite_differences(np_, dtype):
    eps = DTYPE_EPS[dtype]

    def grad(w, x):
        base = np.sum((w * x) ** 2)
        h = np.sqrt(eps * max(base, 1.0))
        g = np.empty_like(w)
        wp = w.copy()
        for i in range(w.shape[0]):
            old = wp[i]
            wp[i] = old + h
            step = wp[i] - old  # the step actually taken after rounding
            g[i] = (np.sum((wp * x) ** 2) - base) / step
            wp[i] = old
        return g

    return grad


def _finite_differences_xp(xp, dtype):
    """The same forward differences, written against the array module ``xp`` (CuPy).

    The parameters are read to the host once, so the steps are exact host arithmetic in the
    dtype and no scalar travels back from the device inside the loop; each of the n passes is
    a device-side update of one parameter and a device-side reduction.
    """
    eps = DTYPE_EPS[dtype]
    to_host = getattr(xp, "asnumpy", np.asarray)

    def grad(w, x):
        base = xp.sum((w * x) ** 2)
        h = math.sqrt(eps * max(float(base), 1.0))
        w_host = to_host(w)
        stepped = (w_host + np.asarray(h, dtype=w_host.dtype)).astype(w_host.dtype)
        steps = stepped - w_host  # the steps actually taken after rounding
        g = xp.empty_like(w)
        wp = w.copy()
        for i in range(w.shape[0]):
            wp[i] = stepped[i]
            g[i] = (xp.sum((wp * x) ** 2) - base) / steps[i]
            wp[i] = w_host[i]
        return g

    return grad


def _jax(jnp, dtype):
    import jax

    def loss(w, x):
        return jnp.sum((w * x) ** 2)

    return jax.grad(loss)


def _torch(torch, dtype):
    def grad(w, x):
        w = w.detach().requires_grad_(True)
        loss = torch.sum((w * x) ** 2)
        (g,) = torch.autograd.grad(loss, w)
        return g

    return grad


def _tensorflow(tf, dtype):
    def grad(w, x):
        with tf.GradientTape() as tape:
            tape.watch(w)
            loss = tf.reduce_sum(tf.square(w * x))
        return tape.gradient(loss, w)

    return grad


OPERATION = Operation(
    name="grad",
    summary="gradient of sum((w * x)^2) w.r.t. w: autodiff, or finite differences "
    "(one forward pass per parameter) in NumPy, Numba and CuPy",
    input_names=("w", "x"),
    make_inputs=make_inputs,
    reference=reference,
    # The useful work is the analytic gradient 2 w x^2 (3 flops per element); finite
    # differences do O(n^2) work for it, which shows as a low achieved rate.
    flops=lambda n: 3.0 * n,
    bytes_moved=lambda n, itemsize: 3.0 * n * itemsize,
    input_elements=lambda n: 2 * n,
    output_elements=lambda n: n,
    tolerance={"float32": 1e-5, "float64": 1e-12},
    implementations={
        "numpy": _finite_differences,
        "numba": _finite_differences,
        "jax": _jax,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "cupy": _finite_differences_xp,
    },
    unsupported={
        "numba-cuda": "numba.cuda has no autodiff, and finite differences need a reduction "
        "per parameter: not a simple kernel",
    },
    approximate=frozenset({"numpy", "numba", "cupy"}),
    approx_tolerance={"float32": 1e-1, "float64": 1e-5},
)
