"""The summary's "Run time" section: where the run's wall time went, part by part
(``numbench.machine.contract.TimeLine``, decided by analyse), the parts summing to the wall."""

from __future__ import annotations

import pandas as pd

from numbench.machine.contract import RunTime, TimeLine
from numbench.machine.report import duration


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
