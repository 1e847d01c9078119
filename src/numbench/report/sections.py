"""The summary's parts that only some runs have, each written where its facts or its table
are given and absent otherwise; ``numbench.report.summary`` puts them in their places:

* The GPU notice (``Findings.gpu_notice``), at the top. When every GPU cell asked for was
  ``unavailable`` it says plainly that no GPU was found and lists the skipped cells, grouped
  by library and reason, with operations and sizes folded onto one line, and how to measure
  a GPU. When some GPU cells ran it is the milder note listing the ones that did not.
* The grid's dtype and threads dimensions: the key findings' sentences (``Findings.precision``
  and ``Findings.scaling``) and the "Precision" and "Parallel scaling" sections (from
  results/precision.parquet and results/scaling.parquet).
* What per-call timing leaves out: the key findings about queued calls against waited-for
  calls (``Findings.pipeline_gaps`` and the rest, decided by ``numbench.analyse.findings``),
  and the sections that table pipelined throughput against per-call latency and the time to
  move data to the device against the time to compute on it (from
  results/benchmarks.parquet).
* The "Versions" section (results/versions.parquet, given for a config with
  ``environments``): each environment's library versions against the base environment's,
  how many of its cells changed, and which.
* The "Run time" section: where the run's wall time went, part by part
  (``numbench.machine.contract.TimeLine``, decided by analyse), the parts summing to the
  wall; and how the workers started and which cells shared their compilations.

They are one concern, the summary's optional parts, each a few sentences and a table. Every
value from the tables enters through ``md_text`` or a table cell (``md_table``), as in the
rest of the summary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from numbench.contract import pipelined_cells
from numbench.contract.conclusions import BROKEN, NOT_COMPARABLE
from numbench.contract.facts import (
    Findings,
    GpuNotice,
    PipelineGap,
    PrecisionGap,
    ScalingGap,
    SkippedGpuCells,
)
from numbench.formatting import (
    display,
    format_ci,
    format_seconds,
    format_size,
    format_speedup,
    series_labels,
    who,
)
from numbench.machine.contract import RunTime, TimeLine
from numbench.machine.report import duration
from numbench.report.drawing import versions_chart_name
from numbench.report.markdown import md_link, md_table, md_text
from numbench.stats import FASTER, SAME, SLOWER

# -- the GPU notice -----------------------------------------------------------------------------
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


# -- the dtype and threads dimensions -----------------------------------------------------------
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


# -- queued calls and transfers -----------------------------------------------------------------
def gap_sentence(g: PipelineGap, multi_device: bool) -> str:
    name = md_text(who(g.library, g.device, multi_device)) + (
        f" ({md_text(g.setting)})" if g.setting else ""
    )
    where = f"{md_text(g.operation)} at n = {format_size(g.size)}"
    value = f"{format_speedup(g.speedup)} {format_ci(g.ci_low, g.ci_high)}"
    if g.direction == FASTER:
        return (
            f"{name}: calls queued back to back take less time per call than calls waited for "
            f"one by one in {g.cells} of {g.of_cells} cells, most on {where} ({value} the "
            "throughput of the per-call latency): dispatch hides behind work there."
        )
    return (
        f"{name}: calls queued back to back take longer per call than calls waited for one by "
        f"one in {g.cells} of {g.of_cells} cells, most on {where} ({value})."
    )


def pipeline_findings(f: Findings) -> list[str]:
    """The key findings' lines (none when no asynchronous library was timed both ways)."""
    if not f.pipeline_gaps and not f.queued_same_speed:
        return []
    multi = f.multi_device
    lines = ["### Queued calls against waited-for calls", ""]
    lines += [f"- {gap_sentence(g, multi)}" for g in f.pipeline_gaps]
    if f.queued_same_speed:
        names = ", ".join(md_text(who(q.library, q.device, multi)) for q in f.queued_same_speed)
        lines.append(
            f"- {names}: queued calls are the same speed as waited-for ones (within the "
            f"margin of {f.margin:g}x) in every cell."
        )
    if f.synchronous:
        names = ", ".join(md_text(who(s.library, s.device, multi)) for s in f.synchronous)
        lines.append(
            f"- {names}: calls finish before they return (synchronous), so latency and "
            "throughput are one figure, measured once."
        )
    return lines + [""]


def _ends(d: pd.DataFrame) -> pd.DataFrame:
    """The smallest and the largest size of each series and operation."""
    keep = []
    for _, part in d.groupby(["series", "operation"], sort=True):
        sizes = sorted(part["size"].unique())
        keep.append(part[part["size"].isin({sizes[0], sizes[-1]})])
    return pd.concat(keep).sort_values(["series", "operation", "size"])


def pipeline_table(bench: pd.DataFrame) -> str:
    """Per asynchronous library and operation, at its smallest and largest size: latency,
    pipelined time per call, and pipelined speedup with its CI."""
    d = pipelined_cells(bench).copy()
    if d.empty:
        return "No asynchronous library was measured: every figure is a per-call latency."
    d["series"] = series_labels(d)
    rows = [
        [
            r.series,
            r.operation,
            format_size(r.size),
            format_seconds(r.median_s),
            format_seconds(r.pipelined_median_s),
            f"{format_speedup(r.pipelined_speedup)} "
            f"{format_ci(r.pipelined_speedup_ci_low, r.pipelined_speedup_ci_high)}",
        ]
        for r in _ends(d).itertuples()
    ]
    header = ["library", "operation", "n", "latency", "pipelined", "latency / pipelined (CI)"]
    return md_table(header, rows, align="lllrrr")


def transfer_table(bench: pd.DataFrame) -> str | None:
    """Per device cell (smallest and largest size of each library and operation): the time
    to place the inputs, one call, the time to read the result back, and what share of the
    end-to-end time the transfers take. None when no cell moved data (a CPU grid)."""
    if "h2d_s" not in bench:
        return None
    d = bench[(bench["status"] == "ok") & bench["h2d_s"].notna()].copy()
    if d.empty:
        return None
    d["series"] = series_labels(d, with_device=True)
    rows = []
    for r in _ends(d).itertuples():
        moved = r.h2d_s + r.d2h_s
        share = moved / r.end_to_end_s if r.end_to_end_s else float("nan")
        mb = (r.h2d_bytes + r.d2h_bytes) / 1e6
        rows.append(
            [
                r.series,
                r.operation,
                format_size(r.size),
                format_seconds(r.h2d_s),
                format_seconds(r.median_s),
                format_seconds(r.d2h_s),
                format_seconds(r.end_to_end_s),
                f"{share:.0%}",
                f"{mb:.3g}",
            ]
        )
    header = ["library", "operation", "n", "to device", "one call", "back to host"]
    header += ["end to end", "transfers' share", "MB moved"]
    return md_table(header, rows, align="lllrrrrrr")


def pipeline_sections(bench: pd.DataFrame) -> list[str]:
    """The summary's sections: pipelined throughput (when an asynchronous library was
    measured), and transfers (when a cell moved data to a device)."""
    lines: list[str] = []
    if not pipelined_cells(bench).empty:
        lines += [
            "## Pipelined throughput",
            "",
            "Latency: the time per call when each call is waited for. Pipelined: the time per",
            "call when calls are queued back to back with one wait at the end. Their ratio",
            "above 1 is what queuing gains; chart: `pipelined`.",
            "",
            pipeline_table(bench),
            "",
        ]
    moved = transfer_table(bench)
    if moved is not None:
        lines += [
            "## Transfers",
            "",
            "Placing every input on the device, one call, and reading the result back, each",
            "waited for and timed apart from the samples (medians over the processes).",
            "",
            moved,
            "",
        ]
    return lines


# -- the versions section -----------------------------------------------------------------------
#: the changes listed in an environment's table, in this order
CHANGED = (SLOWER, FASTER, BROKEN)
#: an error quoted under the table is cut to this many characters
ERROR_SHOWN = 200

INTRO = (
    "Each cell of an environment ran in lockstep rounds beside the same library in the base "
    "environment, on the same host, so both versions were measured side by side. The ratio "
    "is the environment's median time over the base environment's (above 1: the environment "
    "is slower), with its 95% two-level bootstrap interval, drawing the same rounds on both "
    "sides and never narrower than the environment's typical round-to-round spread allows "
    "(`ci_floor`). A change counts when its interval excludes 1 and the ratio passes the "
    "margin of {margin:g}x: *slower* at {margin:g}x the base's time or more, *faster* at "
    "1/{margin:g} of it or less. A cell that measured in the base environment and not in the "
    "environment is *broken*."
)


def _versions(values) -> str:
    found = sorted({str(v) for v in values if isinstance(v, str) and v})
    return ", ".join(found) if found else "?"


def versions_line(env: pd.DataFrame) -> str:
    """'numpy 2.4.6 -> 2.3.5; torch ...': each library's base version, then the environment's."""
    parts = []
    for library, rows in env.groupby("library", sort=True):
        base, own = _versions(rows["base_version"]), _versions(rows["version"])
        same = " (the same version)" if base == own and base != "?" else ""
        parts.append(f"{md_text(library)} {md_text(base)} -> {md_text(own)}{same}")
    return "; ".join(parts)


def counts_line(env: pd.DataFrame) -> str:
    """'6 cells: 2 slower, 1 faster, 2 the same, 1 broken.'"""
    counts = env["change"].value_counts()
    words = [(SLOWER, "slower"), (FASTER, "faster"), (SAME, "the same"), (BROKEN, "broken")]
    said = [f"{int(counts.get(change, 0))} {word}" for change, word in words]
    if counts.get(NOT_COMPARABLE, 0):
        unknown = int(((env["change"] == NOT_COMPARABLE) & env["base_status"].isna()).sum())
        why = "the base environment's processes did not measure"
        if unknown:
            why += f", or (for {unknown}) the cell ended before they ran"
        said.append(f"{int(counts[NOT_COMPARABLE])} not comparable ({why})")
    n = len(env)
    return f"{n} cell{'' if n == 1 else 's'}: " + ", ".join(said) + "."


def changed_rows(env: pd.DataFrame, changes=CHANGED) -> pd.DataFrame:
    """The slower, faster and broken cells, in that order, each largest change first."""
    d = env[env["change"].isin(changes)].copy()
    d["_group"] = d["change"].map({c: i for i, c in enumerate(changes)})
    d["_size"] = -np.abs(np.log(d["ratio"].astype(float)))
    d["_size"] = d["_size"].fillna(0.0)
    return d.sort_values(
        ["_group", "_size", "operation", "library", "device", "size"], kind="stable"
    )


def changed_table(d: pd.DataFrame) -> str:
    rows = []
    for r in d.itertuples(index=False):
        if r.change == BROKEN:
            change = f"{r.change} ({r.status})"
        else:
            change = str(r.change) + ("" if r.settled else " ?")
        rows.append(
            [
                r.library,
                r.device,
                r.operation,
                format_size(r.size),
                r.dtype,
                str(int(r.threads)),
                change,
                format_speedup(r.ratio) if r.change != BROKEN else "",
                format_ci(r.ratio_ci_low, r.ratio_ci_high),
            ]
        )
    header = ["library", "device", "operation", "n", "dtype", "threads", "change"]
    return md_table(header + ["env / base time", "95% CI"], rows, "lllrlrlrr")


def errors_said(env: pd.DataFrame) -> list[str]:
    """One line per broken or not comparable cell with an error: what its process said."""
    lines = []
    said = env["change"].isin([BROKEN, NOT_COMPARABLE]) & env["error"].notna()
    for r in changed_rows(env[said], [BROKEN, NOT_COMPARABLE]).itertuples(index=False):
        error = str(r.error)
        error = error if len(error) <= ERROR_SHOWN else error[:ERROR_SHOWN] + "…"
        where = f"{r.library} {r.device} {r.operation} {format_size(r.size)}"
        lines.append(f"- {md_text(where)}: {md_text(error)}")
    return lines


def environment_part(env: pd.DataFrame, name: str, charts_dir: str) -> list[str]:
    parts = [f"### {md_text(name)}", "", f"{versions_line(env)}. {counts_line(env)}", ""]
    changed = changed_rows(env)
    if changed.empty:
        parts += [
            "Nothing changed: no cell of this environment is slower or faster beyond the "
            "margin, and none broke.",
            "",
        ]
    else:
        parts += [changed_table(changed), ""]
        if (~changed["settled"].astype(bool) & (changed["change"] != BROKEN)).any():
            parts += [
                "?: in doubt; its interval holds the margin or 1 / margin, so a rerun may "
                "give another verdict.",
                "",
            ]
    errors = errors_said(env)
    if errors:
        parts += ["What the cells that did not measure said:", "", *errors, ""]
    chart = versions_chart_name(name)
    parts += [f"Chart: {md_link(chart, f'{charts_dir}/{chart}.html')}.", ""]
    return parts


def versions_section(
    versions: pd.DataFrame | None, margin: float, charts_dir: str = "charts"
) -> list[str]:
    """The section's lines; none without the versions table. The margin stated is the
    table's own (the one its changes were judged with), else ``margin``."""
    if versions is None:
        return []
    if len(versions) and versions["margin"].notna().any():
        margin = float(versions["margin"].dropna().iloc[0])
    parts = ["## Versions", "", INTRO.format(margin=margin), ""]
    if versions.empty:
        return parts + ["No cell of an environment was measured.", ""]
    for name in sorted(versions["environment"].dropna().unique(), key=str):
        parts += environment_part(versions[versions["environment"] == name], name, charts_dir)
    return parts


# -- the run time section -----------------------------------------------------------------------
def measured_share(t: TimeLine) -> float:
    """The share of the wall the samples took: the measurement itself."""
    return t.sampling_s / t.wall_s if t.wall_s > 0 else 0.0


def _rows(t: TimeLine) -> list[tuple[str, float]]:
    return [
        (
            "Library imports: each worker's own (the paired baseline's too), and each "
            "zygote's once",
            t.imports_s,
        ),
        ("First calls (tracing, compiling, warming up), timed apart", t.first_calls_s),
        ("Sampling: calibration and the samples, the measurement itself", t.sampling_s),
        ("Waits for quiet (`wait_for_quiet`)", t.quiet_waits_s),
        ("Waits for the timing lock (past the second a start is recorded to)", t.lock_waits_s),
        ("Roofs (`roofs`, `roofs_at_end`)", t.roofs_s),
        ("Analysis: from the last measurement to the findings", t.analysis_s),
        (
            "Process starts, scheduling and other: interpreters and inputs, the sentinel, "
            "rounds measured again, cells that ended without figures (a timeout), Snakemake "
            "between jobs, making the inputs",
            t.other_s,
        ),
    ]


def run_time_section(r: RunTime | None) -> list[str]:
    """The section's lines, or none where the run's wall is not known."""
    t = None if r is None else r.timeline
    if t is None:
        return []
    share = (lambda s: f"{s / t.wall_s:.0%}") if t.wall_s > 0 else (lambda s: "")
    lines = [
        "## Run time",
        "",
        f"The run's wall, from its first record to its findings: {duration(t.wall_s)}, of "
        f"which {measured_share(t):.0%} was measurement (sampling). The parts sum to the "
        'wall; the last is what no record accounts for (docs/results.md, "The summary").',
        "",
        "| where the time went | time | share |",
        "|---|---:|---:|",
    ]
    lines += [f"| {what} | {duration(s)} | {share(s)} |" for what, s in _rows(t)]
    lines += [f"| **the run's wall** | **{duration(t.wall_s)}** | **100%** |", ""]
    return lines


def worker_start_lines(bench: pd.DataFrame) -> list[str]:
    """How each library's workers started (``worker_start``): forked from a zygote that
    had imported the library, or fresh, and why a fork asked for was not had. None where
    no cell says (cells from before the column)."""
    if "worker_start" not in bench:
        return []
    ways: dict[str, set[str]] = {}
    for library, how in zip(bench["library"], bench["worker_start"]):
        if isinstance(how, str) and how:
            ways.setdefault(how, set()).add(str(library))
    if not ways:
        return []
    said = []
    for how in sorted(ways):
        names = ", ".join(sorted(ways[how]))
        if how == "fork":
            said.append(f"forked from a process that had imported the library: {names}")
        elif how == "exec":
            said.append(f"fresh interpreters: {names}")
        else:
            said.append(
                f"fresh interpreters, a fork refused ({how.removeprefix('exec: ')}): {names}"
            )
    return ["Worker processes (`worker_start`): " + "; ".join(said) + ".", ""]


def compile_cache_lines(bench: pd.DataFrame) -> list[str]:
    """Which libraries' cells shared their compilations between processes
    (``compile_cache: cell``), and how many processes compiled and how many loaded: their
    first calls after the first are not the compiler's. None where no cell shared."""
    if "compile_cache" not in bench:
        return []
    cells: dict[str, int] = {}
    counts: dict[str, int] = {}
    for library, tally in zip(bench["library"], bench["compile_cache"]):
        if not isinstance(tally, str) or not tally:
            continue
        cells[str(library)] = cells.get(str(library), 0) + 1
        for part in tally.split(", "):
            n, what = part.split(" ", 1)
            counts[what] = counts.get(what, 0) + int(n)
    if not cells:
        return []
    names = ", ".join(f"{lib} ({n} cells)" for lib, n in sorted(cells.items()))
    return [
        f"Compilations shared within each cell (`compile_cache`): {names}; "
        f"{counts.get('cold', 0)} processes compiled, {counts.get('warm', 0)} loaded what "
        "their cell's first had compiled. Those cells' first calls are the compiling "
        "processes' alone.",
        "",
    ]
