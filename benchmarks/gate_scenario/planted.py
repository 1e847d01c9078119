"""A user's operation whose PyTorch implementation gets slower when a factor file says so:
each call computes ``a * b + sin(a)`` and then waits, busy, until it has taken ``factor``
times as long as the computation did. It is the real slowdown that
``benchmarks/gate_scenario.py`` plants from one run on: the operation's code and the config
stay the same, as when a dependency slows down. The factor is read from
``planted-factor.txt`` in the interpreter's environment (``sys.prefix``) where there is one,
as a dependency belongs to an environment (``compare --confirm`` then measures OLD's
interpreter at OLD's factor); else from ``factor.txt`` beside this file."""

import sys
from pathlib import Path

import numpy as np

from numbench import Operation

FACTOR_FILE = Path(__file__).with_name("factor.txt")
#: the factor of the interpreter's environment, where it has one
PREFIX_FACTOR_FILE = Path(sys.prefix, "planted-factor.txt")


def make_inputs(size, rng):
    return {"a": rng.standard_normal(size), "b": rng.standard_normal(size)}


def reference(a, b):
    return np.asarray(a, dtype=np.float64) * b + np.sin(a)


def array_style(xp, dtype):
    def planted(a, b):
        return a * b + xp.sin(a)

    return planted


def planted_factor() -> float:
    """The environment's factor, else the one beside this file, else 1."""
    found = [f for f in (PREFIX_FACTOR_FILE, FACTOR_FILE) if f.exists()]
    return float(found[0].read_text()) if found else 1.0


def stretched(xp, dtype):
    """PyTorch: the same work, each call stretched to ``factor`` times its own duration."""
    import time

    factor = planted_factor()

    def planted(a, b):
        start = time.perf_counter()
        out = a * b + xp.sin(a)
        took = time.perf_counter() - start
        until = start + factor * took
        while time.perf_counter() < until:
            pass
        return out

    return planted


OPERATION = Operation(
    name="planted",
    summary="a * b + sin(a); PyTorch's calls stretched by the factor of its file",
    input_names=("a", "b"),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={"float32": 1e-5, "float64": 1e-12},
    implementations={"numpy": array_style, "jax": array_style, "torch": stretched},
    flops=lambda n: 3.0 * n,
    bytes_moved=lambda n, itemsize: 3 * n * itemsize,
)
