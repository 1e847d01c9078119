"""results/summary.md: the human answer, written from the data.

The summary reads the findings (results/findings.parquet: what ``numbench.analyse.findings``
decided, read back by ``numbench.contract.conclusions``), the tables it shows (benchmarks,
speedups) and the optional ones it is given (precision, scaling, roofs, versions), and nothing
else, so it can be re-rendered without re-running a cell. It decides nothing: it words the
findings and tables the tables. ``render`` returns Markdown; ``to_html`` turns it into the standalone page the
Snakemake report shows; ``write_summary`` writes both.

Every value read from the tables is data, not markup: a cell file from another host may name
its host ``<img src=x onerror=...>``. So each one enters the Markdown through ``md_text`` (or
``md_code``, or a table's cells), which leaves it plain text under any renderer, and the HTML is
rendered with raw HTML off as a second wall. Only numbench's own words are Markdown.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from numbench.contract import write_text_atomic
from numbench.contract.conclusions import check_baseline, read_findings, read_versions
from numbench.contract.facts import Findings
from numbench.formatting import display
from numbench.machine.report import machine_line, time_line
from numbench.report.markdown import (
    crossover_table,
    environment_table,
    every_cell_table,
    md_text,
    operation_tables,
)
from numbench.report.sections import (
    compile_cache_lines,
    dimension_findings,
    dimension_sections,
    pipeline_findings,
    pipeline_sections,
    render_gpu_notice,
    run_time_section,
    versions_section,
    worker_start_lines,
)
from numbench.report.sentences import (
    chart_links,
    firmness_line,
    key_findings,
    operation_chart_links,
    warnings_text,
    who_md,
)
from numbench.roofline.contract import read_roofs
from numbench.roofline.report import roofline_section

METHODOLOGY = """\
Every (library, device, operation, size) cell ran in several fresh processes (replicates), one
timing cell at a time on the host, with the same thread settings for every library made before
it was imported. Every cell but the baseline's ran one baseline process beside each of its
own, {pairing}, whatever order the cells ran in. The first rounds of every cell
(`replicates.early_rounds`) ran before any cell's remaining rounds, so a cell's rounds lie minutes
apart and its interval sees the machine's drift between them. A round in which other
programs used more than `replicates.max_cpu_taken` of a process's CPUs while it measured was
measured again, up to twice, unless a half-second look found the others still busy (it was then
kept as measured). The baseline's times pool its own processes and those paired
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
    f: Findings,
    charts_dir: str = "charts",
    precision: pd.DataFrame | None = None,
    scaling: pd.DataFrame | None = None,
    roofs: pd.DataFrame | None = None,
    versions: pd.DataFrame | None = None,
) -> str:
    """The summary's Markdown: the findings ``f`` worded, the tables tabled."""
    baseline_library, baseline_device, margin = f.baseline_library, f.baseline_device, f.margin
    base_name = who_md(baseline_library, baseline_device, f.multi_device)
    counts = bench["status"].value_counts().to_dict()
    status_line = ", ".join(f"{counts[s]} {md_text(s)}" for s in sorted(counts))
    operations = sorted(bench["operation"].unique())
    parts = ["# numbench summary", ""]
    if f.machine is not None:
        parts += [machine_line(f.machine), ""]
    if f.run_time is not None:
        parts += [time_line(f.run_time), ""]
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
        *dimension_findings(f),
        *pipeline_findings(f),
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
    parts += roofline_section(bench, roofs, charts_dir, f.roofline)
    parts += versions_section(versions, margin, charts_dir)
    parts += run_time_section(f.run_time) + worker_start_lines(bench) + compile_cache_lines(bench)
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
    findings: str | os.PathLike,
    output: str | os.PathLike,
    charts_dir: str | os.PathLike,
    html_output: str | os.PathLike | None = None,
    precision: str | os.PathLike | None = None,
    scaling: str | os.PathLike | None = None,
    roofs: str | os.PathLike | None = None,
    versions: str | os.PathLike | None = None,
) -> str:
    """Write results/summary.md (and its HTML twin) from the files at these paths."""
    bench = pd.read_parquet(benchmarks)
    sp = pd.read_parquet(speedups)
    f = read_findings(findings)
    # the speedups tabled must be those the findings name the baseline of
    check_baseline(f.baseline_library, f.baseline_device, sp)
    prec = None if precision is None else pd.read_parquet(precision)
    scal = None if scaling is None else pd.read_parquet(scaling)
    rel = os.path.relpath(Path(charts_dir), Path(output).parent).replace(os.sep, "/")
    roof_table = None if roofs is None else read_roofs(roofs).to_pandas()
    vers = None if versions is None else read_versions(versions)
    text = render(bench, sp, f, rel, prec, scal, roof_table, versions=vers)
    write_text_atomic(text, output)
    if html_output is not None:
        write_text_atomic(to_html(text), html_output)
    return text
