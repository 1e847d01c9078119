"""The adapter registry: library name -> adapter class. Adding a library is one adapter
class here plus one builder per operation in ``numbench.operations``.

*Adapters from outside the package* are registered where ``NUMBENCH_ADAPTERS``
(``EXTRA_ADAPTERS_ENV``) names them: modules (``mypkg.adapters``) or ``.py`` files,
separated as in ``PATH``, each defining ``ADAPTERS``, a sequence of ``Adapter`` subclasses.
They are imported in the order named, after the built-in adapters, in every process that
imports the registry (the workflow, the cells' supervisors, their workers: a worker's
environment is the workflow's), so a module may read ``ADAPTERS`` as it stands, and a class
of a name already registered replaces that adapter. A file is imported as a module of its
own, named after its path. The test suite's adapters (``tests/adapters/``) come this way.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

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
#: Set to 1 by the tests: the test-only settings (``NUMBENCH_TEST_*``) are honoured only beside it
TEST_ADAPTERS_ENV = "NUMBENCH_TEST_ADAPTERS"


def setting_of_tests(variable: str, environ=os.environ) -> str | None:
    """The value of the test-only ``variable`` where a test run sets it (beside
    ``TEST_ADAPTERS_ENV=1``), stripped; None elsewhere, and where it is empty."""
    text = environ.get(variable, "").strip()
    return text if text and environ.get(TEST_ADAPTERS_ENV) == "1" else None


#: the modules or ``.py`` files of adapters from outside the package (the module's docstring)
EXTRA_ADAPTERS_ENV = "NUMBENCH_ADAPTERS"


def _import(entry: str) -> ModuleType:
    """The module ``entry`` names: a ``.py`` file (a module named after its path) or a module."""
    if not entry.endswith(".py"):
        return importlib.import_module(entry)
    path = Path(entry).resolve()
    name = "numbench_adapters_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def _register_extra(value: str) -> None:
    """Register the adapters of each module or file that ``value`` names."""
    for entry in (e.strip() for e in value.split(os.pathsep)):
        if not entry:
            continue
        where = f"{EXTRA_ADAPTERS_ENV}: {entry}"
        try:
            module = _import(entry)
        except Exception as exc:
            raise ImportError(f"{where} cannot be imported ({type(exc).__name__}: {exc})") from exc
        classes = getattr(module, "ADAPTERS", None)
        if classes is None:
            raise ImportError(f"{where} defines no ADAPTERS (a sequence of Adapter subclasses)")
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, Adapter)):
                raise TypeError(f"{where}: {cls!r} in its ADAPTERS is not an Adapter subclass")
            ADAPTERS[cls.name] = cls


_register_extra(os.environ.get(EXTRA_ADAPTERS_ENV, ""))


def get(name: str) -> type[Adapter]:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown library {name!r}; known: {', '.join(ADAPTERS)}") from None


__all__ = [
    "ADAPTERS",
    "EXTRA_ADAPTERS_ENV",
    "TEST_ADAPTERS_ENV",
    "setting_of_tests",
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
