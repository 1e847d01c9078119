"""Test-only adapters that make every operation misbehave, one way each.

They exist to prove that a fault costs exactly its cell and says what happened. Each one is
NumPy (family ``numpy``, CPU only) whose compiled function misbehaves when called, so the
fault happens inside the timed call, where a real library's would:

- ``fault-raise``: raises ``RuntimeError`` -> ``failed``, the message kept.
- ``fault-crash``: the worker kills itself with SIGSEGV -> ``crashed``, the signal named.
- ``fault-hang``: sleeps forever -> ``timeout`` after ``cell_timeout_s``.
- ``fault-oom``: allocates and touches memory until it runs out -> ``crashed`` (killed by the
  supervisor past ``cell_memory_limit_mb``) or, with no limit, ``failed`` with a MemoryError,
  both said as out of memory. A safety cap (``NUMBENCH_FAULT_OOM_CAP_MB``, default 512 MB
  of address space over what the worker holds) keeps it from taking the host's memory.
- ``fault-wrong``: returns a wrong result -> ``mismatch``.
- ``fault-import``: imports a module that does not exist -> ``unavailable``, the import
  error kept.

They are never in the default libraries; name them in a test config's ``libraries``. They are
registered where ``NUMBENCH_ADAPTERS`` names this file (``numbench.libraries``; the suite's
conftest does, for itself and every process it starts).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from numbench.libraries.numpy_ import NumpyAdapter

OOM_CAP_ENV = "NUMBENCH_FAULT_OOM_CAP_MB"
OOM_CHUNK_MB = 16


class FaultAdapter(NumpyAdapter):
    """NumPy whose every operation misbehaves in ``misbehave``."""

    test_only = True
    fault = ""

    def compile(self, fn: Callable, **options) -> Callable:
        def faulty(*args):
            return self.misbehave(fn, args)

        return faulty

    def misbehave(self, fn: Callable, args: tuple):
        raise NotImplementedError


class RaiseAdapter(FaultAdapter):
    name = "fault-raise"
    description = "test only: every call raises RuntimeError (failed)"

    def misbehave(self, fn, args):
        raise RuntimeError(f"{self.name}: injected failure")


class CrashAdapter(FaultAdapter):
    name = "fault-crash"
    description = "test only: every call dies by SIGSEGV (crashed)"

    def misbehave(self, fn, args):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the workdir
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(60)  # the signal is delivered before this returns


class HangAdapter(FaultAdapter):
    name = "fault-hang"
    description = "test only: every call sleeps forever (timeout)"

    def misbehave(self, fn, args):
        while True:
            time.sleep(3600)


class OomAdapter(FaultAdapter):
    name = "fault-oom"
    description = "test only: every call allocates memory until it runs out (out of memory)"

    def misbehave(self, fn, args):
        import resource

        cap_mb = float(os.environ.get(OOM_CAP_ENV, "512"))
        with open("/proc/self/statm", encoding="ascii") as fh:
            vm_bytes = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = vm_bytes + int(cap_mb * 2**20)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        hoard = []
        while True:
            hoard.append(self._np.ones(OOM_CHUNK_MB * 2**17))  # touched: counts in RSS


class WrongAdapter(FaultAdapter):
    name = "fault-wrong"
    description = "test only: every call returns a wrong result (mismatch)"

    def misbehave(self, fn, args):
        result = fn(*args)
        if isinstance(result, (tuple, list)):
            return tuple(2 * r + 1 for r in result)
        return 2 * result + 1


class ImportFailAdapter(FaultAdapter):
    name = "fault-import"
    module = "numbench_fault_no_such_module"
    description = "test only: the library fails to import (unavailable)"

    def load(self) -> None:
        import importlib

        importlib.import_module(self.module)


#: the adapters the registry takes from this file (``NUMBENCH_ADAPTERS``)
ADAPTERS: tuple[type[FaultAdapter], ...] = (
    RaiseAdapter,
    CrashAdapter,
    HangAdapter,
    OomAdapter,
    WrongAdapter,
    ImportFailAdapter,
)
