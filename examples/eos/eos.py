"""The equation of state of kernels/, handed to numbench as it is (see kernels/__init__.py)."""

from kernels.inputs import generate_inputs
from kernels.numpy_eos import density_inplace

import numbench


def _numba(np, dtype):
    from kernels.numba_eos import density

    return density  # a plain loop: numbench compiles it, with the options below


def _jax(jnp, dtype):
    from kernels.jax_eos import density

    return numbench.as_is(density)  # already under jax.jit


def _torch(torch, dtype):
    from kernels.torch_eos import density

    return numbench.as_is(density)  # already under torch.compile


def _tensorflow(tf, dtype):
    from kernels.tensorflow_eos import density

    return numbench.as_is(density)  # a tf.function with its own input signature


OPERATION = numbench.Operation(
    name="eos",
    summary="seawater density from temperature, salinity and pressure (kernels as they are)",
    input_names=("t", "s", "p"),
    make_inputs=generate_inputs,  # the suite's own input maker, given (size, seed)
    seed=42,
    reference=density_inplace,  # writes into its t: numbench hands it copies
    tolerance={"float64": 1e-13},
    dtypes=("float64",),
    mutates_inputs={"numpy": ("t",)},  # the NumPy kernel writes into t: a fresh t per call
    options={"numba": {"fastmath": False}},
    implementations={
        "numpy": lambda np, dtype: numbench.as_is(density_inplace),
        **{"numba": _numba, "jax": _jax, "torch": _torch, "tensorflow": _tensorflow},
    },
    flops=lambda n: 30.0 * n,
    bytes_moved=lambda n, itemsize: 4 * n * itemsize,
)
