"""What the summary says about GPU cells that could not run.

``gpu_notice`` decides the fact (a ``GpuNotice``, part of ``findings.Findings``) and
``render_gpu_notice`` words it. When every GPU cell asked for was
``unavailable`` (no GPU, no CUDA build of the library) it is the paragraph for the top of the
summary: it says plainly that no GPU was found and lists the skipped cells, grouped by library
and reason, with operations and sizes folded onto one line. When some GPU cells ran it is the
milder note listing the ones that did not.

``no_gpu_notice(benchmarks)`` and ``gpu_gaps_notice(benchmarks)`` give either text straight
from the table of ``results/benchmarks.parquet`` (a pandas DataFrame or a pyarrow Table), or
None when there is nothing of that kind to say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from numbench.formatting import display, md_text

#: longest reason quoted in a GPU notice; the full text stays in benchmarks.parquet
MAX_REASON_CHARS = 240


# -- GPU cells that could not run ---------------------------------------------------------------
@dataclass(frozen=True)
class SkippedGpuCells:
    """Unavailable GPU cells of one library for one (cleaned) reason."""

    library: str
    reason: str
    count: int
    sizes: tuple[tuple[str, tuple[int, ...]], ...]  # (operation, its sizes), by operation


@dataclass(frozen=True)
class GpuNotice:
    """GPU cells were asked for and some could not run. ``none_found``: every one was
    unavailable (no GPU on the host); otherwise some ran and ``skipped`` lists the gaps.
    ``cpu_baseline`` names the baseline library when it is among the CPU cells."""

    none_found: bool
    gpu_cells: int
    skipped: tuple[SkippedGpuCells, ...]
    skipped_cells: int
    hosts: tuple[str, ...]
    cpu_cells: int
    cpu_baseline: str | None = None


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


def gpu_notice(
    bench: pd.DataFrame, baseline_library: str | None = None, baseline_device: str | None = None
) -> GpuNotice | None:
    """GPU cells that were asked for and are ``unavailable``; None when there are none."""
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


INSTALL_HINT = (
    "To measure a GPU, run on a host with an NVIDIA GPU and the CUDA set installed "
    "(`pip install -r envs/requirements-cuda.txt`), then "
    "`snakemake --cores 1 --config device=gpu`."
)


def _frame(benchmarks) -> pd.DataFrame:
    if hasattr(benchmarks, "to_pandas") and not isinstance(benchmarks, pd.DataFrame):
        return benchmarks.to_pandas()
    return benchmarks


def _skipped_line(group: SkippedGpuCells) -> str:
    """'- **torch**: 3 cells, matmul (64, 128), sort (10): reason'."""
    folded = ", ".join(f"{op} ({', '.join(str(s) for s in sizes)})" for op, sizes in group.sizes)
    n = group.count
    return f"- **{group.library}**: {n} cell{'s' if n != 1 else ''}, {folded}: {group.reason}"


def render_gpu_notice(notice: GpuNotice) -> str:
    skipped = [_skipped_line(g) for g in notice.skipped]
    if not notice.none_found:
        n = notice.skipped_cells
        return "\n".join(
            [
                f"**{n} GPU cell{'s were' if n != 1 else ' was'} unavailable** on this host, "
                "while other GPU cells ran:",
                "",
                *skipped,
            ]
        )
    n = notice.gpu_cells
    hosts = f" ({', '.join(md_text(h) for h in notice.hosts)})" if notice.hosts else ""
    included = (
        f" (the {md_text(display(notice.cpu_baseline))} baseline included)"
        if notice.cpu_baseline
        else ""
    )
    cpu_note = (
        f" The {notice.cpu_cells} CPU cells{included} ran as usual." if notice.cpu_cells else ""
    )
    lines = [
        f"**No GPU was found on this host{hosts}.** All {n} GPU cell"
        f"{'s' if n != 1 else ''} asked for (`device=gpu`) were skipped as `unavailable`; "
        f"no GPU number below was measured.{cpu_note} Skipped, by library and reason:",
        "",
        *skipped,
        "",
        INSTALL_HINT,
    ]
    return "\n".join(lines)


def no_gpu_notice(
    benchmarks, baseline_library: str | None = None, baseline_device: str | None = None
) -> str | None:
    """The Markdown paragraph for the top of the summary when no GPU cell could run.

    None when no GPU cells were asked for, or when at least one GPU cell got past
    'unavailable' (then a GPU was found; see ``gpu_gaps_notice``).
    """
    notice = gpu_notice(_frame(benchmarks), baseline_library, baseline_device)
    return render_gpu_notice(notice) if notice and notice.none_found else None


def gpu_gaps_notice(benchmarks) -> str | None:
    """A note listing GPU cells that were unavailable while other GPU cells ran; else None."""
    notice = gpu_notice(_frame(benchmarks))
    return render_gpu_notice(notice) if notice and not notice.none_found else None
