"""A cell is several fresh worker processes, paired with the baseline where it has one.

Why several: processes of the same cell differ (allocator state, memory layout, JIT code
placement), often by more than the samples inside one process do; one process cannot show
it. Why paired: the machine drifts over minutes, and Snakemake promises no job order, so the
baseline cell and a library's cell may be measured far apart, on a slow minute and a fast
one, or on different nodes of a cluster. Instead, a cell that has a baseline runs, in each
round, one baseline process and one of its own, back to back and in a seeded random order
(neither side always first), so every ratio is formed from measurements seconds apart on
the same host, whatever order the jobs ran in. The baseline's own cell measures it alone.

The number of rounds adapts (``replicates`` in the config): ``min`` rounds always; then one
more while the 95% interval of the cell's median (of its speedup, when paired) is wider than
``target_ci`` of its value, up to ``max``, unless the paired speedup's whole interval already
lies beyond the margin (the verdict is settled). Cells whose processes agree stop early;
cells whose processes disagree where it matters get more of them, and are flagged unstable
later if they still disagree. Processes are the cost of a cell, so they go where a verdict
is in doubt.

A process that is not ``ok`` ends the cell's measuring: its status and error are the cell's
(a fault in any process is the cell's fault). A failed baseline process ends the pairing
only: the cell keeps its own processes, and its speedup is then taken against the baseline
cell instead.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from numbench.spec import CellSpec, ProcessReport
from numbench.stats import median_ci, ratio_ci, relative_half_width

MEASURED, BASELINE = "measured", "baseline"
#: bootstrap resamples of the stopping rule (the published intervals use the full count)
STOPPING_RESAMPLES = 500


@dataclass
class ProcessRun:
    """One worker process of a cell: which side it measured, in which round, and when."""

    role: str
    replicate: int
    started_unix: float
    report: ProcessReport


def round_order(spec: CellSpec, replicate: int) -> tuple[str, str]:
    """Which side runs first in a paired round: seeded by the cell and the round, so a rerun
    keeps the order and neither side is always first."""
    seed = zlib.crc32(f"{spec.library}/{spec.device}/{spec.operation}/{spec.size}".encode())
    first_baseline = random.Random(seed * 1000 + replicate).random() < 0.5
    return (BASELINE, MEASURED) if first_baseline else (MEASURED, BASELINE)


def precise_enough(spec: CellSpec, runs: list[ProcessRun]) -> bool:
    """True once more processes would not change what the cell says: its interval is within
    ``replicates.target_ci`` of its value, or, paired, the whole interval of the speedup lies
    beyond the margin (a clear ``faster`` or ``slower`` that more processes only sharpen)."""
    own = [r.report.samples_s for r in runs if r.role == MEASURED]
    base = [r.report.samples_s for r in runs if r.role == BASELINE]
    if base and len(base) == len(own):
        point, lo, hi = ratio_ci(base, own, paired=True, resamples=STOPPING_RESAMPLES)
        margin = spec.replicates.margin
        if lo >= margin or hi <= 1.0 / margin:
            return True
    else:
        import numpy as np

        point = float(np.median([s for g in own for s in g]))
        lo, hi = median_ci(own, resamples=STOPPING_RESAMPLES)
    return relative_half_width(point, lo, hi) <= spec.replicates.target_ci


def measure_replicates(
    spec: CellSpec, run_worker: Callable[[CellSpec], ProcessReport]
) -> tuple[list[ProcessRun], str | None]:
    """Run the cell's processes; return them and, when pairing had to stop, why."""
    runs: list[ProcessRun] = []
    paired = spec.paired_spec()
    pairing_error = None
    for replicate in range(spec.replicates.max):
        roles = round_order(spec, replicate) if paired is not None else (MEASURED,)
        for role in roles:
            started = time.time()
            report = run_worker(spec if role == MEASURED else paired)
            if role == BASELINE and report.status != "ok":
                pairing_error = (
                    f"the paired baseline process ({spec.paired_with}) ended "
                    f"{report.status}: {report.error}; speedup taken against the baseline cell"
                )
                runs = [r for r in runs if r.role == MEASURED]
                paired = None
                continue
            runs.append(ProcessRun(role, replicate, started, report))
            if role == MEASURED and report.status != "ok":
                return runs, pairing_error
        if replicate + 1 >= spec.replicates.min and precise_enough(spec, runs):
            break
    return runs, pairing_error
