"""The summary's sentences: findings (the fastest library, the largest speedups, the
crossovers, how firm the verdicts are, the cells to look at) worded as Markdown, and the
links to their charts. Every value read from the tables goes through ``md_text``: it is data,
not markup.
"""

from __future__ import annotations

from itertools import groupby

from numbench.contract.facts import (
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
)
from numbench.formatting import (
    format_ci,
    format_seconds,
    format_size,
    format_sizes,
    format_speedup,
    series_label,
    slowdown,
    who,
)
from numbench.machine.report import capped_lines
from numbench.report.charts import OPERATION_CHARTS, chart_names, operation_chart
from numbench.report.markdown import md_code, md_link, md_text


# -- key findings -------------------------------------------------------------------------------
def who_md(library: str, device: str, multi_device: bool) -> str:
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
        f"{where}: **{who_md(best.library, best.device, multi_device)}** "
        f"({format_seconds(best.median_s)})"
    )
    if isinstance(fact, Tie):
        names = ", ".join(who_md(t.library, t.device, multi_device) for t in fact.within_noise)
        return text + f", within noise of {names}"
    if fact.runner_up is not None:
        second = fact.runner_up
        text += f", {fact.lead:.2g}× ahead of {who_md(second.library, second.device, multi_device)}"
    return text


def speedup_line(fact: SpeedupFact, multi_device: bool, bold: bool) -> str:
    value = format_speedup(fact.speedup)
    return (
        f"- {who_md(fact.library, fact.device, multi_device)} on {md_text(fact.operation)} at n = "
        f"{format_size(fact.size)}: {f'**{value}**' if bold else value} "
        f"{format_ci(fact.ci_low, fact.ci_high)}"
    )


def crossover_sentence(c: Crossover, baseline: str, multi_device: bool) -> str:
    """One crossover in words; ``baseline`` is the baseline's name in prose (Markdown)."""
    name = who_md(c.library, c.device, multi_device)
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
    single = [c for c in f.crossovers if _one_size(c)]
    lines += [
        "- "
        + crossover_sentence(c, baseline, multi)
        + (" In doubt: it rests on a verdict in doubt (Warnings)." if c.settled is False else "")
        for c in f.crossovers
        if not _one_size(c)
    ]
    if single:
        lines.append(one_size_line(single, baseline))
    return "\n".join(lines)


def _one_size(c: Crossover) -> bool:
    """A speedup known at fewer than two sizes: no crossover can be placed."""
    return c.kind == "insufficient" and len(c.points) < 2


def one_size_line(single: list[Crossover], baseline: str) -> str:
    """One line for every (library, operation) whose speedup is known at fewer than two
    sizes, where a crossover cannot be placed: a grid of one size per operation would
    otherwise list a 'no verdict' sentence for each pair."""
    ops = sorted({c.operation for c in single})
    pairs = f"{len(single)} {'pair' if len(single) == 1 else 'pairs'} of library and operation"
    return (
        f"- No crossover against {baseline} for {pairs} ({', '.join(md_text(o) for o in ops)}): "
        "fewer than two sizes have a speedup, and a crossover needs two."
    )


def firmness_line(f: Firmness, margin: float) -> str:
    """How far the verdicts can be trusted to hold on a rerun, in one sentence."""
    doubt = f.verdicts - f.settled
    text = (
        f"How firm: {f.settled} of the {f.verdicts} verdicts are settled (their 95% interval "
        f"holds neither {margin:g}x nor 1/{margin:g}x)"
    )
    if doubt:
        text += f"; {doubt} {'is' if doubt == 1 else 'are'} in doubt (`?`, listed under Warnings)"
    if doubt and f.short:
        text += (
            f", {f.short} of them stopped before `replicates.max` rounds, which could not have "
            "settled them at the run's round spread (a higher `replicates.max` might)"
        )
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
            "round was measured again (`replicates.max_cpu_taken`), or kept as measured where a "
            "half-second look found the others still busy; its times include theirs.",
            "",
        ]
        lines += [
            f"- {_cell_name(w)}: {w.cpu_taken:.0%} of a process's CPU time taken; "
            f"{w.set_aside} attempt(s) set aside"
            for w in busy
        ]
        lines.append("")
    lines += capped_lines(warnings)
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
