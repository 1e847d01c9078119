"""What per-call timing leaves out, as findings: pipelined throughput against per-call
latency (``numbench.report.pipelining_text`` words them, and tables the transfers).

Read from results/benchmarks.parquet (``contract.PIPELINE_FIELDS``).
``pipelined_speedup`` is latency / pipelined time per call: above 1, queuing calls back to
back hides part of each call's cost (dispatch behind work). A library whose calls finish
before they return (``dispatch == "synchronous"``) has one figure for both, and is named as
such rather than tabled.
"""

from __future__ import annotations

import pandas as pd

from numbench.analyse.dimensions import settings
from numbench.contract import pipelined_cells
from numbench.contract.facts import PipelineGap, QueuedSameSpeed, Synchronous
from numbench.stats import FASTER, SLOWER, verdict


def synchronous_libraries(bench: pd.DataFrame) -> list[tuple[str, str]]:
    """(library, device) of the ok cells whose calls finish before they return."""
    if "dispatch" not in bench:
        return []
    d = bench[(bench["status"] == "ok") & (bench["dispatch"] == "synchronous")]
    return sorted(set(zip(d["library"], d["device"], strict=True)))


def pipeline_gaps(bench: pd.DataFrame, margin: float) -> tuple[PipelineGap, ...]:
    """One fact per library, device and direction where pipelining changes the time per
    call beyond the margin (``stats.verdict`` on the pipelined speedup)."""
    d = pipelined_cells(bench).copy()
    if d.empty:
        return ()
    d["verdict"] = [
        verdict(
            r.pipelined_speedup, r.pipelined_speedup_ci_low, r.pipelined_speedup_ci_high, margin
        )
        for r in d.itertuples()
    ]
    facts = []
    for setting, cells in settings(d):
        facts += _gaps(cells, setting)
    return tuple(facts)


def _gaps(d: pd.DataFrame, setting: str) -> list[PipelineGap]:
    facts = []
    for (lib, dev), part in d.groupby(["library", "device"], sort=True):
        for direction in (FASTER, SLOWER):
            hits = part[part["verdict"] == direction]
            if hits.empty:
                continue
            far = hits["pipelined_speedup"]
            best = hits.loc[far.idxmax() if direction == FASTER else far.idxmin()]
            facts.append(
                PipelineGap(
                    library=lib,
                    device=dev,
                    setting=setting,
                    direction=direction,
                    cells=len(hits),
                    of_cells=len(part),
                    operation=best["operation"],
                    size=int(best["size"]),
                    speedup=float(best["pipelined_speedup"]),
                    ci_low=float(best["pipelined_speedup_ci_low"]),
                    ci_high=float(best["pipelined_speedup_ci_high"]),
                )
            )
    return facts


def pipeline_facts(
    bench: pd.DataFrame, margin: float
) -> tuple[tuple[PipelineGap, ...], tuple[QueuedSameSpeed, ...], tuple[Synchronous, ...]]:
    """The gaps, the libraries timed both ways without one, and the synchronous libraries;
    nothing at all when no asynchronous library was timed both ways."""
    timed = pipelined_cells(bench)
    if timed.empty:
        return (), (), ()
    gaps = pipeline_gaps(bench, margin)
    told = {(g.library, g.device) for g in gaps}
    quiet = sorted(set(zip(timed["library"], timed["device"], strict=True)) - told)
    same = tuple(QueuedSameSpeed(lib, dev) for lib, dev in quiet)
    sync = tuple(Synchronous(lib, dev) for lib, dev in synchronous_libraries(bench))
    return gaps, same, sync
