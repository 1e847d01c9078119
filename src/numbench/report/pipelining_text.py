"""What per-call timing leaves out, in the summary's words: the key findings about queued
calls against waited-for calls (``Findings.pipeline_gaps`` and the rest, decided by
``numbench.analyse.pipelining``), and the sections that table pipelined throughput against
per-call latency and the time to move data to the device against the time to compute on it
(from results/benchmarks.parquet).
"""

from __future__ import annotations

import pandas as pd

from numbench.contract import pipelined_cells
from numbench.contract.facts import Findings, PipelineGap
from numbench.formatting import (
    format_ci,
    format_seconds,
    format_size,
    format_speedup,
    series_labels,
    who,
)
from numbench.report.markdown import md_table, md_text
from numbench.stats import FASTER


def gap_sentence(g: PipelineGap, multi_device: bool) -> str:
    name = md_text(who(g.library, g.device, multi_device)) + (
        f" ({md_text(g.setting)})" if g.setting else ""
    )
    where = f"{md_text(g.operation)} at n = {format_size(g.size)}"
    value = f"{format_speedup(g.speedup)} {format_ci(g.ci_low, g.ci_high)}"
    if g.direction == FASTER:
        return (
            f"{name}: calls queued back to back take less time per call than calls waited for "
            f"one by one in {g.cells} of {g.of_cells} cells, most on {where} ({value} the "
            "throughput of the per-call latency): dispatch hides behind work there."
        )
    return (
        f"{name}: calls queued back to back take longer per call than calls waited for one by "
        f"one in {g.cells} of {g.of_cells} cells, most on {where} ({value})."
    )


def pipeline_findings(f: Findings) -> list[str]:
    """The key findings' lines (none when no asynchronous library was timed both ways)."""
    if not f.pipeline_gaps and not f.queued_same_speed:
        return []
    multi = f.multi_device
    lines = ["### Queued calls against waited-for calls", ""]
    lines += [f"- {gap_sentence(g, multi)}" for g in f.pipeline_gaps]
    if f.queued_same_speed:
        names = ", ".join(md_text(who(q.library, q.device, multi)) for q in f.queued_same_speed)
        lines.append(
            f"- {names}: queued calls are the same speed as waited-for ones (within the "
            f"margin of {f.margin:g}x) in every cell."
        )
    if f.synchronous:
        names = ", ".join(md_text(who(s.library, s.device, multi)) for s in f.synchronous)
        lines.append(
            f"- {names}: calls finish before they return (synchronous), so latency and "
            "throughput are one figure, measured once."
        )
    return lines + [""]


def _ends(d: pd.DataFrame) -> pd.DataFrame:
    """The smallest and the largest size of each series and operation."""
    keep = []
    for _, part in d.groupby(["series", "operation"], sort=True):
        sizes = sorted(part["size"].unique())
        keep.append(part[part["size"].isin({sizes[0], sizes[-1]})])
    return pd.concat(keep).sort_values(["series", "operation", "size"])


def pipeline_table(bench: pd.DataFrame) -> str:
    """Per asynchronous library and operation, at its smallest and largest size: latency,
    pipelined time per call, and pipelined speedup with its CI."""
    d = pipelined_cells(bench).copy()
    if d.empty:
        return "No asynchronous library was measured: every figure is a per-call latency."
    d["series"] = series_labels(d)
    rows = [
        [
            r.series,
            r.operation,
            format_size(r.size),
            format_seconds(r.median_s),
            format_seconds(r.pipelined_median_s),
            f"{format_speedup(r.pipelined_speedup)} "
            f"{format_ci(r.pipelined_speedup_ci_low, r.pipelined_speedup_ci_high)}",
        ]
        for r in _ends(d).itertuples()
    ]
    header = ["library", "operation", "n", "latency", "pipelined", "latency / pipelined (CI)"]
    return md_table(header, rows, align="lllrrr")


def transfer_table(bench: pd.DataFrame) -> str | None:
    """Per device cell (smallest and largest size of each library and operation): the time
    to place the inputs, one call, the time to read the result back, and what share of the
    end-to-end time the transfers take. None when no cell moved data (a CPU grid)."""
    if "h2d_s" not in bench:
        return None
    d = bench[(bench["status"] == "ok") & bench["h2d_s"].notna()].copy()
    if d.empty:
        return None
    d["series"] = series_labels(d, with_device=True)
    rows = []
    for r in _ends(d).itertuples():
        moved = r.h2d_s + r.d2h_s
        share = moved / r.end_to_end_s if r.end_to_end_s else float("nan")
        mb = (r.h2d_bytes + r.d2h_bytes) / 1e6
        rows.append(
            [
                r.series,
                r.operation,
                format_size(r.size),
                format_seconds(r.h2d_s),
                format_seconds(r.median_s),
                format_seconds(r.d2h_s),
                format_seconds(r.end_to_end_s),
                f"{share:.0%}",
                f"{mb:.3g}",
            ]
        )
    header = ["library", "operation", "n", "to device", "one call", "back to host"]
    header += ["end to end", "transfers' share", "MB moved"]
    return md_table(header, rows, align="lllrrrrrr")


def pipeline_sections(bench: pd.DataFrame) -> list[str]:
    """The summary's sections: pipelined throughput (when an asynchronous library was
    measured), and transfers (when a cell moved data to a device)."""
    lines: list[str] = []
    if not pipelined_cells(bench).empty:
        lines += [
            "## Pipelined throughput",
            "",
            "Latency: the time per call when each call is waited for. Pipelined: the time per",
            "call when calls are queued back to back with one wait at the end. Their ratio",
            "above 1 is what queuing gains; chart: `pipelined`.",
            "",
            pipeline_table(bench),
            "",
        ]
    moved = transfer_table(bench)
    if moved is not None:
        lines += [
            "## Transfers",
            "",
            "Placing every input on the device, one call, and reading the result back, each",
            "waited for and timed apart from the samples (medians over the processes).",
            "",
            moved,
            "",
        ]
    return lines
