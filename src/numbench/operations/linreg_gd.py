"""Linear regression fitted by full-batch gradient descent on the mean-squared error.

10,000 samples by d features (the size), drawn from a seeded linear model plus Gaussian noise.
Starting from zero weights and bias, every iteration computes the prediction, the MSE
gradients dL/dw = -2/n X^T (y - X w - b) and dL/db = -2/n sum(y - X w - b), and steps by a
fixed learning rate; a fixed number of iterations (the ``iterations`` parameter), no early
stopping. It returns (weights, bias).

The array libraries write it with matrix products; Numba, as the published comparison
wrote it, as explicit jitted loops over the samples and features.
"""

from __future__ import annotations

import numpy as np

from .base import Operation

SAMPLES = 10_000
LEARNING_RATE = 0.1  # features are standard normal: GD contracts by about 1 - 2 * 0.1 per step
NOISE = 0.1
DEFAULT_ITERATIONS = 100


def make_inputs(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """x and y = x w + b + noise, the same bits on every host: y is summed feature by
    feature in elementwise steps (each one correctly rounded IEEE operation), not by a matrix
    product, whose rounding depends on the CPU, the BLAS, its threads and the NumPy version
    (an offsite import compares the inputs made here with the ones the cells ran on)."""
    w_true = rng.standard_normal(size)
    b_true = rng.standard_normal()
    x = rng.standard_normal((SAMPLES, size))
    noise = rng.standard_normal(SAMPLES)
    acc = np.zeros(SAMPLES)
    for j in range(size):
        acc = acc + x[:, j] * w_true[j]
    y = acc + b_true + NOISE * noise
    return {"x": x, "y": y}


def reference(x, y, *, iterations):
    n, d = x.shape
    w, b = np.zeros(d), 0.0
    for _ in range(iterations):
        err = y - (x @ w + b)
        w = w + LEARNING_RATE * (2.0 / n) * (x.T @ err)
        b = b + LEARNING_RATE * (2.0 / n) * np.sum(err)
    return w, np.asarray(b)


def _numpy(np_, dtype, *, iterations):
    # The same matrix-product form as the reference, in the input dtype.
    def linreg_gd(x, y):
        n, d = x.shape
        step = LEARNING_RATE * 2.0 / n
        w = np_.zeros(d, dtype=x.dtype)
        b = np_.zeros((), dtype=x.dtype)
        for _ in range(iterations):
            err = y - (x @ w + b)
            w = w + step * (x.T @ err)
            b = b + step * np_.sum(err)
        return w, b

    return linreg_gd


def _jax(jnp, dtype, *, iterations):
    import jax

    def linreg_gd(x, y):
        n, d = x.shape
        step = LEARNING_RATE * 2.0 / n

        def update(_, wb):
            w, b = wb
            err = y - (x @ w + b)
            return w + step * (x.T @ err), b + step * jnp.sum(err)

        wb = (jnp.zeros(d, dtype=x.dtype), jnp.zeros((), dtype=x.dtype))
        if isinstance(x, jax.core.Tracer):
            # Under jit: one compiled loop (a Python loop would be unrolled, 100 copies of
            # the step, and compile for about ten seconds).
            return jax.lax.fori_loop(0, iterations, update, wb)
        for i in range(iterations):  # jax-eager: op by op, as written
            wb = update(i, wb)
        return wb

    return linreg_gd


def _torch(torch, dtype, *, iterations):
    # Under the torch-compile variant, torch.compile unrolls this loop into one graph of
    # ``iterations`` steps: slow to compile (minutes at 100), all of it in first_call_s.
    def linreg_gd(x, y):
        n, d = x.shape
        step = LEARNING_RATE * 2.0 / n
        w = torch.zeros(d, dtype=x.dtype, device=x.device)
        b = torch.zeros((), dtype=x.dtype, device=x.device)
        for _ in range(iterations):
            err = y - (torch.mv(x, w) + b)
            w = w + step * torch.mv(x.T, err)
            b = b + step * torch.sum(err)
        return w, b

    return linreg_gd


def _tensorflow(tf, dtype, *, iterations):
    def linreg_gd(x, y):
        n, d = x.shape
        step = LEARNING_RATE * 2.0 / n
        w = tf.zeros((d,), dtype=x.dtype)
        b = tf.zeros((), dtype=x.dtype)
        for _ in range(iterations):
            err = y - (tf.linalg.matvec(x, w) + b)
            w = w + step * tf.linalg.matvec(x, err, transpose_a=True)
            b = b + step * tf.reduce_sum(err)
        return w, b

    return linreg_gd


def _numba(np_, dtype, *, iterations):
    real = np.dtype(dtype).type  # typed constants keep float32 work in float32
    zero, rate2 = real(0), real(2.0 * LEARNING_RATE)

    def linreg_gd(x, y):
        n, d = x.shape
        step = rate2 / real(n)
        w = np.zeros(d, dtype=x.dtype)
        grad_w = np.zeros(d, dtype=x.dtype)
        b = zero
        for _ in range(iterations):
            for j in range(d):
                grad_w[j] = zero
            grad_b = zero
            for i in range(n):
                pred = b
                for j in range(d):
                    pred += x[i, j] * w[j]
                err = y[i] - pred
                for j in range(d):
                    grad_w[j] += err * x[i, j]
                grad_b += err
            for j in range(d):
                w[j] += step * grad_w[j]
            b += step * grad_b
        return w, np.full((), b, dtype=x.dtype)

    return linreg_gd


def flops(d: int, *, iterations: int) -> float:
    """Per iteration: prediction X w + b (2nd + n), residual (n), X^T r (2nd), sum of the
    residual (n), and the two updates (2d + 2)."""
    n = SAMPLES
    return float(iterations * (4 * n * d + 3 * n + 2 * d + 2))


def bytes_moved(d: int, itemsize: int, *, iterations: int) -> float:
    """Read X and y once, write w and b once (X fits in cache at small d; the sweep shows
    where re-reading it every iteration starts to cost)."""
    return float((SAMPLES * d + SAMPLES + d + 1) * itemsize)


OPERATION = Operation(
    name="linreg_gd",
    summary=f"linear regression on {SAMPLES:,} samples x d features by full-batch gradient "
    "descent on the MSE (fixed iterations and learning rate); size = d",
    input_names=("x", "y"),
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes_moved=bytes_moved,
    # X (SAMPLES x d) and y; w (d) and b
    input_elements=lambda d, *, iterations: SAMPLES * d + SAMPLES,
    output_elements=lambda d, *, iterations: d + 1,
    tolerance={"float32": 1e-4, "float64": 1e-10},
    implementations={
        "numpy": _numpy,
        "jax": _jax,
        "torch": _torch,
        "tensorflow": _tensorflow,
        "numba": _numba,
        "cupy": _numpy,
    },
    unsupported={
        "numba-cuda": "numba.cuda has no BLAS or reductions to call: gradient descent would be a hand-written multi-kernel solver, not a simple kernel",
    },
    params={"iterations": DEFAULT_ITERATIONS},
)
