"""The summary's words about GPU cells that could not run (``Findings.gpu_notice``).

When every GPU cell asked for was ``unavailable`` it is the paragraph for the top of the
summary: it says plainly that no GPU was found and lists the skipped cells, grouped by library
and reason, with operations and sizes folded onto one line, and how to measure a GPU. When
some GPU cells ran it is the milder note listing the ones that did not.
"""

from __future__ import annotations

from numbench.contract.facts import GpuNotice, SkippedGpuCells
from numbench.formatting import display
from numbench.report.markdown import md_text

INSTALL_HINT = (
    "To measure a GPU, run on a host with an NVIDIA GPU and the CUDA set installed "
    "(`pip install -r envs/requirements-cuda.txt`), then "
    "`snakemake --cores 1 --config device=gpu`."
)


def _skipped_line(group: SkippedGpuCells) -> str:
    """'- **torch**: 3 cells, matmul (64, 128), sort (10): reason'."""
    folded = ", ".join(f"{op} ({', '.join(str(s) for s in sizes)})" for op, sizes in group.sizes)
    n = group.count
    return f"- **{group.library}**: {n} cell{'s' if n != 1 else ''}, {folded}: {group.reason}"


def _cpu_note(notice: GpuNotice) -> str:
    """' The 3 CPU cells (the NumPy baseline included) ran as usual.', or of one cell ' The 1
    CPU cell (the NumPy baseline) ran as usual.'; empty where no CPU cell ran."""
    n, baseline = notice.cpu_cells, notice.cpu_baseline
    if not n:
        return ""
    which = f"the {md_text(display(baseline))} baseline" if baseline else ""
    if which:
        which = f" ({which} included)" if n != 1 else f" ({which})"
    return f" The {n} CPU cell{'s' if n != 1 else ''}{which} ran as usual."


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
    asked = f"All {n} GPU cells asked for" if n != 1 else "The 1 GPU cell asked for"
    lines = [
        f"**No GPU was found on this host{hosts}.** {asked} (`device=gpu`) "
        f"{'were' if n != 1 else 'was'} skipped as `unavailable`; "
        f"no GPU number below was measured.{_cpu_note(notice)} Skipped, by library and reason:",
        "",
        *skipped,
        "",
        INSTALL_HINT,
    ]
    return "\n".join(lines)


def no_gpu_notice(notice: GpuNotice | None) -> str | None:
    """The paragraph for the top of the summary when no GPU cell could run; None when no GPU
    cell was asked for, or one got past 'unavailable' (see ``gpu_gaps_notice``)."""
    return render_gpu_notice(notice) if notice and notice.none_found else None


def gpu_gaps_notice(notice: GpuNotice | None) -> str | None:
    """A note listing GPU cells that were unavailable while other GPU cells ran; else None."""
    return render_gpu_notice(notice) if notice and not notice.none_found else None
