"""results/summary.md: the human answer, written from the data.

The summary reads the three tables (benchmarks, speedups, crossovers) and nothing else, so it
can be re-rendered without re-running a cell. ``render`` returns Markdown; ``to_html`` turns it
into the standalone page the Snakemake report shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from numbench.charts import OPERATION_CHARTS, chart_names, operation_chart
from numbench.formatting import (
    display,
    format_ci,
    format_seconds,
    format_size,
    format_sizes,
    format_speedup,
    md_cell,
    md_table,
    missing,
    series_label,
    series_labels,
    slowdown,
    who,
)
from numbench.gpu_report import gpu_gaps_notice, no_gpu_notice
from numbench.speedups import check_baseline
from numbench.tables import write_text_atomic

NOISY_IQR_FRACTION = 0.10
TOP_SPEEDUPS = 5


# -- sections -----------------------------------------------------------------------------------
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


def fastest_line(bench: pd.DataFrame, op: str, size: int, multi_device: bool) -> str:
    d = bench[(bench["operation"] == op) & (bench["size"] == size) & (bench["status"] == "ok")]
    if d.empty:
        return f"n = {format_size(size)}: no cell measured"
    d = d.sort_values("median_s")
    best = d.iloc[0]
    rest = d.iloc[1:]
    # Within noise: the runner-up's CI of the median reaches the winner's.
    tied = rest[rest["ci_low_s"] <= best["ci_high_s"]]
    text = (
        f"n = {format_size(size)}: **{who(best.library, best.device, multi_device)}** "
        f"({format_seconds(best.median_s)})"
    )
    if not tied.empty:
        names = ", ".join(who(r.library, r.device, multi_device) for r in tied.itertuples())
        text += f", within noise of {names}"
    elif len(rest):
        second = rest.iloc[0]
        text += (
            f", {second.median_s / best.median_s:.2g}× ahead of "
            f"{who(second.library, second.device, multi_device)}"
        )
    return text


def crossover_sentence(row, speedups: pd.DataFrame, baseline: str, multi_device: bool) -> str:
    name = who(row.library, row.device, multi_device)
    g = speedups[
        (speedups["library"] == row.library)
        & (speedups["device"] == row.device)
        & (speedups["operation"] == row.operation)
        & (speedups["dtype"] == row.dtype)
        & (speedups["host"] == row.host)
        & speedups["speedup"].notna()
    ].sort_values("size")
    if g.empty:
        return f"{name} against {baseline} on {row.operation}: no speedup could be computed."
    last = g.iloc[-1]
    at_last = (
        f"{format_speedup(last.speedup)} at n = {format_size(last['size'])} "
        f"{format_ci(last.speedup_ci_low, last.speedup_ci_high)}".rstrip()
    )
    span = f"n = {format_size(g['size'].min())} to {format_size(g['size'].max())}"
    if row.kind == "crosses":
        return (
            f"{name} beats {baseline} on {row.operation} from n "
            f"{format_size(row.crossover_size, approx=True)} "
            f"(between {format_size(row.below_size)} and {format_size(row.above_size)}; "
            f"CI {format_size(row.ci_low, approx=True, mark=False)} to "
            f"{format_size(row.ci_high, approx=True, mark=False)}), "
            f"{at_last}."
        )
    ties = g[~g["significant"]]
    tie_text = (
        f"; tied at n = {format_sizes(ties['size'])}, where the CI contains 1"
        if not ties.empty
        else ""
    )
    if row.kind == "always_faster":
        if ties.empty:
            return f"{name} beats {baseline} on {row.operation} at every size ({span}), {at_last}."
        faster = g[g["significant"]]["size"]
        return (
            f"{name} beats {baseline} on {row.operation} at n = {format_sizes(faster)} and is never "
            f"slower{tie_text}; {at_last}."
        )
    if row.kind == "never_faster":
        best = g.loc[g["speedup"].idxmax()]
        slower = g[g["significant"]]["size"]
        where = f"({span})" if ties.empty else f"(slower at n = {format_sizes(slower)}{tie_text})"
        return (
            f"{name} is never faster than {baseline} on {row.operation} {where}; at best "
            f"{format_speedup(best.speedup)} at n = {format_size(best['size'])} "
            f"{format_ci(best.speedup_ci_low, best.speedup_ci_high)}".rstrip()
            + (f"{slowdown(best.speedup)}." if best.significant else ", a tie.")
        )
    if row.kind == "crosses_back":
        faster = g[g["significant"] & (g["speedup_ci_low"] > 1)]["size"]
        slower = g[g["significant"] & (g["speedup_ci_high"] < 1)]["size"]
        back = slower[slower > faster.min()].min()
        return (
            f"{name} beats {baseline} on {row.operation} at n = "
            f"{', '.join(format_size(s) for s in faster)} but falls behind again at "
            f"n = {format_size(back)}; no single crossover."
        )
    why = (
        "fewer than two sizes have a speedup"
        if len(g) < 2
        else "every speedup CI contains 1 (within noise)"
    )
    return f"{name} against {baseline} on {row.operation}: no verdict, {why}."


def measured_on_several_devices(bench: pd.DataFrame) -> bool:
    """Whether prose must name the device: ok cells exist on more than one device."""
    return bench.loc[bench["status"] == "ok", "device"].nunique() > 1


def findings(
    bench: pd.DataFrame, speedups: pd.DataFrame, crossovers: pd.DataFrame, baseline: str
) -> str:
    multi = measured_on_several_devices(bench)
    lines = ["### Fastest library per operation", ""]
    for op in sorted(bench["operation"].unique()):
        sizes = sorted(bench.loc[bench["operation"] == op, "size"].unique())
        ends = [sizes[0]] if len(sizes) == 1 else [sizes[0], sizes[-1]]
        parts = [fastest_line(bench, op, int(s), multi) for s in ends]
        lines.append(f"- **{op}**: " + "; ".join(parts) + ".")
    sig = speedups[speedups["significant"] & speedups["speedup"].notna()]
    lines += ["", f"### Largest speedups over {baseline}", ""]
    up = sig[sig["speedup"] > 1].sort_values("speedup", ascending=False).head(TOP_SPEEDUPS)
    if up.empty:
        lines.append(f"- No library is significantly faster than {baseline} anywhere.")
    for r in up.itertuples():
        lines.append(
            f"- {who(r.library, r.device, multi)} on {r.operation} at n = {format_size(r.size)}: "
            f"**{format_speedup(r.speedup)}** {format_ci(r.speedup_ci_low, r.speedup_ci_high)}"
        )
    down = sig[sig["speedup"] < 1].sort_values("speedup").head(3)
    if not down.empty:
        lines += ["", f"Largest slowdowns against {baseline}:", ""]
        for r in down.itertuples():
            lines.append(
                f"- {who(r.library, r.device, multi)} on {r.operation} at n = {format_size(r.size)}: "
                f"{format_speedup(r.speedup)} {format_ci(r.speedup_ci_low, r.speedup_ci_high)}"
                f"{slowdown(r.speedup)}"
            )
    lines += ["", "### Crossovers", ""]
    if crossovers.empty:
        lines.append("- No speedups, so no crossovers.")
    order = {
        "crosses": 0,
        "always_faster": 1,
        "crosses_back": 2,
        "never_faster": 3,
        "insufficient": 4,
    }
    cr = crossovers.assign(_o=crossovers["kind"].map(order)).sort_values(
        ["_o", "operation", "library"]
    )
    for r in cr.itertuples():
        lines.append("- " + crossover_sentence(r, speedups, baseline, multi))
    return "\n".join(lines)


def operation_tables(bench: pd.DataFrame, speedups: pd.DataFrame, op: str) -> str:
    d = bench[bench["operation"] == op].copy()
    multi = bench["device"].nunique() > 1
    d["series"] = series_labels(d, with_device=multi)
    series = sorted(d["series"].unique())
    sizes = sorted(d["size"].unique())
    time_rows = []
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
                row.append(f"**{t}**" if s == best else t)
        time_rows.append(row)
    out = [
        "Median time per call (fastest in bold; a status where a cell was not measured):",
        "",
        md_table(["n"] + series, time_rows, "r" * (len(series) + 1)),
    ]
    sp = speedups[speedups["operation"] == op].copy()
    if not sp.empty:
        sp["series"] = series_labels(sp, with_device=multi)
        sseries = sorted(sp["series"].unique())
        rows = []
        for size in sizes:
            at = sp[sp["size"] == size].set_index("series")
            row = [format_size(size)]
            for s in sseries:
                if s not in at.index or missing(at.loc[s, "speedup"]):
                    row.append("")
                    continue
                r = at.loc[s]
                text = (
                    f"{format_speedup(r.speedup)} {format_ci(r.speedup_ci_low, r.speedup_ci_high)}"
                )
                row.append(text if r.significant else text + " ns")
            rows.append(row)
        out += [
            "",
            "Speedup over the baseline, 95% CI in brackets (ns: the CI contains 1):",
            "",
            md_table(["n"] + sseries, rows, "r" * (len(sseries) + 1)),
        ]
    return "\n".join(out)


def crossover_table(crossovers: pd.DataFrame) -> str:
    if crossovers.empty:
        return "No speedups, so no crossovers."
    rows = []
    for r in crossovers.sort_values(["operation", "library", "device"]).itertuples():
        crossing = r.kind == "crosses"
        rows.append(
            [
                r.operation,
                r.library,
                r.device,
                r.kind,
                format_size(r.crossover_size, approx=True) if crossing else "",
                f"{format_size(r.ci_low, approx=True, mark=False)} to "
                f"{format_size(r.ci_high, approx=True, mark=False)}"
                if crossing
                else "",
                f"{format_size(r.below_size)} to {format_size(r.above_size)}" if crossing else "",
            ]
        )
    return md_table(
        ["operation", "library", "device", "kind", "crossover n", "CI", "between sizes"],
        rows,
        "lllllrr",
    )


def warnings(bench: pd.DataFrame, speedups: pd.DataFrame) -> str:
    lines = []
    ok = bench[bench["status"] == "ok"]
    noisy = ok[ok["iqr_s"] > NOISY_IQR_FRACTION * ok["median_s"]]
    if not noisy.empty:
        lines += [
            f"Noisy cells (IQR above {NOISY_IQR_FRACTION:.0%} of the median): their speedups "
            "carry wide intervals.",
            "",
        ]
        for r in noisy.sort_values(["operation", "size", "library"]).itertuples():
            lines.append(
                f"- {series_label(r.library, r.device, True)} {r.operation} n = {format_size(r.size)}: IQR "
                f"{format_seconds(r.iqr_s)} = {r.iqr_s / r.median_s:.0%} of the median "
                f"{format_seconds(r.median_s)}"
            )
        lines.append("")
    bad = bench[bench["status"] != "ok"]
    if not bad.empty:
        lines += ["Cells without a usable measurement:", ""]
        for r in bad.sort_values(["status", "operation", "size", "library"]).itertuples():
            reason = md_cell(r.error) or "no reason recorded"
            lines.append(
                f"- `{r.status}`: {series_label(r.library, r.device, True)} {r.operation} n = "
                f"{format_size(r.size)}: {reason}"
            )
        lines.append("")
    orphans = speedups[speedups["speedup"].isna()]
    if not orphans.empty:
        lines += ["Cells with no speedup because their baseline cell was not measured:", ""]
        for r in orphans.itertuples():
            lines.append(
                f"- {series_label(r.library, r.device, True)} {r.operation} n = {format_size(r.size)}"
            )
        lines.append("")
    if not lines:
        return (
            "None: every cell was measured, correct, and quiet "
            f"(IQR within {NOISY_IQR_FRACTION:.0%} of the median)."
        )
    return "\n".join(lines).rstrip()


def chart_links(operations: list[str], charts_dir: str) -> str:
    lines = []
    for name in chart_names(operations):
        base = f"{charts_dir}/{name}"
        lines.append(f"- [{name}]({base}.html) ([svg]({base}.svg), [png]({base}.png))")
    return "\n".join(lines)


def operation_chart_links(op: str, charts_dir: str) -> str:
    """'Charts: [time](charts/time_fft.html), [speedup](...), [throughput](...).'"""
    links = [
        f"[{kind}]({charts_dir}/{operation_chart(kind, op)}.html)" for kind in OPERATION_CHARTS
    ]
    return "Charts: " + ", ".join(links) + "."


METHODOLOGY = """\
Every (library, device, operation, size) cell ran in a fresh process, one timing cell at a time
on the host, with the same thread settings for every library made before it was imported.
Inputs were converted to the library's arrays outside any timing. The first call was timed
alone (`first_call_s`: tracing, compilation, warm-up) and never enters the samples. Each
timed region waits for the result (`block_until_ready`, device synchronisation,
materialisation). Loops per sample were calibrated so a sample lasts at least
`min_sample_time`; times are per call. The output was checked against a float64 reference with
a tolerance by dtype: a wrong result is `mismatch` and never used. Times are medians with a 95%
percentile-bootstrap CI of the median. A speedup is the baseline's median over the library's
median on the same host, operation, size and dtype; its 95% CI comes from bootstrap resampling
both cells' samples independently, and it is *significant* when the CI excludes 1. For
crossovers, a size counts as faster (slower) only when its speedup CI lies wholly above (below)
1; sizes whose CI contains 1 are ties and neither make nor break a claim. A library *crosses*
when slower sizes are followed by faster sizes and never by a slower one again; the crossover is
interpolated on log-log axes where the speedup rises through 1, and its CI is where the upper
and the lower CI bounds of the speedup do."""


def every_cell_table(df: pd.DataFrame) -> str:
    rows = []
    for r in df.sort_values(["operation", "size", "library", "device"]).itertuples(index=False):
        rel = "" if missing(r.rel_error) else f"{r.rel_error:.1e}"
        rows.append(
            [
                r.library,
                r.device,
                r.operation,
                f"{r.size}",
                r.dtype,
                r.status,
                format_seconds(r.median_s),
                format_seconds(r.iqr_s),
                format_seconds(r.first_call_s),
                rel,
                md_cell(r.error),
            ]
        )
    header = ["library", "device", "operation", "size", "dtype", "status", "median", "IQR"]
    header += ["first call", "rel. error", "note"]
    return md_table(header, rows, "llllllrrrrl")


def render(
    bench: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    baseline_library: str,
    baseline_device: str,
    charts_dir: str = "charts",
) -> str:
    check_baseline(baseline_library, baseline_device, speedups, crossovers)
    baseline = (baseline_library, baseline_device)
    base_name = who(baseline[0], baseline[1], measured_on_several_devices(bench))
    counts = bench["status"].value_counts().to_dict()
    status_line = ", ".join(f"{counts[s]} {s}" for s in sorted(counts))
    operations = sorted(bench["operation"].unique())
    parts = ["# numbench summary", ""]
    for notice in (no_gpu_notice(bench), gpu_gaps_notice(bench)):
        if notice:
            parts += [notice, ""]
    parts += [
        f"{len(bench)} cells: {status_line}. Baseline: {display(baseline[0])} on "
        f"{baseline[1]}; a speedup above 1 means faster than the baseline.",
        "",
        "## Key findings",
        "",
        findings(bench, speedups, crossovers, base_name),
        "",
        "## Environment",
        "",
        environment_table(bench),
        "",
        "## Results by operation",
        "",
    ]
    for op in operations:
        parts += [
            f"### {op}",
            "",
            operation_tables(bench, speedups, op),
            "",
            operation_chart_links(op, charts_dir),
            "",
        ]
    parts += [
        "## Crossovers",
        "",
        crossover_table(crossovers),
        "",
        "## Warnings",
        "",
        warnings(bench, speedups),
        "",
        "## Charts",
        "",
        "Each chart is an interactive `.html` (opens offline), an `.svg` and a `.png`.",
        "",
        chart_links(operations, charts_dir),
        "",
        "## Methodology",
        "",
        METHODOLOGY,
        "",
        "## Every cell",
        "",
        every_cell_table(bench),
        "",
    ]
    return "\n".join(parts)


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>numbench summary</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 70em; margin: 2em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}
th {{ background: #f3f3f3; }}
blockquote {{ border-left: 4px solid #c33; margin: 0; padding: 0.2em 1em; background: #fff4f4; }}
code {{ background: #f3f3f3; }}
</style></head><body>
{body}
</body></html>
"""


def to_html(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return HTML_PAGE.format(body=MarkdownIt("commonmark").enable("table").render(markdown))


def write_summary(
    benchmarks: str | os.PathLike,
    speedups: str | os.PathLike,
    crossovers: str | os.PathLike,
    output: str | os.PathLike,
    charts_dir: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
    html_output: str | os.PathLike | None = None,
) -> str:
    bench = pd.read_parquet(benchmarks)
    sp = pd.read_parquet(speedups)
    cr = pd.read_parquet(crossovers)
    rel = os.path.relpath(Path(charts_dir), Path(output).parent).replace(os.sep, "/")
    text = render(bench, sp, cr, baseline_library, baseline_device, charts_dir=rel)
    write_text_atomic(text, output)
    if html_output is not None:
        write_text_atomic(to_html(text), html_output)
    return text
