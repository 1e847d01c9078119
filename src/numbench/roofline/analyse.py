"""Each cell as a share of what its host can do: its place on the roofline.

A cell's cost model gives its flops and the fewest bytes it must move; their ratio is its
``arithmetic_intensity``. Its ``attainable_gflop_per_s`` is ``min(compute roof, intensity x
bandwidth roof)``, and ``roof_fraction`` is what it reached (``gflop_per_s``) over that;
``roof`` names the roof it was held against (``l2``, ``l3``, ``dram`` or ``compute``).

Which bandwidth roof: the one of the cache its working set (those fewest bytes) fits in,
by the caches' sizes the roofs rule read from the system (``numbench.roofline.contract.resident_level``).
A roof measured more than once (the roofs table holds several ``ok`` rows of it) is the best
of them, and ``roof_spread`` gives the best over the worst. A cell is never drawn above its
roof as a win. A cell past 100% of its roof is either:

* ``cache-resident``: its working set is within ``PARTLY_RESIDENT_FACTOR`` times a faster
  cache (a repeated call finds part of its data still there): it is held against that
  cache's roof instead, and says so; a cell whose working set fits a cache from the start
  is held against that cache's roof and says so too;
* ``within noise``: still past its roof, by no more than ``ROOF_NOISE_FACTOR`` (a median
  against a roof that is the best of a few trials on a noisy machine);
* ``roof measured low``: past the compute roof by more than that, for an operation whose
  flop count is exact (``flops_exact``: matmul's 2 n^3): the cost model cannot be wrong,
  so the roof is (measured at a disturbed moment, or by a kernel slower than the library's);
* ``streams like a copy``: past a bandwidth roof (a triad's) by more than that, but within
  noise of what the copy measured beside it reaches (``copy_value``, ``copy_share``): the
  cell moves its bytes as a large copy does, its stores past the cache (no write-allocate
  read), which the triad's stores are not;
* ``cost-model error``: past its roof by more than that where the model can be wrong: a
  flop count that is an estimate, or a bandwidth roof (the fewest bytes are the model's
  own count), and past the copy's as well: the operation counts flops it does not do, or
  bytes it does not need (or the roof is wrong; the roofs table says how it was measured).

An operation with bytes but no flop count (a sort: its work is comparisons, not
floating-point arithmetic) is ``placed by its bytes``: held against the bandwidth roof of its
working set by its GB/s (``roof_fraction`` = ``gb_per_s`` over that roof), with no
intensity, and so left off the charts. A cell without a cost model, without a time, or
from a host whose roofs were not measured has nulls (with a note for the last).

What the roofline says about each operation, as typed facts (``numbench.contract.facts``,
``roofline_findings``): for each (host, device, dtype, threads) and operation, the fastest
library at the largest size that has a place on the roofline, its share of its roof, and
whether memory or arithmetic bounds it (the roof it was held against). Where a memory-bound
cell reaches less than ``LOW_DRAM_SHARE`` of the DRAM roof and its output is large enough to
be fresh memory on every call, the finding carries what the roofs rule measured about first
touching fresh memory (``first_touch_s_per_gb``, page faults per MiB): an estimate of how
much of the cell's time that takes, from a measurement of this host, not a guess. The
output's bytes are those the cell's worker recorded (``output_bytes``): an operation of the
user's own needs no loading here to have its estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from numbench.cells import SETTING
from numbench.libraries.base import STEADY_MALLOC
from numbench.roofline.contract import (
    BANDWIDTH_ROOFS,
    CACHE_RESIDENT,
    COMPUTE_ROOF,
    COST_MODEL_ERROR,
    LOW_DRAM_SHARE,
    PLACED_BY_BYTES,
    ROOF_MEASURED_LOW,
    ROOF_NOISE_FACTOR,
    STREAMS_LIKE_COPY,
    WITHIN_NOISE,
    FirstTouch,
    RoofFinding,
    resident_level,
)

#: a working set within this many times a cache's size may still find part of itself there
#: on a repeated call (STREAM's arrays are four times the last-level cache for this reason)
PARTLY_RESIDENT_FACTOR = 4
NO_ROOFS = "no roofs measured for this host, device, dtype and threads"
ROOF_COLUMNS = (
    "arithmetic_intensity",
    "attainable_gflop_per_s",
    "roof_fraction",
    "roof",
    "roof_note",
)


@dataclass(frozen=True)
class RoofSet:
    """The measured roofs of one (host, device, dtype, threads)."""

    bandwidth_gb_per_s: dict[str, float] = field(default_factory=dict)
    compute_gflop_per_s: float | None = None
    cache_bytes: dict[str, int] = field(default_factory=dict)
    #: roof -> its best measurement over its worst, where it was measured more than once
    spread: dict[str, float] = field(default_factory=dict)
    #: bandwidth roof -> the best copy measured beside its triad (``copy_value``)
    copy_gb_per_s: dict[str, float] = field(default_factory=dict)

    def bandwidth_for(self, level: str) -> tuple[str, float] | None:
        """The roof of ``level``, or of the next slower level measured (an L3 roof left out
        where the L3 is barely larger than the L2s: the DRAM roof instead)."""
        for name in BANDWIDTH_ROOFS[BANDWIDTH_ROOFS.index(level) :]:
            if name in self.bandwidth_gb_per_s:
                return name, self.bandwidth_gb_per_s[name]
        return None


def _number(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def roof_sets(roof_rows) -> dict[tuple, RoofSet]:
    """(host, device, dtype, threads) -> its roofs, from the roofs table's rows (dicts);
    only rows that measured (``ok``) count. A roof with several such rows (measured more
    than once through the run) is the best of them, and its spread is kept; so is the best
    copy beside a bandwidth roof."""
    measured: dict[tuple, dict[str, list[float]]] = {}
    copies: dict[tuple, dict[str, float]] = {}
    caches: dict[tuple, dict[str, int]] = {}
    for row in roof_rows:
        key = (row["host"], row["device"], row["dtype"], int(row["threads"]))
        levels = {k: int(row[f"{k}_bytes"]) for k in ("l2", "l3") if _number(row.get(f"{k}_bytes"))}
        caches.setdefault(key, levels)
        value = _number(row.get("value"))
        if row.get("status") != "ok" or value is None:
            continue
        if row["roof"] in (*BANDWIDTH_ROOFS, COMPUTE_ROOF):
            measured.setdefault(key, {}).setdefault(row["roof"], []).append(value)
        copy = _number(row.get("copy_value"))
        if copy is not None and row["roof"] in BANDWIDTH_ROOFS:
            mine = copies.setdefault(key, {})
            mine[row["roof"]] = max(copy, mine.get(row["roof"], copy))
    sets = {}
    for key, levels in caches.items():
        values = measured.get(key, {})
        best = {roof: max(v) for roof, v in values.items()}
        compute = best.pop(COMPUTE_ROOF, None)
        spread = {roof: max(v) / min(v) for roof, v in values.items() if len(v) > 1 and min(v) > 0}
        sets[key] = RoofSet(best, compute, levels, spread, copies.get(key, {}))
    return sets


def _held(intensity: float, level_roof, compute: float | None) -> tuple[str, float]:
    """(roof, attainable GFLOP/s) of one bandwidth roof and the compute roof."""
    if level_roof is None:
        return COMPUTE_ROOF, compute
    level, gb_per_s = level_roof
    memory = intensity * gb_per_s
    if compute is not None and compute < memory:
        return COMPUTE_ROOF, compute
    return level, memory


def _against(intensity, bytes_moved, achieved, roofs: RoofSet, compute) -> tuple:
    """(roof, attainable, note) of a cell of this intensity and working set that reached
    ``achieved`` (None: not timed): past a bandwidth roof, a faster cache that still holds
    part of the working set is tried. ``compute`` None: bandwidth alone (a cell placed by
    its bytes, intensity 1, attainable in GB/s). None where no roof applies."""
    level_roof = roofs.bandwidth_for(resident_level(bytes_moved, roofs.cache_bytes))
    if level_roof is None and compute is None:
        return None
    roof, attainable = _held(intensity, level_roof, compute)
    note = CACHE_RESIDENT if roof in ("l2", "l3") else None
    if achieved is not None and achieved > attainable and roof != COMPUTE_ROOF:
        for faster in reversed(BANDWIDTH_ROOFS[: BANDWIDTH_ROOFS.index(roof)]):
            size = roofs.cache_bytes.get(faster)
            if not size or bytes_moved > PARTLY_RESIDENT_FACTOR * size:
                continue
            if faster not in roofs.bandwidth_gb_per_s:
                continue
            candidate = (faster, roofs.bandwidth_gb_per_s[faster])
            roof, attainable = _held(intensity, candidate, compute)
            note = CACHE_RESIDENT
            if achieved <= attainable:
                break
    return roof, attainable, note


def copy_share(roof, intensity, achieved, roofs: RoofSet, by_bytes: bool) -> float | None:
    """What a cell held against the bandwidth roof ``roof`` reached (``achieved``: GFLOP/s,
    or GB/s ``by_bytes``) over what the copy measured beside that roof's triad allows at its
    intensity (capped by the compute roof); None where no copy was measured there."""
    copy = roofs.copy_gb_per_s.get(roof)
    achieved = _number(achieved)
    if copy is None or achieved is None or roof not in BANDWIDTH_ROOFS:
        return None
    allowed = (1.0 if by_bytes else intensity) * copy
    if not by_bytes and roofs.compute_gflop_per_s is not None:
        allowed = min(allowed, roofs.compute_gflop_per_s)
    return achieved / allowed if allowed > 0 else None


def _past(exact: bool, copied: float | None) -> str:
    """The note of a cell past its roof by more than noise explains: ``exact``, its flops
    are exact and the roof is the compute roof; ``copied``, its ``copy_share``."""
    if exact:
        return ROOF_MEASURED_LOW
    if copied is not None and copied <= ROOF_NOISE_FACTOR:
        return STREAMS_LIKE_COPY
    return COST_MODEL_ERROR


def place(
    flops,
    bytes_moved,
    gflop_per_s,
    roofs: RoofSet | None,
    flops_exact: bool | None = False,
    gb_per_s=None,
) -> dict:
    """The cell's roof columns (``ROOF_COLUMNS``). ``flops_exact``: the operation's flop
    count is exact (past the compute roof: ``roof measured low``); ``gb_per_s`` places a
    cell with bytes but no flops by its bytes."""
    out = dict.fromkeys(ROOF_COLUMNS)
    flops, bytes_moved = _number(flops), _number(bytes_moved)
    if not bytes_moved or bytes_moved <= 0 or (flops is not None and flops <= 0):
        return out
    by_bytes = flops is None
    if by_bytes and _number(gb_per_s) is None:
        return out
    intensity = 1.0 if by_bytes else flops / bytes_moved
    out["arithmetic_intensity"] = None if by_bytes else intensity
    if roofs is None:
        out["roof_note"] = NO_ROOFS
        return out
    achieved = _number(gb_per_s if by_bytes else gflop_per_s)
    placed = _against(
        intensity, bytes_moved, achieved, roofs, None if by_bytes else roofs.compute_gflop_per_s
    )
    if placed is None:
        out["roof_note"] = NO_ROOFS
        return out
    roof, attainable, note = placed
    out.update(attainable_gflop_per_s=None if by_bytes else attainable, roof=roof)
    if achieved is not None:
        fraction = achieved / attainable
        out["roof_fraction"] = fraction
        if fraction > ROOF_NOISE_FACTOR:
            exact = bool(flops_exact) and roof == COMPUTE_ROOF
            note = _past(exact, copy_share(roof, intensity, achieved, roofs, by_bytes))
        elif fraction > 1:
            note = WITHIN_NOISE if note is None else f"{note}, {WITHIN_NOISE}"
    if by_bytes:
        note = PLACED_BY_BYTES if note is None else f"{PLACED_BY_BYTES}, {note}"
    out["roof_note"] = note
    return out


def place_rows(rows: list[dict], roof_rows) -> list[dict]:
    """Every cell row (dicts of benchmarks.parquet's columns) with its roof columns; cells
    that are not ``ok`` get nulls."""
    sets = roof_sets(roof_rows)
    placed = []
    for row in rows:
        if row.get("status") != "ok":
            placed.append({**row, **dict.fromkeys(ROOF_COLUMNS)})
            continue
        key = (row.get("host"), row.get("device"), row.get("dtype"), row.get("threads"))
        got = place(
            row.get("flops"),
            row.get("bytes"),
            row.get("gflop_per_s"),
            sets.get(key),
            flops_exact=row.get("flops_exact"),
            gb_per_s=row.get("gb_per_s"),
        )
        placed.append({**row, **got})
    return placed


# -- what the roofline says about each operation -----------------------------------------------
#: glibc hands a block at least this large to ``mmap`` whatever it freed before (its largest
#: threshold on 64 bits, which ``allocator: steady`` sets from the start): such an output is
#: fresh memory, faulted in on every call
FRESH_OUTPUT_BYTES = int(STEADY_MALLOC["MALLOC_MMAP_THRESHOLD_"])
GROUP = list(SETTING)


def output_bytes(cell: pd.Series) -> float | None:
    """Bytes of one call's output as the cell's worker recorded them (``output_bytes``, the
    result the library returned); None for a cell from before the column, which a rerun
    measures again (``numbench.spec.CELL_CONTRACT``)."""
    value = cell.get("output_bytes")
    return None if value is None or pd.isna(value) else float(value)


def first_touch(cell: pd.Series, roofs: pd.DataFrame | None) -> FirstTouch | None:
    """The first-touch estimate of a memory-bound cell below ``LOW_DRAM_SHARE`` of the DRAM
    roof whose output is fresh memory on every call; None otherwise. (Columns are read by
    name: a row's ``.dtype`` would be the row's own type.)"""
    if roofs is None or cell["roof"] != "dram" or not cell["roof_fraction"] < LOW_DRAM_SHARE:
        return None
    out = output_bytes(cell)
    if out is None or out < FRESH_OUTPUT_BYTES:
        return None
    dram = roofs[
        (roofs["host"] == cell["host"])
        & (roofs["device"] == cell["device"])
        & (roofs["dtype"] == cell["dtype"])
        & (roofs["threads"] == cell["threads"])
        & (roofs["roof"] == "dram")
        & roofs["first_touch_s_per_gb"].notna()
    ]
    if dram.empty:
        return None
    row = dram.iloc[0]
    median_s, fraction = float(cell["median_s"]), float(cell["roof_fraction"])
    seconds = out / 1e9 * float(row["first_touch_s_per_gb"])
    rest = median_s - seconds
    faults = row["first_touch_faults_per_mib"]
    return FirstTouch(
        output_bytes=out,
        seconds=seconds,
        s_per_gb=float(row["first_touch_s_per_gb"]),
        faults_per_mib=None if pd.isna(faults) else float(faults),
        share_of_time=min(1.0, seconds / median_s),
        fraction_without=fraction * median_s / rest if rest > 0 else math.inf,
    )


def _optional(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def roofline_findings(bench: pd.DataFrame, roofs: pd.DataFrame | None) -> list[RoofFinding]:
    """One finding per (host, device, dtype, threads, operation) with placed cells, with the
    spread of the roof it was held against where that roof was measured more than once."""
    if "roof_fraction" not in bench:
        return []
    placed = bench[(bench["status"] == "ok") & bench["roof_fraction"].notna()]
    sets = roof_sets(roofs.to_dict("records")) if roofs is not None else {}
    findings = []
    for key, group in placed.groupby(GROUP + ["operation"], sort=True):
        largest = group[group["size"] == group["size"].max()]
        cell = largest.loc[largest["median_s"].idxmin()]
        roofs_here = sets.get((key[0], key[1], key[2], int(key[3])))
        spread = roofs_here.spread.get(cell["roof"]) if roofs_here is not None else None
        by_bytes = pd.isna(cell["gflop_per_s"])
        copied = (
            copy_share(
                cell["roof"],
                _optional(cell["arithmetic_intensity"]),
                cell.get("gb_per_s") if by_bytes else cell["gflop_per_s"],
                roofs_here,
                by_bytes,
            )
            if roofs_here is not None
            else None
        )
        findings.append(
            RoofFinding(
                host=key[0],
                device=key[1],
                dtype=key[2],
                threads=int(key[3]),
                operation=key[4],
                size=int(cell["size"]),
                library=cell["library"],
                median_s=float(cell["median_s"]),
                gflop_per_s=_optional(cell["gflop_per_s"]),
                gb_per_s=_optional(cell.get("gb_per_s")),
                roof_spread=spread,
                roof=cell["roof"],
                roof_fraction=float(cell["roof_fraction"]),
                roof_note=None if pd.isna(cell["roof_note"]) else cell["roof_note"],
                first_touch=first_touch(cell, roofs),
                copy_share=copied,
            )
        )
    return findings
