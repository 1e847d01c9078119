"""The adapter registry: library name -> adapter class. Adding a library is one adapter
class here plus one builder per operation in ``numbench.operations``."""

from __future__ import annotations

import os

from .base import (
    ALLOCATORS,
    STEADY_MALLOC,
    Adapter,
    Unavailable,
    allocator_environment,
    chosen_cpus,
    cpu_model,
    pin_cpus,
    thread_environment,
)
from .cupy_ import CupyAdapter
from .jax_ import JaxAdapter, JaxEagerAdapter
from .numba_ import NumbaAdapter
from .numpy_ import NumpyAdapter
from .tensorflow_ import TensorflowAdapter, TensorflowEagerAdapter
from .torch_ import TorchAdapter, TorchCompileAdapter

ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls
    for cls in (
        NumpyAdapter,
        JaxAdapter,
        TorchAdapter,
        TensorflowAdapter,
        NumbaAdapter,
        CupyAdapter,
        JaxEagerAdapter,
        TorchCompileAdapter,
        TensorflowEagerAdapter,
    )
}
#: Set to 1 (tests do) to register the test-only fault adapters of ``faults.py``. Without
#: it a config that names one is refused like any unknown library.
TEST_ADAPTERS_ENV = "NUMBENCH_TEST_ADAPTERS"
if os.environ.get(TEST_ADAPTERS_ENV) == "1":
    from .faults import FAULT_ADAPTERS

    ADAPTERS.update({cls.name: cls for cls in FAULT_ADAPTERS})


def get(name: str) -> type[Adapter]:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown library {name!r}; known: {', '.join(ADAPTERS)}") from None


__all__ = [
    "ADAPTERS",
    "TEST_ADAPTERS_ENV",
    "Adapter",
    "Unavailable",
    "chosen_cpus",
    "cpu_model",
    "get",
    "pin_cpus",
    "thread_environment",
    "allocator_environment",
    "ALLOCATORS",
    "STEADY_MALLOC",
]
