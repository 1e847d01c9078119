"""Kernels a user already has: a builder may hand one over as it is, compiled its own way.

By default numbench compiles what a builder returns the way its library's adapter does
(``jax.jit``, ``tf.function``, ``numba.njit``; ``numbench.libraries``). A scientist's kernel
often comes compiled already (under ``jax.jit`` with static arguments, a Numba function with
``parallel=True``, a ``torch.compile``\\ d module, a ``tf.function`` with an input signature):
compiled again it would be wrapped twice, and its options lost. A builder that returns
``numbench.as_is(kernel)`` says so: numbench then calls ``kernel`` itself, and still does
what it does around every call (places the inputs on the device, waits for the device after
each call, converts the result for the check). The cell's ``as_is`` column says which way
the kernel came.

A *variant* library (``jax-eager``, ``torch-compile``, ``tensorflow-eager``) is one way of
compiling the family's builder; a kernel handed over as it is has been compiled already, so
its variant cells are ``unsupported``, saying so, rather than timing the same kernel twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AsIs:
    """A kernel handed over as it is (``as_is``): numbench neither compiles nor wraps it."""

    kernel: Callable[..., Any]


def as_is(kernel: Callable[..., Any]) -> AsIs:
    """Mark ``kernel`` (what a builder returns) as ready: numbench calls it as it is."""
    if isinstance(kernel, AsIs):
        return kernel
    if not callable(kernel):
        raise TypeError(f"numbench.as_is needs a callable kernel, not a {type(kernel).__name__}")
    return AsIs(kernel)


def prepared(adapter, built: Any) -> tuple[Callable[..., Any], bool]:
    """(the function to time, whether it came as it is): a kernel marked ``as_is`` itself,
    else what the builder returned compiled by the adapter."""
    if isinstance(built, AsIs):
        return built.kernel, True
    return adapter.compile(built), False


def variant_reason(adapter, family: str) -> str:
    """Why a variant library has no cell of a kernel handed over as it is."""
    return (
        f"the {family} builder hands its kernel over as it is (numbench.as_is): {adapter.name} "
        f"compiles the {family} builder its own way, so it would time the same kernel as {family}"
    )
