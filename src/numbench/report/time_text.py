"""The summary's "Run time" section: where the run's wall time went, part by part
(``numbench.machine.contract.TimeLine``, decided by analyse), the parts summing to the wall."""

from __future__ import annotations

from numbench.machine.contract import RunTime, TimeLine
from numbench.machine.report import duration


def measured_share(t: TimeLine) -> float:
    """The share of the wall the samples took: the measurement itself."""
    return t.sampling_s / t.wall_s if t.wall_s > 0 else 0.0


def _rows(t: TimeLine) -> list[tuple[str, float]]:
    return [
        ("Library imports, in every worker process (the paired baseline's too)", t.imports_s),
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
