"""results/summary.md: the human answer."""

from __future__ import annotations

import os

import pandas as pd

from numbench.tables import write_text_atomic


def format_seconds(s: float | None) -> str:
    if s is None or pd.isna(s):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value).replace("|", "\\|").replace("\n", " ")


def cells_table(df: pd.DataFrame) -> str:
    lines = [
        "| library | device | operation | size | dtype | status | median | IQR | first call | rel. error | note |",
        "|---|---|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for r in df.sort_values(["operation", "size", "library", "device"]).itertuples(index=False):
        rel = "" if r.rel_error is None or pd.isna(r.rel_error) else f"{r.rel_error:.1e}"
        lines.append(
            f"| {r.library} | {r.device} | {r.operation} | {r.size} | {r.dtype} | {r.status} | "
            f"{format_seconds(r.median_s)} | {format_seconds(r.iqr_s)} | "
            f"{format_seconds(r.first_call_s)} | {rel} | {_cell(r.error)} |"
        )
    return "\n".join(lines)


def render(df: pd.DataFrame) -> str:
    counts = df["status"].value_counts().to_dict()
    status_line = ", ".join(f"{counts[s]} {s}" for s in sorted(counts))
    parts = [
        "# numbench summary",
        "",
        f"{len(df)} cells: {status_line}.",
        "",
        "## Every cell",
        "",
        cells_table(df),
        "",
    ]
    return "\n".join(parts)


def write_summary(benchmarks: str | os.PathLike, output: str | os.PathLike) -> None:
    df = pd.read_parquet(benchmarks)
    write_text_atomic(render(df), output)
