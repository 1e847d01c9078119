"""results/versions.parquet: every cell of the config's ``environments`` against the base.

An environment (``numbench.config.environments``) runs some libraries with other versions
(or other variables). Each of its cells is a cell of the grid whose files lie under
``LIBRARY@NAME`` and whose rounds ran the environment's process and a process of the same
library in the base environment side by side (paired lockstep rounds, as a library's cell
runs beside the baseline). So both sides of the comparison come from the cell's own file:
rows of role ``measured`` are the environment's processes, rows of role ``baseline`` the
base environment's, and replicate i of both roles is one round. Each process row records
its ``library_version``, so the file names both versions too.

ratio = the environment's median time / the base environment's median time, over the pooled
samples of each side's processes (``numbench.stats.summarize``): above 1, the environment is
slower. Its 95% interval is the two-level bootstrap of ``numbench.stats.ratio_ci``, drawing
the same rounds on both sides where both have the same processes (``paired``), each side's
processes on their own otherwise.

The round floor is the speedups' (``numbench.analyse.speedups``): a cell has 2 to ``replicates.max`` rounds,
too few to measure its own round-to-round spread, so no paired interval is narrower, in log
terms, than ``1.96 * s0 / sqrt(rounds)``. ``s0`` is the typical round-to-round standard
deviation of the log ratio (``numbench.stats.typical_sd`` of the cells' round variances, each
with rounds - 1 degrees of freedom), measured over the paired cells of one environment on
one device with 2 or more rounds. ``ci_floor`` is a row's floor (relative half-width),
``floored`` whether it widened the bootstrap interval.

``change``: *slower* when the interval lies wholly above 1 **and** the ratio reaches the
``margin``; *faster* when it lies wholly below 1 and the ratio is at most 1 / margin
(``numbench.stats.verdict`` on the base's speedup over the environment, as
``numbench.compare.runs`` judges two result sets); *same* otherwise. A cell whose base
processes measured but whose environment's did not is *broken*; one whose base processes
did not measure is *not comparable* (its ``status`` is then the base's). ``settled``: the
floored interval holds neither the margin nor 1 / margin, so the change would differ only if
the ratio moved beyond its interval (``numbench.stats.verdict_settled``).

A cell that ended before its first round (an environment whose library does not import)
keeps one row in its file, its own failing process: the base's status and version are then
unknown from the file, and come from results/benchmarks.parquet's base cell when it is given.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from numbench.analyse.speedups import cell_seed, floored, round_floor
from numbench.cells import KEY, Cell
from numbench.contract import BASELINE, LATENCY, MEASURED, read_cell, write_atomic
from numbench.contract.conclusions import BROKEN, NOT_COMPARABLE, VERSIONS_SCHEMA
from numbench.spec import STATUSES
from numbench.stats import (
    SAME,
    check_margin,
    ratio_ci,
    round_variance,
    summarize,
    verdict,
    verdict_settled,
)

#: where a cell's file names start, for paths given below another folder
CELLS_FOLDER = "results/cells/"
#: the reason the supervisor records when a base process ended the pairing
#: (``numbench.measure.replicates.measure_replicates``)
PAIRING_ENDED = re.compile(r"the paired baseline process \([^)]*\) ended (\w+)")
BASE_KEY = list(KEY)


def environment_cell(path: str | os.PathLike) -> Cell:
    """The cell of an environment whose file is ``path`` (relative to the workflow's folder,
    or below any folder holding ``results/cells/``); ValueError for any other file."""
    text = Path(path).as_posix()
    start = text.rfind(CELLS_FOLDER)
    cell = Cell.from_path(text[start:] if start >= 0 else text)
    if not cell.environment:
        raise ValueError(f"{path} is a cell of the base environment, not of an environment")
    return cell


def _groups(table: pd.DataFrame, role: str) -> dict[int, np.ndarray]:
    """replicate -> latency samples of one role's process."""
    rows = table[(table["role"] == role) & (table["mode"] == LATENCY) & table["seconds"].notna()]
    return {int(rep): g["seconds"].to_numpy() for rep, g in rows.groupby("replicate")}


def _version(table: pd.DataFrame, role: str) -> str | None:
    values = sorted({str(v) for v in table.loc[table["role"] == role, "library_version"].dropna()})
    return ", ".join(values) if values else None


def _base_cells(benchmarks: pd.DataFrame | None) -> dict[tuple, dict]:
    """The base environment's cells of results/benchmarks.parquet, by their six fields."""
    if benchmarks is None or benchmarks.empty:
        return {}
    out = {}
    for r in benchmarks.to_dict("records"):
        key = tuple(r[c] for c in BASE_KEY)
        out.setdefault((*key[:3], int(key[3]), key[4], int(key[5])), r)
    return out


def base_status(table: pd.DataFrame, status: str, error, known: dict | None) -> str | None:
    """The base processes' status: ``ok`` where the file holds them (a failed base process
    ends the pairing and its rows are not kept), the one named by a pairing that ended,
    else the base cell's (``known``, from benchmarks.parquet), else None."""
    if (table["role"] == BASELINE).any():
        return "ok"
    ended = PAIRING_ENDED.search(error) if status == "ok" and isinstance(error, str) else None
    if ended:
        return ended.group(1) if ended.group(1) in STATUSES else "failed"
    return None if known is None else str(known["status"])


def read_side(path: str | os.PathLike, known: dict[tuple, dict]) -> dict:
    """One environment cell's identity, statuses, versions and samples per round."""
    cell = environment_cell(path)
    table = read_cell(path).to_pandas()
    first = table.iloc[0]
    key = (cell.library, cell.device, cell.operation, cell.size, cell.dtype, cell.threads)
    base = known.get(key)
    status, error = str(first["status"]), first["error"]
    base_version = _version(table, BASELINE)
    if base_version is None and base is not None and isinstance(base["library_version"], str):
        base_version = base["library_version"]
    return {
        "cell": cell,
        "host": first["host"],
        "env_status": status,
        "base_status": base_status(table, status, error, base),
        "error": None if pd.isna(error) else str(error),
        "version": _version(table, MEASURED),
        "base_version": base_version,
        "env": _groups(table, MEASURED) if status == "ok" else {},
        "base": _groups(table, BASELINE) if status == "ok" else {},
    }


def _change(side: dict, point: float, lo: float, hi: float, margin: float) -> str:
    if side["base_status"] is not None and side["base_status"] != "ok":
        return NOT_COMPARABLE
    if side["env_status"] != "ok":
        return BROKEN if side["base_status"] == "ok" else NOT_COMPARABLE
    if not np.isfinite(point):
        return NOT_COMPARABLE
    # the base's speedup over the environment: above 1, the environment is slower
    return verdict(1 / point, 1 / hi, 1 / lo, margin) if np.isfinite(lo) else SAME


def compute_versions(
    cell_paths: list[str | os.PathLike],
    margin: float,
    benchmarks: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per environment cell of ``cell_paths``, in VERSIONS_SCHEMA order.
    ``benchmarks`` (results/benchmarks.parquet, optional): the base cells' status and
    version, for the cells whose file does not hold their base processes."""
    margin = check_margin(margin, "margin")
    known = _base_cells(benchmarks)
    measured = []
    spreads: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for path in cell_paths:
        side = read_side(path, known)
        cell = side["cell"]
        env, base = side["env"], side["base"]
        paired = bool(env) and bool(base) and set(env) == set(base)
        env_groups = [env[k] for k in sorted(env)]
        base_groups = [base[k] for k in sorted(base)]
        seed = cell_seed((*cell.fields().values(), side["host"]))
        point = lo = hi = float("nan")
        if env_groups and base_groups and side["base_status"] == "ok":
            point, lo, hi = ratio_ci(env_groups, base_groups, paired=paired, seed=seed)
        if paired and np.isfinite(point) and len(env_groups) >= 2:
            spreads.setdefault((cell.environment, cell.device), []).append(
                round_variance(base_groups, env_groups)
            )
        medians = [
            summarize(g, seed=seed).median_s if g else None for g in (env_groups, base_groups)
        ]
        measured.append((side, paired, point, lo, hi, len(env_groups), medians))
    s0 = {group: round_floor(v) for group, v in spreads.items()}
    rows = []
    for side, paired, point, lo, hi, rounds, (median, base_median) in measured:
        cell = side["cell"]
        floor_sd = s0.get((cell.environment, cell.device), 0.0) if paired else 0.0
        new_lo, new_hi, floor = floored(point, lo, hi, floor_sd, rounds)
        widened = bool(new_lo < lo or new_hi > hi)
        lo, hi = new_lo, new_hi
        status = side["env_status"]
        if status == "ok" and side["base_status"] not in (None, "ok"):
            status = side["base_status"]
        rows.append(
            {
                "environment": cell.environment,
                "library": cell.library,
                "device": cell.device,
                "operation": cell.operation,
                "size": cell.size,
                "dtype": cell.dtype,
                "threads": cell.threads,
                "host": side["host"],
                "status": status,
                "base_status": side["base_status"],
                "error": side["error"],
                "version": side["version"],
                "base_version": side["base_version"],
                "median_s": median,
                "base_median_s": base_median,
                "ratio": None if np.isnan(point) else point,
                "ratio_ci_low": None if np.isnan(lo) else lo,
                "ratio_ci_high": None if np.isnan(hi) else hi,
                "rounds": rounds,
                "paired": paired,
                "ci_floor": floor,
                "floored": widened,
                "change": _change(side, point, lo, hi, margin),
                "margin": margin,
                "settled": verdict_settled(point, lo, hi, margin, 0.0),
            }
        )
    table = pa.Table.from_pylist(rows, schema=VERSIONS_SCHEMA)
    order = ["environment", "operation", "library", "device", "dtype", "threads", "size"]
    return table.to_pandas().sort_values(order, kind="stable", ignore_index=True)


def write_versions(
    cell_paths: list[str | os.PathLike],
    output: str | os.PathLike,
    margin: float,
    benchmarks: str | os.PathLike | None = None,
) -> pd.DataFrame:
    bench = None if benchmarks is None else pd.read_parquet(benchmarks)
    result = compute_versions(cell_paths, margin, bench)
    write_atomic(pa.Table.from_pandas(result, schema=VERSIONS_SCHEMA, preserve_index=False), output)
    return result
