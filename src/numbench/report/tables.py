"""The summary's tables, written from the frames: the environment, time and speedup per
operation, the crossovers, and every cell.

Every value from the frames is data (``md_table`` escapes it as text); the few cells that
carry numbench's own markup (the fastest time in bold) are built as ``Markdown``."""

from __future__ import annotations

import pandas as pd

from numbench.cells import SORT_BY_SIZE
from numbench.contract.conclusions import in_doubt
from numbench.contract.facts import Crossover
from numbench.formatting import (
    display,
    format_ci,
    format_seconds,
    format_size,
    format_speedup,
    missing,
    series_labels,
)
from numbench.report.markdown import Markdown, md_table, md_text


def _unique(values) -> str:
    vals = sorted({str(v) for v in values if not missing(v) and str(v) != ""})
    return ", ".join(vals) if vals else "–"


def short_blas(text) -> str:
    """The BLAS name without a build-configuration dump (PyTorch reports its whole config)."""
    if missing(text):
        return ""
    text = str(text).strip()
    return text if len(text) <= 60 else text.split(",")[0].strip() + " (…)"


def environment_table(bench: pd.DataFrame) -> str:
    rows = [
        ["Host", _unique(bench["host"])],
        ["CPU model", _unique(bench["cpu_model"])],
    ]
    if "cpu_count" in bench:
        rows.append(["Cores (logical)", _unique(bench["cpu_count"].dropna().astype(int))])
    if "ram_gb" in bench:
        rows.append(["RAM", _unique(f"{v:.1f} GB" for v in bench["ram_gb"].dropna())])
    gpu = bench[bench["device"] == "gpu"]
    if gpu.empty:
        gpu_text = "not asked for (device: cpu)"
    elif (gpu["status"] == "unavailable").all():
        gpu_text = "none found (every GPU cell unavailable)"
    else:
        gpu_text = _unique(gpu.loc[gpu["status"] != "unavailable", "device_name"])
    rows += [
        ["GPU", gpu_text],
        ["OS", _unique(bench["platform"])],
        ["Python", _unique(bench["python_version"])],
        ["dtype", _unique(bench["dtype"])],
        ["Threads per cell", _unique(bench["threads"].dropna().astype(int))],
    ]
    for lib, g in bench.groupby("library", sort=True):
        version = _unique(g["library_version"])
        blas = _unique(short_blas(b) for b in g["blas"])
        rows.append([display(lib), version + (f"; BLAS: {blas}" if blas != "–" else "")])
    return md_table(["", "value"], rows)


def _time_table(d: pd.DataFrame, sizes) -> str:
    series = sorted(d["series"].unique())
    rows = []
    for size in sizes:
        at = d[d["size"] == size].set_index("series")
        ok = at[at["status"] == "ok"]
        best = ok["median_s"].idxmin() if not ok.empty else None
        row = [format_size(size)]
        for s in series:
            if s not in at.index:
                row.append("")
            elif at.loc[s, "status"] != "ok":
                row.append(at.loc[s, "status"])
            else:
                t = format_seconds(at.loc[s, "median_s"])
                row.append(Markdown(f"**{md_text(t)}**") if s == best else t)
        rows.append(row)
    return md_table(["n"] + series, rows, "r" * (len(series) + 1))


def _speedup_table(sp: pd.DataFrame, sizes) -> str:
    series = sorted(sp["series"].unique())
    rows = []
    for size in sizes:
        at = sp[sp["size"] == size].set_index("series")
        row = [format_size(size)]
        for s in series:
            if s not in at.index or missing(at.loc[s, "speedup"]):
                row.append("")
                continue
            r = at.loc[s]
            text = f"{format_speedup(r.speedup)} {format_ci(r.speedup_ci_low, r.speedup_ci_high)}"
            text += " ns" if r.verdict == "same" else ""
            row.append(text + (" ?" if r.in_doubt else ""))
        rows.append(row)
    return md_table(["n"] + series, rows, "r" * (len(series) + 1))


def operation_tables(bench: pd.DataFrame, speedups: pd.DataFrame, op: str) -> str:
    """Median time per size and series, and the speedups over the baseline."""
    multi = bench["device"].nunique() > 1
    d = bench[bench["operation"] == op].copy()
    # series_labels names the dtype and the threads too where the grid has several
    d["series"] = series_labels(d, with_device=multi)
    sizes = sorted(d["size"].unique())
    out = [
        "Median time per call (fastest in bold; a status where a cell was not measured):",
        "",
        _time_table(d, sizes),
    ]
    sp = speedups[speedups["operation"] == op].copy()
    if not sp.empty:
        sp["series"] = series_labels(sp, with_device=multi)
        sp["in_doubt"] = in_doubt(sp)
        out += [
            "",
            "Speedup over the baseline, 95% CI in brackets (ns: the same speed, the CI "
            "contains 1 or the speedup is within the margin; ?: in doubt, the CI holds the "
            "margin or 1 / margin, see Warnings):",
            "",
            _speedup_table(sp, sizes),
        ]
    return "\n".join(out)


def crossover_table(crossovers: tuple[Crossover, ...]) -> str:
    if not crossovers:
        return "No speedups, so no crossovers."
    rows = []
    order = sorted(crossovers, key=lambda c: (c.operation, c.library, c.device, c.dtype, c.host))
    for c in order:
        crossing = c.kind == "crosses"
        rows.append(
            [
                c.operation,
                c.library,
                c.device,
                c.kind + (" ?" if c.settled is False else ""),
                format_size(c.crossover_size, approx=True) if crossing else "",
                f"{format_size(c.ci_low, approx=True, mark=False)} to "
                f"{format_size(c.ci_high, approx=True, mark=False)}"
                if crossing
                else "",
                f"{format_size(c.below_size)} to {format_size(c.above_size)}" if crossing else "",
            ]
        )
    table = md_table(
        ["operation", "library", "device", "kind", "crossover n", "CI", "between sizes"],
        rows,
        "lllllrr",
    )
    if any(c.settled is False for c in crossovers):
        table += (
            "\n\n?: the kind rests on a verdict in doubt (its interval holds the margin; "
            "see Warnings), so a second run may give another kind."
        )
    return table


def every_cell_table(df: pd.DataFrame) -> str:
    rows = []
    for r in df.sort_values(list(SORT_BY_SIZE)).itertuples(index=False):
        rel = "" if missing(r.rel_error) else f"{r.rel_error:.1e}"
        rows.append(
            [
                r.library,
                r.device,
                r.operation,
                f"{r.size}",
                r.dtype,
                "" if missing(r.threads) else f"{int(r.threads)}",
                r.status,
                format_seconds(r.median_s),
                format_seconds(r.iqr_s),
                format_seconds(r.first_call_s),
                rel,
                " ".join(
                    str(n)
                    for n in (r.error, getattr(r, "threads_note", None))
                    if not missing(n) and n
                ),
            ]
        )
    header = ["library", "device", "operation", "size", "dtype", "threads", "status", "median"]
    header += ["IQR", "first call", "rel. error", "note"]
    return md_table(header, rows, "lllllllrrrrl")
