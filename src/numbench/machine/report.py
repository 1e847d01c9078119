"""The summary's first line: how quiet the machine was, with the figures behind it and what
it means for the verdicts (``numbench.machine.contract.MachineQuality``, decided by analyse)."""

from __future__ import annotations

from numbench.formatting import format_seconds, format_size
from numbench.machine.contract import (
    BUSY_MACHINE_SHARE,
    BUSY_RUN_FRACTION,
    SENTINEL_QUANTILES,
    UNSTABLE_RUN_FRACTION,
    UNSTEADY_SENTINEL_SPREAD,
    CappedCell,
    MachineQuality,
    RunTime,
)
from numbench.report.markdown import md_text


def _share(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def _many(n: int, thing: str) -> str:
    """'1 cell', '2 cells'."""
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _figures(m: MachineQuality) -> str:
    return (
        f"while the cells measured, other processes took {_share(m.other_cpu_share)} of the "
        f"CPUs' time and the hypervisor (steal) {_share(m.steal_share)} (medians over "
        f"{_many(m.watched, 'cell')}); {m.busy_cells} of the {m.watched} measured busy "
        f"(others above {BUSY_MACHINE_SHARE:.0%} of the CPUs' time; a run is busy past "
        f"{BUSY_RUN_FRACTION:.0%} of its cells), the busiest at {_share(m.busiest_share)}"
    )


def _workflow(m: MachineQuality) -> str:
    """'; the workflow itself (Snakemake's scheduler ...) took 29%', or nothing."""
    if m.workflow_cpu_share is None:
        return ""
    return (
        f"; the workflow itself took {_share(m.workflow_cpu_share)} (median; Snakemake's "
        "scheduler and the processes between it and each cell, not counted among the others: "
        'docs/method.md, "One timing cell at a time")'
    )


def _between() -> str:
    """'its 10th and 90th percentile cells'."""
    low, high = (round(q * 100) for q in SENTINEL_QUANTILES)
    return f"its {low}th and {high}th percentile cells"


def _sentinel(m: MachineQuality) -> str:
    """'; the sentinel (...) spread 1.08x over 24 cells (12.1 to 13.1 ms; 1.05x between its
    10th and 90th percentile cells)', or nothing."""
    if m.sentinel_spread is None:
        return ""
    middle = ""
    if m.sentinel_middle_spread is not None:
        middle = f"; {m.sentinel_middle_spread:.2f}x between {_between()}"
    return (
        f"; the sentinel (a fixed sort timed before each cell) spread {m.sentinel_spread:.2f}x "
        f"over {_many(m.sentinel_cells, 'cell')} ({format_seconds(m.sentinel_fastest_s)} to "
        f"{format_seconds(m.sentinel_slowest_s)}{middle})"
    )


def _unsteady(m: MachineQuality) -> str:
    """What made the run unsteady: 'the machine's own speed moved 1.46x during the run
    (...)', 'most cells are unstable (...)', or both."""
    said = []
    if m.speed_moved:
        said.append(
            f"the machine's own speed moved {m.sentinel_middle_spread:.2f}x during the run "
            f"(the sentinel, the same sort timed before every cell, between {_between()}; a "
            f"run past {UNSTEADY_SENTINEL_SPREAD:.2f}x is not steady)"
        )
    if m.mostly_unstable:
        said.append(
            f"most cells are unstable ({m.unstable_cells} of {m.ok_cells}, past "
            f"{UNSTABLE_RUN_FRACTION:.0%}: their processes disagree far beyond their own spread)"
        )
    return " and ".join(said)


def _unsteady_line(m: MachineQuality) -> str:
    """The headline of a run whose machine was not busy with others but not steady either."""
    others = (
        "no other programs took the CPUs"
        if m.quiet
        else "other programs were not watched (cells from before contract 7, or no `/proc`)"
    )
    figures = f"{_figures(m)}{_workflow(m)}" if m.quiet else ""
    figures = f"{figures}{_sentinel(m)}".removeprefix("; ")
    return (
        f"**Unsteady machine**: {others}, but {_unsteady(m)}. What it did to the answer: "
        f"{_verdicts(m)}; the intervals widen with the machine's moves, so verdicts stay in "
        "doubt and a rerun may read otherwise (`numbench system` says what this machine does; "
        "a steadier one settles them)" + (f". The figures: {figures}." if figures else ".")
    )


def _verdicts(m: MachineQuality) -> str:
    text = f"{m.unstable_cells} of {_many(m.ok_cells, 'cell')} unstable"
    if m.watched:
        text += f" ({m.busy_unstable} of them measured busy)"
    text += f"; {m.in_doubt} of {_many(m.verdicts, 'verdict')} in doubt"
    if m.watched and m.in_doubt:
        busy = "none" if not m.busy_in_doubt else str(m.busy_in_doubt)
        text += f", {busy} of them measured while the machine was busy"
    return text


def machine_line(m: MachineQuality) -> str:
    """One line: quiet, unsteady, busy, or not watched, with its figures. A run is called
    quiet only when others took little of the CPUs *and* the machine was steady."""
    if m.quiet is not False and m.unsteady:
        return _unsteady_line(m)
    if m.quiet is None:
        return (
            "**Machine not watched**: the cells did not record what the machine did while they "
            f"measured (cells from before contract 7, or no `/proc`){_sentinel(m)}; "
            f"{_verdicts(m)}."
        )
    if m.quiet:
        return f"**Quiet machine**: {_figures(m)}{_workflow(m)}{_sentinel(m)}; {_verdicts(m)}."
    return (
        f"**Busy machine**: {_figures(m)}{_workflow(m)}{_sentinel(m)}; {_verdicts(m)}. The verdicts measured busy are the least firm: `numbench system` "
        "says what disturbs this machine, and a rerun on a quieter one settles them."
    )


def duration(seconds: float) -> str:
    """'39 min 24 s', '1 h 02 min', '12 s'."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _rounds(n: int) -> str:
    return _many(n, "round")


def time_line(t: RunTime) -> str:
    """How long the cells took and where the time went, in one sentence."""
    text = (
        f"Time: the {_many(t.cells, 'cell')} took {duration(t.total_s)} of measuring, one at a time "
        f"({_rounds(t.rounds)} kept); the stopping rule added {_rounds(t.added_rounds)} for "
        f"verdicts in doubt (about {duration(t.added_s)}), {_rounds(t.retries)} measured "
        f"again because other programs took the CPUs (about {duration(t.retries_s)}), and "
        f"cells measured on a busy machine took {duration(t.busy_s)} in all"
    )
    if t.waited_cells is not None:
        text += (
            f"; {_many(t.waited_cells, 'cell')} waited {duration(t.waited_s)} in all for the machine to "
            f"quiet down (`wait_for_quiet`), {t.not_quiet} of them measured still busy at "
            "its limit"
        )
    if t.timeline is not None and t.timeline.wall_s > 0:
        text += (
            f"; of the run's wall of {duration(t.timeline.wall_s)}, "
            f"{t.timeline.sampling_s / t.timeline.wall_s:.0%} was measurement (where the rest "
            "went: Run time, below)"
        )
    if t.capped:
        text += (
            f"; {t.capped} cell{'s' if t.capped != 1 else ''} stopped early at the time cap "
            "(`replicates.max_cell_s`, listed under Warnings)"
        )
    return text + "."


def capped_lines(warnings) -> list[str]:
    """The Warnings' list of cells stopped by the time cap."""
    capped = [w for w in warnings if isinstance(w, CappedCell)]
    if not capped:
        return []
    cap = capped[0].max_cell_s
    cap = "" if cap is None else f" = {cap:g} s"
    lines = [
        f"Cells stopped early by the time cap (`replicates.max_cell_s`{cap}): they "
        "have fewer rounds than the stopping rule asked for, so their verdicts are less firm "
        "than the rule would have made them.",
        "",
    ]
    for w in capped:
        name = md_text(f"{w.library} ({w.device}) {w.operation}")
        said = f"{name} n = {format_size(w.size)}: {_rounds(w.replicates)} in {duration(w.wall_s)}"
        if w.verdict is not None:
            said += f"; verdict {md_text(w.verdict)}{'' if w.settled else ', in doubt'}"
        lines.append(f"- {said}")
    return [*lines, ""]
