"""What the roofline says about each operation, as typed facts (``numbench.contract.facts``).

For each (host, device, dtype, threads) and operation: the fastest library at the largest
size that has a place on the roofline, its share of its roof, and whether memory or
arithmetic bounds it (the roof it was held against). Where a memory-bound cell reaches less
than ``LOW_DRAM_SHARE`` of the DRAM roof and its output is large enough to be fresh memory
on every call, the finding carries what the roofs rule measured about first touching fresh
memory (``first_touch_s_per_gb``, page faults per MiB): an estimate of how much of the
cell's time that takes, from a measurement of this host, not a guess. The output's bytes
are those the cell's worker recorded (``output_bytes``): an operation of the user's own
needs no loading here to have its estimate.
"""

from __future__ import annotations

import math

import pandas as pd

from numbench.analyse.roofline import copy_share, roof_sets
from numbench.cells import SETTING
from numbench.contract.facts import LOW_DRAM_SHARE, FirstTouch, RoofFinding
from numbench.libraries.base import STEADY_MALLOC

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
