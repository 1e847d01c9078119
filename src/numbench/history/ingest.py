"""A results folder made into runs of the history store: one run per host in it.

It reads the contract's tables only: results/benchmarks.parquet (required), and where present
speedups.parquet (the baseline pairing, the verdicts' quality) and roofs.parquet (the roofs).
A results folder into which an offsite archive was imported (``numbench offsite import``, then
the workflow's aggregation) holds the other host's cells beside the local ones: each host
becomes its own run.

A run's id is a hash of its cells' content (key, status, median, interval, when each
started), so the same results give the same id wherever and whenever they are added.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import socket
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from numbench import __version__
from numbench.cells import KEY_WITH_HOST
from numbench.contract.conclusions import in_doubt
from numbench.contract.facts import BUSY_CPU_TAKEN
from numbench.errors import CorruptFile
from numbench.history.store import CELLS_SCHEMA, RUNS_SCHEMA, HistoryError
from numbench.roofline.contract import read_roofs

#: hex digits of a run's id (64 bits)
RUN_ID_CHARS = 16
#: the columns a benchmarks table must have to be added
NEEDED = [*KEY_WITH_HOST, "status", "median_s", "ci_low_s", "ci_high_s", "started_at"]
#: the columns of a cell's content its run's id is made from
IDENTITY = [*KEY_WITH_HOST, "status", "median_s", "ci_low_s", "ci_high_s", "started_at"]
#: the columns of the grid's settings the config hash is made from (those the table has)
SETTINGS = [
    *KEY_WITH_HOST[:-1],
    "params",
    "operation_hash",
    "timing_settings",
    "replicate_settings",
    "allocator",
    "paired_with",
    "lockstep",
]
#: the speedups' columns kept with each cell
PAIRING = ["paired", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict"]
#: where Linux says the CPU frequency governor
GOVERNOR_FILE = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
#: the kernel release inside Python's ``platform.platform()`` ("Linux-6.1.0-x86_64-with-...")
KERNEL_PATTERN = re.compile(r"^[A-Za-z]+-(.+?)-(?:x86_64|aarch64|arm64|ppc64le|s390x|i[3-6]86)")


def _read(path: Path, what: str) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader error: the file is unusable
        raise HistoryError(f"cannot read {what} {path}: {type(exc).__name__}: {exc}") from None


def load_benchmarks(results: Path) -> pd.DataFrame:
    """The benchmarks table of a results folder, checked for what the history keeps."""
    path = results / "benchmarks.parquet"
    if not results.is_dir():
        raise HistoryError(f"{results} is not a folder: name a numbench results/ folder")
    if not path.exists():
        raise HistoryError(
            f"{results} has no benchmarks.parquet: is it a numbench results/ folder? After "
            "`numbench offsite import`, run the workflow (snakemake) to aggregate the cells"
        )
    return read_benchmarks(path)


def read_benchmarks(path: Path) -> pd.DataFrame:
    """A benchmarks table (results/benchmarks.parquet), checked for what the history keeps."""
    bench = _read(path, "the benchmarks table")
    missing = [c for c in NEEDED if c not in bench.columns]
    if missing:
        raise HistoryError(f"{path} is not a numbench benchmarks table: it lacks {missing}")
    if bench.empty:
        raise HistoryError(f"{path} holds no cells")
    if bench["host"].isna().any():
        raise HistoryError(f"{path} has cells without a host")
    return bench


def _hash(rows: pd.DataFrame) -> str:
    text = rows.to_json(orient="values", double_precision=15, date_format="iso")
    return hashlib.sha256(text.encode()).hexdigest()[:RUN_ID_CHARS]


def run_id(cells: pd.DataFrame) -> str:
    """The id of one host's cells: a hash of their content, in key order."""
    return _hash(cells[IDENTITY].sort_values(list(KEY_WITH_HOST), kind="stable"))


def config_hash(cells: pd.DataFrame) -> str:
    """A hash of the grid's settings as the cells recorded them (``SETTINGS``)."""
    columns = [c for c in SETTINGS if c in cells.columns]
    return _hash(cells[columns].astype(str).sort_values(columns, kind="stable"))


def numbench_commit() -> str | None:
    """The git commit of this numbench's sources, where they are a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def governor(host: str) -> str | None:
    """The CPU frequency governor, read on the host that measured the run only."""
    if host != socket.gethostname():
        return None
    try:
        return GOVERNOR_FILE.read_text(encoding="utf-8").strip()[:64] or None
    except OSError:
        return None


def _first(cells: pd.DataFrame, column: str):
    values = cells[column].dropna() if column in cells.columns else pd.Series([], dtype=object)
    return None if values.empty else values.mode().iloc[0]


def library_versions(cells: pd.DataFrame) -> str:
    """Every library's version, as JSON; a library measured with several reads "a, b"."""
    versions = {}
    for library, group in cells.groupby("library", sort=True):
        found = sorted(set(group["library_version"].dropna().astype(str)))
        if found:
            versions[str(library)] = ", ".join(found)
    return json.dumps(versions, sort_keys=True)


def roofs_json(results: Path, host: str) -> str | None:
    """The host's ok roofs of results/roofs.parquet as JSON, or None without the file. Each
    row keeps its ``round`` (``start``, ``end``: a roof measured before and after the cells
    is two rows); a table from before the rounds has it null."""
    path = results / "roofs.parquet"
    if not path.exists():
        return None
    try:
        roofs = read_roofs(path).to_pandas()
    except CorruptFile as exc:
        raise HistoryError(str(exc)) from None
    ok = roofs[(roofs["host"] == host) & (roofs["status"] == "ok")]
    keep = ["device", "dtype", "threads", "roof", "round", "value", "unit"]
    kept = ok[keep].astype(object)
    # a missing value (a round before the rounds) is JSON's null, not NaN (no JSON at all)
    return json.dumps(kept.where(kept.notna(), None).to_dict(orient="records"), allow_nan=False)


def sentinel_spread(cells: pd.DataFrame) -> float | None:
    """The slowest cell's ``sentinel_s`` over the fastest's; None below two cells."""
    if "sentinel_s" not in cells:
        return None
    times = pd.to_numeric(cells["sentinel_s"], errors="coerce").dropna()
    times = times[times > 0]
    return float(times.max() / times.min()) if len(times) > 1 else None


def quality(cells: pd.DataFrame, speedups: pd.DataFrame | None) -> dict:
    """The run's quality figures (``RUNS_SCHEMA``)."""
    taken = cells["cpu_taken"] if "cpu_taken" in cells else pd.Series(np.nan, index=cells.index)
    unstable = cells["unstable"] if "unstable" in cells else pd.Series(False, index=cells.index)
    figures = {
        "cells": len(cells),
        "cells_ok": int((cells["status"] == "ok").sum()),
        "cells_unstable": int(unstable.fillna(False).astype(bool).sum()),
        "cells_busy": int((taken.astype(float) > BUSY_CPU_TAKEN).sum()),
        "verdicts": None,
        "verdicts_in_doubt": None,
        "predicted_repeat": None,
        "sentinel_spread": sentinel_spread(cells),
    }
    if speedups is not None and not speedups.empty:
        chance = speedups.get("repeat_chance", pd.Series(dtype=float)).dropna()
        figures["verdicts"] = len(speedups)
        figures["verdicts_in_doubt"] = int(in_doubt(speedups).sum())
        figures["predicted_repeat"] = float(chance.mean()) if len(chance) else None
    return figures


def _kernel(platform: str | None) -> str | None:
    match = KERNEL_PATTERN.match(platform or "")
    return match.group(1) if match else None


def run_row(results: Path, cells: pd.DataFrame, speedups: pd.DataFrame | None) -> dict:
    """The runs table's row of one host's cells."""
    host = str(cells["host"].iloc[0])
    started = cells["started_at"].dropna().astype(str)
    platform = _first(cells, "platform")
    cpu_count, ram_gb = _first(cells, "cpu_count"), _first(cells, "ram_gb")
    return {
        "run_id": run_id(cells),
        "started_at": started.min() if len(started) else None,
        "finished_at": started.max() if len(started) else None,
        "added_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "numbench_version": __version__,
        "numbench_commit": numbench_commit(),
        "config_hash": config_hash(cells),
        "library_versions": library_versions(cells),
        "host": host,
        "cpu_model": _first(cells, "cpu_model"),
        "cpu_count": None if cpu_count is None else int(cpu_count),
        "ram_gb": None if ram_gb is None else float(ram_gb),
        "kernel": _kernel(platform),
        "platform": platform,
        "python_version": _first(cells, "python_version"),
        "governor": governor(host),
        "roofs": roofs_json(results, host),
        **quality(cells, speedups),
    }


def cells_table(rid: str, cells: pd.DataFrame, speedups: pd.DataFrame | None) -> pa.Table:
    """The cells table's rows of one host's cells, with their baseline pairing."""
    out = cells.copy()
    out["run_id"] = rid
    out["rounds"] = out["replicates"] if "replicates" in out else None
    out["replicates"] = out["n_processes"] if "n_processes" in out else None
    if speedups is not None and not speedups.empty:
        keep = [c for c in PAIRING if c in speedups.columns]
        pairing = speedups[list(KEY_WITH_HOST) + keep].drop_duplicates(list(KEY_WITH_HOST))
        out = out.merge(pairing, on=list(KEY_WITH_HOST), how="left")
    for name in CELLS_SCHEMA.names:
        if name not in out.columns:
            out[name] = None
    out = out[CELLS_SCHEMA.names].sort_values(list(KEY_WITH_HOST), kind="stable")
    out = out.astype(object).where(out.notna(), None)
    return pa.Table.from_pandas(out, schema=CELLS_SCHEMA, preserve_index=False)


def runs_of(results: str | os.PathLike) -> list[tuple[pa.Table, pa.Table]]:
    """(run, cells) for each host of a results folder, as the store's tables."""
    results = Path(results)
    bench = load_benchmarks(results)
    speedups_path = results / "speedups.parquet"
    speedups = _read(speedups_path, "the speedups") if speedups_path.exists() else None
    made = []
    for host, cells in bench.groupby("host", sort=True):
        own = None
        if speedups is not None and "host" in speedups.columns:
            own = speedups[speedups["host"] == host]
        cells = cells.reset_index(drop=True)
        row = run_row(results, cells, own)
        run = pa.Table.from_pylist([row], schema=RUNS_SCHEMA)
        made.append((run, cells_table(row["run_id"], cells, own)))
    return made
