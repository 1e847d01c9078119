"""A test-only slowdown: any library, made slower by a known factor of its own call time.

It exists to measure how large a slowdown the versions comparison catches, and how often
(``benchmarks/versions_power.py``): a twin environment of the grid whose variables are
``NUMBENCH_TEST_ADAPTERS=1`` and ``NUMBENCH_TEST_SLOWDOWN=1.10`` runs every library of the
grid with each call stretched to 1.10 times its own duration, and is paired against the
library as another environment's version would be.

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
