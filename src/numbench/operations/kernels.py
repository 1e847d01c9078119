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

*Library options.* What numbench compiles it compiles with the operation's options for
the library (``Operation.options``: ``{"numba": {"parallel": True, "fastmath": True}, "jax":
{"donate_argnums": 0}, "torch-compile": {"mode": "max-autotune"}, "tensorflow":
{"jit_compile": True}}``), passed as keyword arguments to ``numba.njit``, ``jax.jit``,
``torch.compile`` or ``tf.function``; the config overrides them per operation
(``operations.NAME.options``), and a config's ``variants`` run a library again under other
options, as a library of its own name (``numba-parallel``), each its own cell.

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


def library_options(op, library: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The compile options of ``library`` (an adapter's name) for ``op``: the operation's own
    (``Operation.options[library]``) updated by ``given`` (the config's, and a variant's)."""
    own = op.options.get(library, {}) if isinstance(op.options, dict) else {}
    return {**own, **(given or {})}


def options_json(options: dict[str, Any]) -> str:
    """The canonical text of compile options ("" where there are none)."""
    import json

    return json.dumps(options, sort_keys=True, default=str) if options else ""


def prepared(adapter, built: Any, options: dict[str, Any] | None = None):
    """(the function to time, whether it came as it is): a kernel marked ``as_is`` itself,
    else what the builder returned compiled by the adapter with ``options``. ValueError
    where options are given for a kernel handed over as it is (its options are its own)."""
    if isinstance(built, AsIs):
        if options:
            raise ValueError(
                f"compile options ({', '.join(sorted(options))}) apply to what numbench "
                "compiles; a kernel handed over as it is (numbench.as_is) keeps its own"
            )
        return adapter.as_is(built.kernel), True
    return adapter.compile(built, **(options or {})), False


def variant_reason(adapter, family: str) -> str:
    """Why a variant library has no cell of a kernel handed over as it is."""
    return (
        f"the {family} builder hands its kernel over as it is (numbench.as_is): {adapter.name} "
        f"compiles the {family} builder its own way, so it would time the same kernel as {family}"
    )
