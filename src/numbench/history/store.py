"""The history store on disk: two tables of Parquet files, added to and never rewritten, and
a results folder made into the store's runs, one run per host in it.

Layout (store format ``STORE_FORMAT``)::

    history/
      store.json                 {"format": 1, "numbench": "0.1.0"}: the store's format
      runs/<run_id>.parquet      one row: the run (``RUNS_SCHEMA``)
      cells/<run_id>.parquet     one row per cell of that run (``CELLS_SCHEMA``)

The two tables' columns, and what each means, are ``RUNS_SCHEMA`` and ``CELLS_SCHEMA`` below
(docs/results-history.md). Text that holds several values (the library versions, the roofs)
is JSON, so that every reader (pyarrow, pandas, DuckDB) reads the columns as they are.

Each table is a plain Parquet dataset, one file per run, so an add writes new files only and
pyarrow (``pq.read_table("history/cells")``), pandas (``pd.read_parquet``) or DuckDB
(``read_parquet('history/cells/*.parquet')``) read it as it is. The runs table is the store's
index: a run is in the store once its runs file is, and the cells of a run are those whose
``run_id`` is in the runs table.

- **Adding the same run twice adds nothing**: a run's id comes from its content
  (``run_id``), and its files are named by it; an add whose runs file exists writes
  nothing.
- **Two adds at once are safe**: no file is ever changed in place. Two adds of different runs
  write different files; two adds of the same run write the same names, each file whole,
  through a temporary name renamed into place (``numbench.contract.replacing``).
- **A write cut off halfway leaves the store as it was**: a file is visible only once whole
  (the temporary name starts with a dot and ends in ``.tmp``: no reader's ``*.parquet`` glob
  sees it), and the cells file is written before the runs file, so a run cut off between the
  two is not in the index; adding it again completes it.
- **A corrupt or foreign file is named and skipped**: ``read`` reads every other file and
  lists each skipped one with why in ``Store.skipped``.
- **A store written by a newer numbench is refused**, naming that numbench's version
  (``NewerStore``): its tables may mean something this one would misread.

A results folder is made into runs (``runs_of``) from the contract's tables only:
results/benchmarks.parquet (required), and where present speedups.parquet (the baseline
pairing, the verdicts' quality) and roofs.parquet (the roofs). A results folder into which an
offsite archive was imported (``numbench offsite import``, then the workflow's aggregation)
holds the other host's cells beside the local ones: each host becomes its own run. A run's id
is a hash of its cells' content (key, status, median, interval, when each started), so the
same results give the same id wherever and whenever they are added.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from numbench import __version__
from numbench.cells import KEY_WITH_HOST
from numbench.contract import key_fields, write_atomic, write_text_atomic
from numbench.contract.conclusions import in_doubt
from numbench.contract.facts import BUSY_CPU_TAKEN
from numbench.errors import CorruptFile
from numbench.roofline.contract import read_roofs

#: one row per run: one host's cells of one results folder
RUNS_SCHEMA = pa.schema(
    [
        # the run's id: a hash of its cells' content (``run_id``)
        pa.field("run_id", pa.string()),
        # when its first cell started and its last one started (ISO 8601, UTC)
        pa.field("started_at", pa.string()),
        pa.field("finished_at", pa.string()),
        # when it was added to the store, and by which numbench (version, git commit)
        pa.field("added_at", pa.string()),
        pa.field("numbench_version", pa.string()),
        pa.field("numbench_commit", pa.string()),
        # a hash of the grid's settings as the cells recorded them: cell keys, parameters,
        # the operations' code, timing, replicate and allocator settings, pairing
        pa.field("config_hash", pa.string()),
        # every library's version, as JSON {"numpy": "2.4.0", ...}
        pa.field("library_versions", pa.string()),
        # the host's fingerprint
        pa.field("host", pa.string()),
        pa.field("cpu_model", pa.string()),
        pa.field("cpu_count", pa.int64()),
        pa.field("ram_gb", pa.float64()),
        pa.field("kernel", pa.string()),
        pa.field("platform", pa.string()),
        pa.field("python_version", pa.string()),
        # the CPU frequency governor, read when the run is added on the host that measured
        # it (null elsewhere, or where it cannot be read)
        pa.field("governor", pa.string()),
        # the run's roofs (results/roofs.parquet, its ok rows), as JSON; null without roofs
        pa.field("roofs", pa.string()),
        # the run's quality: cells, ok cells, unstable cells, cells measured on a busy
        # machine; verdicts over the baseline, those in doubt, and the predicted share a
        # rerun repeats (mean of speedups.parquet's repeat_chance); null without speedups
        pa.field("cells", pa.int64()),
        pa.field("cells_ok", pa.int64()),
        pa.field("cells_unstable", pa.int64()),
        pa.field("cells_busy", pa.int64()),
        pa.field("verdicts", pa.int64()),
        pa.field("verdicts_in_doubt", pa.int64()),
        pa.field("predicted_repeat", pa.float64()),
        # the sentinel's spread through the run: the slowest cell's sentinel_s over the
        # fastest's (numbench.measure.activity.time_sentinel); null below two cells that timed it, and in
        # a run added before it was kept (ADDED_LATER)
        pa.field("sentinel_spread", pa.float64()),
    ]
)

#: one row per cell of a run
CELLS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        *key_fields(KEY_WITH_HOST),
        pa.field("status", pa.string()),
        pa.field("library_version", pa.string()),
        # the median time per call and its 95% interval (benchmarks.parquet)
        pa.field("median_s", pa.float64()),
        pa.field("ci_low_s", pa.float64()),
        pa.field("ci_high_s", pa.float64()),
        pa.field("n_samples", pa.int64()),
        # processes the statistics pool (``n_processes``) and rounds of the cell's own
        # library that ran (``replicates`` of benchmarks.parquet)
        pa.field("replicates", pa.int64()),
        pa.field("rounds", pa.int64()),
        pa.field("unstable", pa.bool_()),
        pa.field("process_spread", pa.float64()),
        pa.field("cpu_taken", pa.float64()),
        pa.field("started_at", pa.string()),
        # the baseline pairing: the baseline run beside the cell, and its speedup over the
        # baseline with the interval and verdict (speedups.parquet; null without)
        pa.field("paired_with", pa.string()),
        pa.field("paired", pa.bool_()),
        pa.field("speedup", pa.float64()),
        pa.field("speedup_ci_low", pa.float64()),
        pa.field("speedup_ci_high", pa.float64()),
        pa.field("verdict", pa.string()),
    ]
)
#: a cell's series in the store: its key on its host
SERIES_KEY = list(KEY_WITH_HOST)

#: columns added to the tables after the store's format was fixed: a file written before
#: them reads with them null, instead of being skipped for lacking them
ADDED_LATER = frozenset({"sentinel_spread"})

#: the format this numbench writes and the newest it reads
STORE_FORMAT = 1
#: the store's own description, at its top
STORE_FILE = "store.json"
RUNS, CELLS = "runs", "cells"
#: what every file of the store carries in its Parquet metadata
FORMAT_KEY = b"numbench.history.format"
VERSION_KEY = b"numbench.version"
#: the most bytes of store.json read (it holds two short fields)
MAX_STORE_FILE_BYTES = 4096


class HistoryError(Exception):
    """A store or a results folder that cannot be used; the message names it and why."""


class NewerStore(HistoryError):
    """The store (or one of its files) was written by a newer numbench."""


@dataclass
class Store:
    """What ``read`` found: the runs (one row each, oldest first) and their cells, and every
    file it skipped, each as "path: why"."""

    runs: pd.DataFrame
    cells: pd.DataFrame
    skipped: list[str] = field(default_factory=list)


def _newer(where: str | os.PathLike, fmt: int, version: str) -> NewerStore:
    return NewerStore(
        f"{where} was written by numbench {version} (history store format {fmt}); this "
        f"numbench {__version__} reads format {STORE_FORMAT} and older: upgrade numbench "
        "to read it"
    )


def check_format(folder: str | os.PathLike) -> None:
    """Raise ``NewerStore`` when ``folder``'s store.json says a newer format, or
    ``HistoryError`` when it cannot be read; a folder without one is a new store."""
    path = Path(folder) / STORE_FILE
    if not path.exists():
        return
    try:
        with open(path, "rb") as fh:
            described = json.loads(fh.read(MAX_STORE_FILE_BYTES))
        fmt, version = int(described["format"]), str(described["numbench"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HistoryError(
            f"{path} is not a numbench history store's description ({type(exc).__name__}: "
            f"{exc}); is {folder} a numbench history folder?"
        ) from None
    if fmt > STORE_FORMAT:
        raise _newer(folder, fmt, version)


def _stamped(table: pa.Table) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[FORMAT_KEY] = str(STORE_FORMAT).encode()
    meta[VERSION_KEY] = __version__.encode()
    return table.replace_schema_metadata(meta)


def add(folder: str | os.PathLike, run: pa.Table, cells: pa.Table) -> bool:
    """Add one run (``run``: its one row, ``cells``: its cells) to the store in ``folder``;
    True if it was added, False if it was there already. The cells file is written before
    the runs file that makes the run visible (see the module's notes)."""
    if run.num_rows != 1:
        raise ValueError(f"a run is one row, not {run.num_rows}")
    folder = Path(folder)
    check_format(folder)
    if not (folder / STORE_FILE).exists():
        described = {"format": STORE_FORMAT, "numbench": __version__}
        write_text_atomic(json.dumps(described) + "\n", folder / STORE_FILE)
    run_id = run.column("run_id")[0].as_py()
    run_file = folder / RUNS / f"{run_id}.parquet"
    if run_file.exists():
        return False
    write_atomic(_stamped(cells.cast(CELLS_SCHEMA)), folder / CELLS / f"{run_id}.parquet")
    write_atomic(_stamped(run.cast(RUNS_SCHEMA)), run_file)
    return True


def _read_one(path: Path, schema: pa.Schema) -> pa.Table:
    """One file of the store, checked; raise ``HistoryError`` (why) if it is not usable, or
    ``NewerStore`` if a newer numbench wrote it."""
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error: the file is unusable
        raise HistoryError(f"not readable as Parquet ({type(exc).__name__}: {exc})") from None
    meta = table.schema.metadata or {}
    if FORMAT_KEY not in meta:
        raise HistoryError("not a file of a numbench history store (no store format in it)")
    try:
        fmt = int(meta[FORMAT_KEY])
    except ValueError:
        raise HistoryError(f"its store format {meta[FORMAT_KEY]!r} is not a number") from None
    if fmt > STORE_FORMAT:
        raise _newer(path, fmt, meta.get(VERSION_KEY, b"?").decode(errors="replace"))
    for name in ADDED_LATER & set(schema.names) - set(table.column_names):
        table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise HistoryError(f"it lacks the columns {missing}")
    try:
        table = table.select(schema.names).cast(schema)
    except Exception as exc:  # noqa: BLE001 - wrong column types: unusable as well
        raise HistoryError(f"its columns have the wrong types ({exc})") from None
    if set(table.column("run_id").to_pylist()) != {path.stem}:
        raise HistoryError(f"its rows are not all of run {path.stem}, the run its name gives")
    return table


def _read_table(folder: Path, schema: pa.Schema, skipped: list[str]) -> pa.Table:
    """Every usable file of one table; each file skipped is named in ``skipped``. The
    temporary files of a write in progress (names starting with a dot) are not the table's."""
    tables = []
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.name.startswith((".", "_")):
                continue
            if path.suffix != ".parquet" or not path.is_file():
                skipped.append(f"{path}: not a Parquet file of the store")
                continue
            try:
                tables.append(_read_one(path, schema))
            except NewerStore:
                raise
            except HistoryError as exc:
                skipped.append(f"{path}: {exc}")
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def read(folder: str | os.PathLike) -> Store:
    """The store in ``folder``: its runs (oldest first) and their cells. A missing folder is
    an empty store; a newer one raises ``NewerStore``."""
    folder = Path(folder)
    check_format(folder)
    skipped: list[str] = []
    runs = _read_table(folder / RUNS, RUNS_SCHEMA, skipped).to_pandas()
    cells = _read_table(folder / CELLS, CELLS_SCHEMA, skipped).to_pandas()
    runs = runs.sort_values(["started_at", "run_id"], kind="stable").reset_index(drop=True)
    cells = cells[cells["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    return Store(runs=runs, cells=cells, skipped=skipped)


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
