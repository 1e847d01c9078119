"""results/summary.md: the human answer, written from the data.

The summary reads the three tables (benchmarks, speedups, crossovers) and nothing else, so it
can be re-rendered without re-running a cell. ``numbench.findings`` decides what to say; this
module words it. ``render`` returns Markdown; ``to_html`` turns it into the standalone page the
Snakemake report shows; ``write_summary`` writes both.

Every value read from the tables is data, not markup: a cell file from another host may name
its host ``<img src=x onerror=...>``. So each one enters the Markdown through ``md_text`` (or
``md_code``, or a table's cells), which leaves it plain text under any renderer, and the HTML is
rendered with raw HTML off as a second wall. Only numbench's own words are Markdown.
"""

from __future__ import annotations

import os
import re
from itertools import groupby
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from numbench.charts import OPERATION_CHARTS, chart_names, operation_chart
from numbench.dimensions import dimension_findings, dimension_sections
from numbench.findings import (
    BUSY_CPU_TAKEN,
    NOISY_IQR_FRACTION,
    BusyCell,
    CellWarning,
    Crossover,
    DoubtfulVerdict,
    Fastest,
    Findings,
    Firmness,
    NoBaseline,
    NoisyCell,
    NotMeasured,
    SpeedupFact,
    Tie,
    UnmeasuredCell,
    UnstableCell,
    decide,
)
from numbench.formatting import (
    display,
    format_ci,
    format_seconds,
    format_size,
    format_sizes,
    format_speedup,
    md_code,
    md_text,
    series_label,
    slowdown,
    who,
)
from numbench.gpu_report import render_gpu_notice
from numbench.pipelining import pipeline_findings, pipeline_sections
from numbench.summary_tables import (
    crossover_table,
    environment_table,
    every_cell_table,
    operation_tables,
)
from numbench.tables import write_text_atomic


# -- key findings -------------------------------------------------------------------------------
def _who(library: str, device: str, multi_device: bool) -> str:
    """``who`` as Markdown text: the library and device names come from the tables."""
    return md_text(who(library, device, multi_device))


def fastest_part(fact: Fastest, multi_device: bool) -> str:
    """'n = 10^3: **JAX** (1.2 µs), 1.5× ahead of NumPy'."""
    where = f"n = {format_size(fact.size)}" + (
        f" ({md_text(fact.setting)})" if fact.setting else ""
    )
    if isinstance(fact, NotMeasured):
        return f"{where}: no cell measured"
    best = fact.fastest
    text = (
        f"{where}: **{_who(best.library, best.device, multi_device)}** "
        f"({format_seconds(best.median_s)})"
    )
    if isinstance(fact, Tie):
        names = ", ".join(_who(t.library, t.device, multi_device) for t in fact.within_noise)
        return text + f", within noise of {names}"
    if fact.runner_up is not None:
        second = fact.runner_up
        text += f", {fact.lead:.2g}× ahead of {_who(second.library, second.device, multi_device)}"
    return text


def speedup_line(fact: SpeedupFact, multi_device: bool, bold: bool) -> str:
    value = format_speedup(fact.speedup)
    return (
        f"- {_who(fact.library, fact.device, multi_device)} on {md_text(fact.operation)} at n = "
        f"{format_size(fact.size)}: {f'**{value}**' if bold else value} "
        f"{format_ci(fact.ci_low, fact.ci_high)}"
    )


def crossover_sentence(c: Crossover, baseline: str, multi_device: bool) -> str:
    """One crossover in words; ``baseline`` is the baseline's name in prose (Markdown)."""
    name = _who(c.library, c.device, multi_device)
    op = md_text(c.operation)
    if not c.points:
        return f"{name} against {baseline} on {op}: no speedup could be computed."
    last = c.last
    at_last = (
        f"{format_speedup(last.speedup)} at n = {format_size(last.size)} "
        f"{format_ci(last.ci_low, last.ci_high)}".rstrip()
    )
    span = f"n = {format_size(c.points[0].size)} to {format_size(c.points[-1].size)}"
    if c.kind == "crosses":
        return (
            f"{name} beats {baseline} on {op} from n "
            f"{format_size(c.crossover_size, approx=True)} "
            f"(between {format_size(c.below_size)} and {format_size(c.above_size)}; "
            f"CI {format_size(c.ci_low, approx=True, mark=False)} to "
            f"{format_size(c.ci_high, approx=True, mark=False)}), "
            f"{at_last}."
        )
    tie_text = f"; the same speed at n = {format_sizes(c.tied)}" if c.tied else ""
    if c.kind == "always_faster":
        if not c.tied:
            return f"{name} beats {baseline} on {op} at every size ({span}), {at_last}."
        return (
            f"{name} beats {baseline} on {op} at n = {format_sizes(c.faster)} and is never "
            f"slower{tie_text}; {at_last}."
        )
    if c.kind == "never_faster":
        best = c.best
        where = f"({span})" if not c.tied else f"(slower at n = {format_sizes(c.slower)}{tie_text})"
        return (
            f"{name} is never faster than {baseline} on {op} {where}; at best "
            f"{format_speedup(best.speedup)} at n = {format_size(best.size)} "
            f"{format_ci(best.ci_low, best.ci_high)}".rstrip()
            + (f"{slowdown(best.speedup)}." if best.verdict == "slower" else ", the same speed.")
        )
    if c.kind == "crosses_back":
        return (
            f"{name} beats {baseline} on {op} at n = "
            f"{', '.join(format_size(s) for s in c.faster)} but falls behind again at "
            f"n = {format_size(c.back_size)}; no single crossover."
        )
    why = (
        "fewer than two sizes have a speedup"
        if len(c.points) < 2
        else "every size is the same speed (CI holds 1, or within the margin)"
    )
    return f"{name} against {baseline} on {op}: no verdict, {why}."


def key_findings(f: Findings, baseline: str) -> str:
    multi = f.multi_device
    lines = ["### Fastest library per operation", ""]
    for op, facts in groupby(f.fastest, key=lambda fact: fact.operation):
        lines.append(
            f"- **{md_text(op)}**: " + "; ".join(fastest_part(x, multi) for x in facts) + "."
        )
    lines += ["", f"### Largest speedups over {baseline}", ""]
    if not f.speedups:
        lines.append(f"- No library is faster than {baseline} beyond the margin anywhere.")
    lines += [speedup_line(s, multi, bold=True) for s in f.speedups]
    if f.slowdowns:
        lines += ["", f"Largest slowdowns against {baseline}:", ""]
        lines += [speedup_line(s, multi, bold=False) + slowdown(s.speedup) for s in f.slowdowns]
    lines += ["", "### Crossovers", ""]
    if not f.crossovers:
        lines.append("- No speedups, so no crossovers.")
    lines += [
        "- "
        + crossover_sentence(c, baseline, multi)
        + (" In doubt: it rests on a verdict in doubt (Warnings)." if c.settled is False else "")
        for c in f.crossovers
    ]
    return "\n".join(lines)


def firmness_line(f: Firmness, margin: float) -> str:
    """How far the verdicts can be trusted to hold on a rerun, in one sentence."""
    doubt = f.verdicts - f.settled
    text = (
        f"How firm: {f.settled} of the {f.verdicts} verdicts are settled (their 95% interval "
        f"holds neither {margin:g}x nor 1/{margin:g}x)"
    )
    if doubt:
        text += f"; {doubt} {'is' if doubt == 1 else 'are'} in doubt (`?`, listed under Warnings)"
    if f.expected is not None:
        text += (
            f". A rerun is expected to repeat about {f.expected:.0f} of the {f.verdicts} "
            f"verdicts ({f.expected / f.verdicts:.0%}; the sum of each verdict's "
            "`repeat_chance` in `speedups.parquet`)"
        )
    return text + "."


# -- warnings -----------------------------------------------------------------------------------
def _cell_name(w: CellWarning) -> str:
    """'jax (cpu) sort n = 10^3'."""
    name = md_text(f"{series_label(w.library, w.device, True)} {w.operation}")
    return f"{name} n = {format_size(w.size)}"


def warnings_text(warnings: tuple[CellWarning, ...]) -> str:
    noisy = [w for w in warnings if isinstance(w, NoisyCell)]
    bad = [w for w in warnings if isinstance(w, UnmeasuredCell)]
    orphans = [w for w in warnings if isinstance(w, NoBaseline)]
    unstable = [w for w in warnings if isinstance(w, UnstableCell)]
    busy = [w for w in warnings if isinstance(w, BusyCell)]
    doubtful = [w for w in warnings if isinstance(w, DoubtfulVerdict)]
    lines = []
    if doubtful:
        m = doubtful[0].margin
        lines += [
            f"Verdicts in doubt: the speedup's 95% interval holds the margin ({m:g}x or "
            f"1/{m:g}x), so a second run may give the other verdict. Read them as "
            "provisional; every other verdict would need its speedup to move beyond its "
            "interval to change.",
            "",
        ]
        lines += [
            f"- {_cell_name(w)}: {format_speedup(w.speedup)} "
            f"{format_ci(w.ci_low, w.ci_high)}, {w.verdict}"
            for w in doubtful
        ]
        lines.append("")
    if unstable:
        lines += [
            "Unstable cells: their processes disagree far beyond their own noise (per-process "
            "medians below); their intervals cover the disagreement, and a rerun may differ.",
            "",
        ]
        lines += [
            f"- {_cell_name(w)}: processes {w.process_spread:.2f}x apart, medians (s) "
            f"{md_text(w.process_medians_s)}"
            for w in unstable
        ]
        lines.append("")
    if busy:
        lines += [
            "Cells measured on a busy machine: other programs used more than "
            f"{BUSY_CPU_TAKEN:.0%} of a kept process's CPUs while it measured, after the "
            "round was measured again (`replicates.max_cpu_taken`); its times include theirs.",
            "",
        ]
        lines += [
            f"- {_cell_name(w)}: {w.cpu_taken:.0%} of a process's CPU time taken; "
            f"{w.set_aside} attempt(s) set aside"
            for w in busy
        ]
        lines.append("")
    if noisy:
        lines += [
            f"Noisy cells (IQR above {NOISY_IQR_FRACTION:.0%} of the median): their speedups "
            "carry wide intervals.",
            "",
        ]
        lines += [
            f"- {_cell_name(w)}: IQR {format_seconds(w.iqr_s)} = {w.iqr_s / w.median_s:.0%} "
            f"of the median {format_seconds(w.median_s)}"
            for w in noisy
        ]
        lines.append("")
    if bad:
        lines += ["Cells without a usable measurement:", ""]
        for w in bad:
            reason = md_text(w.reason) or "no reason recorded"
            lines.append(f"- {md_code(w.status)}: {_cell_name(w)}: {reason}")
        lines.append("")
    if orphans:
        lines += ["Cells with no speedup because their baseline cell was not measured:", ""]
        lines += [f"- {_cell_name(w)}" for w in orphans]
        lines.append("")
    if not lines:
        return (
            "None: every cell was measured, correct, stable across its processes, and quiet "
            f"(IQR within {NOISY_IQR_FRACTION:.0%} of the median, no other program busy on "
            "its CPUs)."
        )
    return "\n".join(lines).rstrip()


# -- the page -----------------------------------------------------------------------------------
def md_link(text: str, target: str) -> str:
    """A Markdown link to a file beside the summary: the text escaped, the target
    percent-encoded (a chart's name holds the operation's, which comes from the tables), so
    that neither can end the link or make another one."""
    return f"[{md_text(text)}]({quote(target, safe='/')})"


def chart_links(operations: list[str], charts_dir: str) -> str:
    lines = []
    for name in chart_names(operations):
        base = f"{charts_dir}/{name}"
        html, svg, png = (
            md_link(t, f"{base}.{ext}")
            for t, ext in ((name, "html"), ("svg", "svg"), ("png", "png"))
        )
        lines.append(f"- {html} ({svg}, {png})")
    return "\n".join(lines)


def operation_chart_links(op: str, charts_dir: str) -> str:
    """'Charts: [time](charts/time_fft.html), [speedup](...), [throughput](...).'"""
    links = [
        md_link(kind, f"{charts_dir}/{operation_chart(kind, op)}.html") for kind in OPERATION_CHARTS
    ]
    return "Charts: " + ", ".join(links) + "."


METHODOLOGY = """\
Every (library, device, operation, size) cell ran in several fresh processes (replicates), one
timing cell at a time on the host, with the same thread settings for every library made before
it was imported. Every cell but the baseline's ran one baseline process beside each of its
own, {pairing}, whatever order the cells ran in. The first rounds of every cell
(`replicates.spread`) ran before any cell's remaining rounds, so a cell's rounds lie minutes
apart and its interval sees the machine's drift between them. A round in which other
programs used more than `replicates.max_cpu_taken` of a process's CPUs while it measured was
measured again, up to twice. The baseline's times pool its own processes and those paired
beside every other cell.
Inputs were converted to the library's arrays outside any timing. The first call was timed
alone (`first_call_s`: tracing, compilation, warm-up) and never enters the samples. Each
timed region waits for the result (`block_until_ready`, device synchronisation,
materialisation). Loops per sample were calibrated so a sample lasts at least
`min_sample_time`; times are per call. A library whose calls return before their work is done
(asynchronous dispatch) was also timed *pipelined*: calls queued back to back, one wait per
sample, every result kept alive until then; speedups and every other table use the per-call
latency. On a device, moving the inputs there and the result back was timed apart. The output was checked against a float64 reference with
a tolerance by dtype: a wrong result is `mismatch` and never used. Times are medians with a 95%
two-level bootstrap CI (processes drawn with replacement, then samples within each). A speedup
is the baseline's median over the library's median on the same host, operation, size and dtype;
its 95% CI comes from the same two-level bootstrap, drawing the same rounds on both sides where
they were paired, and is never narrower than the run's typical round-to-round spread of a
speedup allows for the cell's number of rounds (`ci_floor`). A speedup is *faster* (*slower*) only when its CI lies wholly above (below) 1
**and** it is beyond the margin of {margin:g}x; anything else is *the same speed*, and such
sizes neither make nor break a crossover claim. A library *crosses*
when slower sizes are followed by faster sizes and never by a slower one again; the crossover is
interpolated on log-log axes where the speedup rises through 1, and its CI is where the upper
and the lower CI bounds of the speedup do."""


LOCKSTEP_TEXT = (
    "in lockstep: both processes started, each preparing (import, first call, calibration) "
    "while the other waited, then their samples taken in turns, one of each per turn, so each "
    "speedup compares measurements taken milliseconds apart"
)
BACK_TO_BACK_TEXT = (
    "back to back in a seeded random order, so each speedup compares measurements taken "
    "seconds apart"
)


def pairing_text(bench: pd.DataFrame) -> str:
    """How this run's paired rounds ran (the cells' ``lockstep`` column)."""
    flags = set(bench["lockstep"].dropna()) if "lockstep" in bench else set()
    if flags == {True}:
        return LOCKSTEP_TEXT
    if flags == {False}:
        return BACK_TO_BACK_TEXT
    if flags:
        return (
            f"{LOCKSTEP_TEXT} (the cells measured with `replicates.lockstep: false`: back to back)"
        )
    return BACK_TO_BACK_TEXT


def render(
    bench: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    baseline_library: str,
    baseline_device: str,
    margin: float,
    charts_dir: str = "charts",
    precision: pd.DataFrame | None = None,
    scaling: pd.DataFrame | None = None,
) -> str:
    f = decide(bench, speedups, crossovers, baseline_library, baseline_device, margin)
    base_name = _who(baseline_library, baseline_device, f.multi_device)
    counts = bench["status"].value_counts().to_dict()
    status_line = ", ".join(f"{counts[s]} {md_text(s)}" for s in sorted(counts))
    operations = sorted(bench["operation"].unique())
    parts = ["# numbench summary", ""]
    if f.gpu_notice is not None:
        parts += [render_gpu_notice(f.gpu_notice), ""]
    parts += [
        f"{len(bench)} cells: {status_line}. Baseline: {md_text(display(baseline_library))} on "
        f"{md_text(baseline_device)}; a speedup above 1 means faster than the baseline.",
        "",
        *([firmness_line(f.firmness, margin), ""] if f.firmness is not None else []),
        "## Key findings",
        "",
        key_findings(f, base_name),
        "",
        *dimension_findings(precision, scaling),
        *pipeline_findings(bench, margin, f.multi_device),
        "## Environment",
        "",
        environment_table(bench),
        "",
        "## Results by operation",
        "",
    ]
    for op in operations:
        parts += [
            f"### {md_text(op)}",
            "",
            operation_tables(bench, speedups, op),
            "",
            operation_chart_links(op, charts_dir),
            "",
        ]
    parts += dimension_sections(precision, scaling)
    parts += pipeline_sections(bench)
    parts += [
        "## Crossovers",
        "",
        crossover_table(f.crossovers),
        "",
        "## Warnings",
        "",
        warnings_text(f.warnings),
        "",
        "## Charts",
        "",
        "Each chart is an interactive `.html` (opens offline), an `.svg` and a `.png`.",
        "",
        chart_links(operations, charts_dir),
        "",
        "## Methodology",
        "",
        METHODOLOGY.format(margin=margin, pairing=pairing_text(bench)),
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


#: a URL that names its scheme (``https:``, ``javascript:``, ``data:``) or its host (``//``)
_LEAVES_THE_FOLDER = re.compile(r"^\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*:|[/\\]{2})")


def is_local_link(url: str) -> bool:
    """The summary links only to files beside it (the charts): a link or an image to
    anywhere else could only have come from data, so it is rendered as text."""
    return not _LEAVES_THE_FOLDER.match(url)


def to_html(markdown: str) -> str:
    """The standalone page: CommonMark with tables, raw HTML off (any ``<tag>`` left in the
    text is shown as text), and links and images only to files beside the page. The text
    from data is escaped already (``md_text``); these are the second wall, for any text
    that reached the Markdown without it."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    default_check = renderer.validateLink
    renderer.validateLink = lambda url: is_local_link(url) and default_check(url)
    return HTML_PAGE.format(body=renderer.render(markdown))


def write_summary(
    benchmarks: str | os.PathLike,
    speedups: str | os.PathLike,
    crossovers: str | os.PathLike,
    output: str | os.PathLike,
    charts_dir: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
    margin: float,
    html_output: str | os.PathLike | None = None,
    precision: str | os.PathLike | None = None,
    scaling: str | os.PathLike | None = None,
) -> str:
    bench = pd.read_parquet(benchmarks)
    sp = pd.read_parquet(speedups)
    cr = pd.read_parquet(crossovers)
    prec = None if precision is None else pd.read_parquet(precision)
    scal = None if scaling is None else pd.read_parquet(scaling)
    rel = os.path.relpath(Path(charts_dir), Path(output).parent).replace(os.sep, "/")
    text = render(bench, sp, cr, baseline_library, baseline_device, margin, rel, prec, scal)
    write_text_atomic(text, output)
    if html_output is not None:
        write_text_atomic(to_html(text), html_output)
    return text
