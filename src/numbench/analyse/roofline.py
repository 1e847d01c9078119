"""Each cell as a share of what its host can do: its place on the roofline.

A cell's cost model gives its flops and the fewest bytes it must move; their ratio is its
``arithmetic_intensity``. Its ``attainable_gflop_per_s`` is ``min(compute roof, intensity x
bandwidth roof)``, and ``roof_fraction`` is what it reached (``gflop_per_s``) over that;
``roof`` names the roof it was held against (``l2``, ``l3``, ``dram`` or ``compute``).

Which bandwidth roof: the one of the cache its working set (those fewest bytes) fits in,
by the caches' sizes the roofs rule read from the system (``numbench.contract.roofs.resident_level``).
A cell is never drawn above its roof as a win. A cell past 100% of its roof is either:

* ``cache-resident``: its working set is within ``PARTLY_RESIDENT_FACTOR`` times a faster
  cache (a repeated call finds part of its data still there): it is held against that
  cache's roof instead, and says so; a cell whose working set fits a cache from the start
  is held against that cache's roof and says so too;
* ``within noise``: still past its roof, by no more than ``ROOF_NOISE_FACTOR`` (a median
  against a roof that is the best of a few trials on a noisy machine);
* ``cost-model error``: past its roof by more than that: the operation counts flops it
  does not do, or bytes it does not need (or the roof is wrong; the roofs table says how
  it was measured).

A cell without a cost model (no flops or no bytes), without a time, or from a host whose
roofs were not measured has nulls (with a note for the last).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from numbench.contract.roofline import (
    CACHE_RESIDENT,
    COST_MODEL_ERROR,
    ROOF_NOISE_FACTOR,
    WITHIN_NOISE,
)
from numbench.contract.roofs import BANDWIDTH_ROOFS, COMPUTE_ROOF, resident_level

#: a working set within this many times a cache's size may still find part of itself there
#: on a repeated call (STREAM's arrays are four times the last-level cache for this reason)
PARTLY_RESIDENT_FACTOR = 4
NO_ROOFS = "no roofs measured for this host, device, dtype and threads"
#: a float32 GPU cell past the compute roof (the float32 vector peak, TF32 off): tensor cores
#: in TF32, a library's default (TensorFlow's), are the likelier cause than the cost model
TF32_PAST_PEAK = "past the float32 vector peak: TF32 tensor cores (the roofs' tf32 column)"
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
    only rows that measured (``ok``) count."""
    bandwidth: dict[tuple, dict[str, float]] = {}
    compute: dict[tuple, float] = {}
    caches: dict[tuple, dict[str, int]] = {}
    for row in roof_rows:
        key = (row["host"], row["device"], row["dtype"], int(row["threads"]))
        levels = {k: int(row[f"{k}_bytes"]) for k in ("l2", "l3") if _number(row.get(f"{k}_bytes"))}
        caches.setdefault(key, levels)
        value = _number(row.get("value"))
        if row.get("status") != "ok" or value is None:
            continue
        if row["roof"] in BANDWIDTH_ROOFS:
            bandwidth.setdefault(key, {})[row["roof"]] = value
        elif row["roof"] == COMPUTE_ROOF:
            compute[key] = value
    return {key: RoofSet(bandwidth.get(key, {}), compute.get(key), caches[key]) for key in caches}


def _held(intensity: float, level_roof, compute: float | None) -> tuple[str, float]:
    """(roof, attainable GFLOP/s) of one bandwidth roof and the compute roof."""
    if level_roof is None:
        return COMPUTE_ROOF, compute
    level, gb_per_s = level_roof
    memory = intensity * gb_per_s
    if compute is not None and compute < memory:
        return COMPUTE_ROOF, compute
    return level, memory


def place(flops, bytes_moved, gflop_per_s, roofs: RoofSet | None) -> dict:
    """The cell's roof columns (``ROOF_COLUMNS``)."""
    out = dict.fromkeys(ROOF_COLUMNS)
    flops, bytes_moved, achieved = _number(flops), _number(bytes_moved), _number(gflop_per_s)
    if not flops or not bytes_moved or flops <= 0 or bytes_moved <= 0:
        return out
    intensity = flops / bytes_moved
    out["arithmetic_intensity"] = intensity
    if roofs is None:
        out["roof_note"] = NO_ROOFS
        return out
    level = resident_level(bytes_moved, roofs.cache_bytes)
    level_roof = roofs.bandwidth_for(level)
    if level_roof is None and roofs.compute_gflop_per_s is None:
        out["roof_note"] = NO_ROOFS
        return out
    roof, attainable = _held(intensity, level_roof, roofs.compute_gflop_per_s)
    note = CACHE_RESIDENT if roof in ("l2", "l3") else None
    if achieved is not None and achieved > attainable and roof != COMPUTE_ROOF:
        # past a bandwidth roof: a faster cache that still holds part of the working set?
        for faster in reversed(BANDWIDTH_ROOFS[: BANDWIDTH_ROOFS.index(roof)]):
            size = roofs.cache_bytes.get(faster)
            if not size or bytes_moved > PARTLY_RESIDENT_FACTOR * size:
                continue
            if faster not in roofs.bandwidth_gb_per_s:
                continue
            candidate = (faster, roofs.bandwidth_gb_per_s[faster])
            roof, attainable = _held(intensity, candidate, roofs.compute_gflop_per_s)
            note = CACHE_RESIDENT
            if achieved <= attainable:
                break
    out.update(attainable_gflop_per_s=attainable, roof=roof)
    if achieved is not None:
        fraction = achieved / attainable
        out["roof_fraction"] = fraction
        if fraction > ROOF_NOISE_FACTOR:
            note = COST_MODEL_ERROR
        elif fraction > 1:
            note = WITHIN_NOISE if note is None else f"{note}, {WITHIN_NOISE}"
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
        got = place(row.get("flops"), row.get("bytes"), row.get("gflop_per_s"), sets.get(key))
        tf32 = row.get("device") == "gpu" and row.get("dtype") == "float32"
        if tf32 and got["roof"] == COMPUTE_ROOF and got["roof_note"] == COST_MODEL_ERROR:
            got["roof_note"] = TF32_PAST_PEAK
        placed.append({**row, **got})
    return placed
