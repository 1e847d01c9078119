"""What a timing job's entry point does first (``scripts/run_cell.py``), before it holds the
host's timing lock: nothing that takes CPU time.

With ``--cores`` above 1, Snakemake may start the next timing job while a cell measures; its
process then waits for the host's timing lock beside the cell. Whatever it does before it
holds the lock runs beside the cell being timed: importing NumPy, pyarrow or a library,
loading an operation or reading files would take CPU time there, on any CPU, the worker's
too. So the entry point imports only this module, ``numbench.measure.host_lock`` and the
spec (the standard library and numbench's own light modules), takes the lock, and only then
imports the supervisor and what it needs. The lock is waited for asleep: a blocking ``flock``
(``host_lock._take``), no polling.

This module imports nothing beyond the standard library.
"""

from __future__ import annotations

import importlib.abc
import signal
import sys

#: the exit status of a job stopped by SIGTERM (128 + 15, as a shell reports one killed by it)
TERMINATED_EXIT = 143


class _NoPandas(importlib.abc.MetaPathFinder):
    """Makes ``import pandas`` fail in the supervisor, as if pandas were not installed.

    The supervisor never uses pandas, but pyarrow imports it lazily the first time it builds
    an array (to check whether the input is a DataFrame): a quarter of a second per cell spent
    on nothing. pyarrow treats a failed import as "no pandas" and carries on.
    """

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"the cell supervisor does not load {name}", name=name)
        return None


def keep_pandas_out() -> None:
    """Install ``_NoPandas`` (in the supervisor's own process only: the entry point calls it)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def _terminated(signum, frame) -> None:
    raise SystemExit(TERMINATED_EXIT)


def exit_on_sigterm() -> None:
    """Make SIGTERM end the job as ``SystemExit(TERMINATED_EXIT)`` (the entry point calls
    it): the default ends the process at once, so the workflow's processes would keep the
    narrowed CPUs (``numbench.measure.apart``); raised, it unwinds the job's context
    managers, which give them back and let go of the timing lock (or stop waiting for it).
    SIGKILL cannot be caught."""
    signal.signal(signal.SIGTERM, _terminated)
