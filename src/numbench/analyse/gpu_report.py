"""The GPU cells that could not run, as a fact: ``gpu_notice`` decides the ``GpuNotice``
(``numbench.contract.facts``, part of ``Findings``) and ``numbench.report.gpu_text`` words it.

``none_found`` when every GPU cell asked for was ``unavailable`` (no GPU, no CUDA build of the
library); otherwise some ran and the notice lists the ones that did not. The skipped cells are
grouped by library and reason (cleaned, and cut to ``MAX_REASON_CHARS``), with their
operations and sizes. ``benchmarks`` may be a pandas DataFrame or a pyarrow Table.
"""

from __future__ import annotations

import re

import pandas as pd

from numbench.contract.facts import MAX_REASON_CHARS, GpuNotice, SkippedGpuCells


def _clean_reason(reason, library: str) -> str:
    text = re.sub(r"\s+", " ", str(reason or "no reason given")).strip()
    text = text.replace(f" (device=gpu asked for {library})", "")
    text = text.replace("|", "/")
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return text


def _skipped(cells: pd.DataFrame) -> tuple[SkippedGpuCells, ...]:
    reasons = zip(cells["error"], cells["library"], strict=True)
    cells = cells.assign(reason=[_clean_reason(r, lib) for r, lib in reasons])
    out = []
    for (library, reason), group in cells.groupby(["library", "reason"], sort=True):
        sizes = tuple(
            (op, tuple(int(s) for s in sorted(g["size"].unique())))
            for op, g in group.groupby("operation", sort=True)
        )
        out.append(SkippedGpuCells(library, reason, len(group), sizes))
    return tuple(out)


def _frame(benchmarks) -> pd.DataFrame:
    if hasattr(benchmarks, "to_pandas") and not isinstance(benchmarks, pd.DataFrame):
        return benchmarks.to_pandas()
    return benchmarks


def gpu_notice(
    bench: pd.DataFrame, baseline_library: str | None = None, baseline_device: str | None = None
) -> GpuNotice | None:
    """GPU cells that were asked for and are ``unavailable``; None when there are none."""
    bench = _frame(bench)
    gpu = bench[bench["device"] == "gpu"]
    skipped = gpu[gpu["status"] == "unavailable"]
    if skipped.empty:
        return None
    cpu = bench[bench["device"] == "cpu"]
    baseline_on_cpu = baseline_device == "cpu" and (cpu["library"] == baseline_library).any()
    return GpuNotice(
        none_found=len(skipped) == len(gpu),
        gpu_cells=len(gpu),
        skipped=_skipped(skipped),
        skipped_cells=len(skipped),
        hosts=tuple(sorted({str(h) for h in bench.get("host", pd.Series(dtype=str)).dropna()})),
        cpu_cells=len(cpu),
        cpu_baseline=baseline_library if baseline_on_cpu else None,
    )
