"""A test-only slowdown: any library, made slower by a known factor of its own call time.

It exists to measure how large a slowdown the versions comparison catches, and how often
(``benchmarks/versions_power.py``): a twin environment of the grid whose variables are
``NUMBENCH_TEST_ADAPTERS=1`` and ``NUMBENCH_TEST_SLOWDOWN=1.10``, in a run where
``NUMBENCH_ADAPTERS`` names this file (the suite's conftest does), runs every library of the
grid with each call stretched to 1.10 times its own duration, and is paired against the
library as another environment's version would be. The registry imports this file after the
other adapters (``numbench.libraries``), and where a slowdown is asked for, this file's
``ADAPTERS`` replaces each of them by a twin of the same name whose instances are stretched
(``slowed_if_asked``) as they are made; with none asked for it registers nothing.

Each call of the compiled function is timed, waited for (``sync``, for the libraries that
return before their work is done) and followed by a busy wait until ``factor`` times its
duration has passed: a slowdown in proportion to the call, whatever its size, spent on the
CPU as a slower library would spend it. The two clock reads add a small fixed cost per call
on top of the factor, which only the smallest cells notice. A factor of 1 changes
nothing (the library is not wrapped). Without ``NUMBENCH_TEST_ADAPTERS=1`` the variable is
refused, so no real measurement can be slowed by a stray setting.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SLOWDOWN_ENV = "NUMBENCH_TEST_SLOWDOWN"


def slowdown_factor() -> float:
    """The factor asked for in ``SLOWDOWN_ENV`` (1 when unset)."""
    from numbench.libraries import TEST_ADAPTERS_ENV

    value = os.environ.get(SLOWDOWN_ENV, "").strip()
    if not value:
        return 1.0
    if os.environ.get(TEST_ADAPTERS_ENV) != "1":
        raise ValueError(f"{SLOWDOWN_ENV} is test-only: it needs {TEST_ADAPTERS_ENV}=1")
    try:
        factor = float(value)
    except ValueError:
        raise ValueError(f"{SLOWDOWN_ENV}={value!r} is not a number") from None
    if not factor >= 1.0:
        raise ValueError(f"{SLOWDOWN_ENV}={value!r}: a slowdown is a factor >= 1")
    return factor


def stretched(fn: Callable, sync: Callable | None, factor: float) -> Callable:
    """``fn`` with every call taking ``factor`` times as long as it did."""
    clock = time.perf_counter

    def slowed(*args):
        t0 = clock()
        result = fn(*args)
        if sync is not None:
            sync(result)
        until = t0 + factor * (clock() - t0)
        while clock() < until:
            pass
        return result

    return slowed


def slowed_if_asked(adapter):
    """``adapter``, its compiled functions and the kernels handed to it as they are
    (``numbench.as_is``) stretched when ``SLOWDOWN_ENV`` asks for it."""
    factor = slowdown_factor()
    if factor == 1.0:
        return adapter
    compile_ = adapter.compile

    def compile(fn: Callable, **options) -> Callable:
        return stretched(compile_(fn, **options), adapter.sync, factor)

    def as_is(kernel: Callable) -> Callable:
        return stretched(kernel, adapter.sync, factor)

    adapter.compile, adapter.as_is = compile, as_is
    return adapter


def slowed_twin(cls: type) -> type:
    """``cls`` under the same name, each instance ``slowed_if_asked`` as it is made."""

    class Slowed(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            slowed_if_asked(self)

    Slowed.__name__ = Slowed.__qualname__ = f"Slowed{cls.__name__}"
    return Slowed


def _twins() -> tuple[type, ...]:
    """Every adapter registered so far, stretched, where a slowdown is asked for."""
    if slowdown_factor() == 1.0:
        return ()
    from numbench import libraries

    return tuple(slowed_twin(cls) for cls in libraries.ADAPTERS.values())


#: the adapters the registry takes from this file (``NUMBENCH_ADAPTERS``)
ADAPTERS = _twins()
