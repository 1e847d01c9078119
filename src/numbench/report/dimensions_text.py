"""The summary's words and tables about the grid's dtype and threads dimensions: the key
findings' sentences (from ``Findings.precision`` and ``Findings.scaling``) and the
"Precision" and "Parallel scaling" sections (from results/precision.parquet and
results/scaling.parquet). Every value from the tables goes through ``md_text`` or a table
cell (``md_table``)."""

from __future__ import annotations

import pandas as pd

from numbench.contract.facts import Findings, PrecisionGap, ScalingGap
from numbench.formatting import display, format_ci, format_size, format_speedup
from numbench.report.markdown import md_table, md_text


def precision_sentence(g: PrecisionGap) -> str:
    """'float32 is 1.8× faster than float64 for fft with NumPy at n = 10^5 (1 thread(s)).'"""
    if g.ratio < 1:
        how = f"{format_speedup(1 / g.ratio)} faster"
    else:
        how = f"{format_speedup(g.ratio)} slower"
    return (
        f"float32 is {how} than float64 for {md_text(g.operation)} "
        f"with {md_text(display(g.library))} at n = {format_size(g.size, mark=False)} "
        f"({g.threads} thread(s))."
    )


def scaling_sentence(g: ScalingGap) -> str:
    """'2 threads are 1.7× faster than 1 for fft with NumPy at n = 10^3 (float64; ...).'"""
    how = "faster" if g.speedup >= 1 else "slower"
    return (
        f"{g.threads} threads are {format_speedup(g.speedup)} {how} than 1 for "
        f"{md_text(g.operation)} with {md_text(display(g.library))} "
        f"at n = {format_size(g.size, mark=False)} "
        f"({md_text(g.dtype)}; efficiency {g.efficiency:.0%})."
    )


def precision_table(prec: pd.DataFrame) -> str:
    if prec.empty:
        return "Only one dtype was measured: no precision comparison."
    header = ["operation", "library", "device", "threads", "size", "float32 / float64", "95% CI"]
    rows = [
        [
            r.operation,
            display(r.library),
            r.device,
            str(r.threads),
            format_size(r.size, mark=False),
            f"{r.ratio:.3g}",
            format_ci(r.ci_low, r.ci_high),
        ]
        for r in prec.itertuples(index=False)
    ]
    return md_table(header, rows)


def scaling_table(scal: pd.DataFrame) -> str:
    if scal.empty:
        return "Only one thread count was measured: no parallel scaling."
    header = ["operation", "library", "device", "dtype", "size", "threads", "speedup", "95% CI"]
    header.append("efficiency")
    rows = [
        [
            r.operation,
            display(r.library),
            r.device,
            r.dtype,
            format_size(r.size, mark=False),
            str(r.threads),
            format_speedup(r.speedup),
            format_ci(r.ci_low, r.ci_high),
            f"{r.efficiency:.0%}",
        ]
        for r in scal.itertuples(index=False)
    ]
    return md_table(header, rows)


def dimension_findings(f: Findings) -> list[str]:
    """The key findings' lines about dtype and threads (none when the grid has neither)."""
    lines = []
    if f.precision is not None:
        lines += ["### float32 against float64", ""]
        said = [f"- {precision_sentence(g)}" for g in f.precision]
        lines += said or ["- No clear difference beyond the margin."]
        lines.append("")
    if f.scaling is not None:
        lines += ["### Parallel scaling", ""]
        said = [f"- {scaling_sentence(g)}" for g in f.scaling]
        lines += said or ["- No clear difference beyond the margin."]
        lines.append("")
    return lines


def dimension_sections(prec: pd.DataFrame | None, scal: pd.DataFrame | None) -> list[str]:
    """The summary's precision and scaling sections, with their tables."""
    lines = []
    if prec is not None:
        lines += ["## Precision", "", "float32 time / float64 time (below 1: float32 is faster)"]
        lines += ["and its 95% CI; chart: `precision`.", "", precision_table(prec), ""]
    if scal is not None:
        lines += ["## Parallel scaling", "", "Median time at 1 thread / median time at the most"]
        lines += ["threads, its 95% CI, and the efficiency (speedup / threads); chart: `scaling`."]
        lines += ["", scaling_table(scal), ""]
    return lines
