"""The history: every finished run kept, across runs, hosts and upgrades (issue 40).

``store`` keeps the runs and their cells as an append-only Parquet dataset beside results/
(the config's ``history.folder``), says the two tables' columns and makes a results folder
into the store's rows; ``changes`` finds where each cell's series stepped; ``views`` words
the store for the ``numbench history`` commands and runs them. The gate that judges two runs
against each cell's own run-to-run spread in the store (``numbench compare --history``) is
``numbench.compare.gate``. It reads results through the contract's tables only, so it sits
above the three stages and imports none of them.
"""

from __future__ import annotations

import os

from numbench.history.store import HistoryError, NewerStore, Store, add, read, runs_of

__all__ = ["HistoryError", "NewerStore", "Store", "add", "add_results", "read"]


def add_results(results: str | os.PathLike, folder: str | os.PathLike) -> list[dict]:
    """Add a results folder's runs (one per host) to the store in ``folder``; for each, its
    id, host and whether it was added (False: it was in the store already)."""
    done = []
    for run, cells in runs_of(results):
        added = add(folder, run, cells)
        row = run.to_pylist()[0]
        done.append({"run_id": row["run_id"], "host": row["host"], "added": added})
    return done
