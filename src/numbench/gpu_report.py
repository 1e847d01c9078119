"""What the summary says about GPU cells that could not run.

``no_gpu_notice(benchmarks)`` gives the paragraph for the top of the summary when GPU cells
were asked for and none could run (every one ``unavailable``: no GPU, no CUDA build of the
library): it says plainly that no GPU was found and lists the skipped cells, grouped by library
and reason, with operations and sizes folded onto one line. ``gpu_gaps_notice`` is the milder
note for a host where some GPU libraries ran and others were unavailable. Both return None
when there is nothing to say, and take the table of ``results/benchmarks.parquet`` (a pandas
DataFrame or a pyarrow Table).
"""

from __future__ import annotations

import re

import pandas as pd

#: longest reason quoted in a notice; the full text stays in benchmarks.parquet
MAX_REASON_CHARS = 240

INSTALL_HINT = (
    "To measure a GPU, run on a host with an NVIDIA GPU and the CUDA set installed "
    "(`pip install -r envs/requirements-cuda.txt`), then "
    "`snakemake --cores 1 --config device=gpu`."
)


def _frame(benchmarks) -> pd.DataFrame:
    if hasattr(benchmarks, "to_pandas") and not isinstance(benchmarks, pd.DataFrame):
        return benchmarks.to_pandas()
    return benchmarks


def _clean_reason(reason, library: str) -> str:
    text = re.sub(r"\s+", " ", str(reason or "no reason given")).strip()
    text = text.replace(f" (device=gpu asked for {library})", "")
    text = text.replace("|", "/")
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return text


def _fold_cells(cells: pd.DataFrame) -> str:
    """'elementwise (1000, 20000), matmul (32, 64)'."""
    parts = []
    for op, group in cells.groupby("operation", sort=True):
        sizes = ", ".join(str(int(s)) for s in sorted(group["size"].unique()))
        parts.append(f"{op} ({sizes})")
    return ", ".join(parts)


def _skipped_lines(skipped: pd.DataFrame) -> list[str]:
    lines = []
    reasons = zip(skipped["error"], skipped["library"], strict=True)
    skipped = skipped.assign(reason=[_clean_reason(r, lib) for r, lib in reasons])
    for (library, reason), cells in skipped.groupby(["library", "reason"], sort=True):
        n = len(cells)
        lines.append(
            f"- **{library}**: {n} cell{'s' if n != 1 else ''}, {_fold_cells(cells)}: {reason}"
        )
    return lines


def _hosts(df: pd.DataFrame) -> str:
    hosts = sorted({str(h) for h in df.get("host", pd.Series(dtype=str)).dropna()})
    return f" ({', '.join(hosts)})" if hosts else ""


def no_gpu_notice(benchmarks) -> str | None:
    """The Markdown paragraph for the top of the summary when no GPU cell could run.

    None when no GPU cells were asked for, or when at least one GPU cell got past
    'unavailable' (then a GPU was found; see ``gpu_gaps_notice``).
    """
    df = _frame(benchmarks)
    gpu = df[df["device"] == "gpu"]
    if gpu.empty or not (gpu["status"] == "unavailable").all():
        return None
    n = len(gpu)
    cpu = df[df["device"] == "cpu"]
    cpu_note = (
        f" The {len(cpu)} CPU cells (the NumPy baseline included) ran as usual."
        if not cpu.empty
        else ""
    )
    lines = [
        f"**No GPU was found on this host{_hosts(df)}.** All {n} GPU cell"
        f"{'s' if n != 1 else ''} asked for (`device=gpu`) were skipped as `unavailable`; "
        f"no GPU number below was measured.{cpu_note} Skipped, by library and reason:",
        "",
        *_skipped_lines(gpu),
        "",
        INSTALL_HINT,
    ]
    return "\n".join(lines)


def gpu_gaps_notice(benchmarks) -> str | None:
    """A note listing GPU cells that were unavailable while other GPU cells ran; else None."""
    df = _frame(benchmarks)
    gpu = df[df["device"] == "gpu"]
    skipped = gpu[gpu["status"] == "unavailable"]
    if skipped.empty or len(skipped) == len(gpu):
        return None
    n = len(skipped)
    lines = [
        f"**{n} GPU cell{'s were' if n != 1 else ' was'} unavailable** on this host, while "
        "other GPU cells ran:",
        "",
        *_skipped_lines(skipped),
    ]
    return "\n".join(lines)
