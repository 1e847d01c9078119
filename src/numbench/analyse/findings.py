"""What the summary says, decided as data: typed facts (``numbench.contract.facts``), no sentences.

``decide(benchmarks, speedups, crossovers, baseline_library, baseline_device, margin, ...)``
reads the tables and returns ``Findings``: the fastest library per operation at its smallest
and largest size (a ``Winner``, a ``Tie`` within noise, or ``NotMeasured``), the largest
significant speedups and slowdowns over the baseline, one ``Crossover`` per group with its
kind, the warnings (``NoisyCell``, ``UnmeasuredCell``, ``NoBaseline``, ``UnstableCell``,
``BusyCell``, ``DoubtfulVerdict``), the ``Firmness`` of the verdicts, the ``GpuNotice``, and,
from the tables given, what the dtype and threads dimensions show, what queuing calls
changes and each operation's place on the roofline. ``write_findings`` writes them to
results/findings.parquet (``numbench.contract.conclusions``), which the summary words
(``numbench.report.summary``): nothing here is worded.

The baseline is always given: the tables are checked against it, never the other way round.

What per-call timing leaves out (``pipeline_facts``) is read from results/benchmarks.parquet
(``contract.PIPELINE_FIELDS``): ``pipelined_speedup`` is latency / pipelined time per call;
above 1, queuing calls back to back hides part of each call's cost (dispatch behind work). A
library whose calls finish before they return (``dispatch == "synchronous"``) has one figure
for both, and is named as such rather than tabled.

The GPU cells that could not run (``gpu_notice``): ``none_found`` when every GPU cell asked
for was ``unavailable`` (no GPU, no CUDA build of the library); otherwise some ran and the
notice lists the ones that did not. The skipped cells are grouped by library and reason
(cleaned, and cut to ``MAX_REASON_CHARS``), with their operations and sizes. ``benchmarks``
may be a pandas DataFrame or a pyarrow Table there.

Both are decided here, beside the rest of ``decide``'s facts: neither has a table of its own,
and ``decide`` is their one reader.
"""

from __future__ import annotations

import os
import re
import time

import pandas as pd

from numbench.analyse.dimensions import precision_gaps, scaling_gaps, settings
from numbench.analyse.speedups import GROUP_COLUMNS, floor_spread
from numbench.cells import KEY_WITH_HOST, SORT_BY_SIZE
from numbench.contract import pipelined_cells
from numbench.contract.conclusions import check_baseline, in_doubt
from numbench.contract.conclusions import write_findings as write_findings_table
from numbench.contract.facts import (
    BUSY_CPU_TAKEN,
    KIND_ORDER,
    MAX_REASON_CHARS,
    NOISY_IQR_FRACTION,
    TOP_SLOWDOWNS,
    TOP_SPEEDUPS,
    BusyCell,
    CellWarning,
    Crossover,
    DoubtfulVerdict,
    Fastest,
    Findings,
    Firmness,
    GpuNotice,
    LargestSlowdown,
    LargestSpeedup,
    NoBaseline,
    NoisyCell,
    NotMeasured,
    PipelineGap,
    QueuedSameSpeed,
    SkippedGpuCells,
    SpeedupFact,
    SpeedupPoint,
    Synchronous,
    Tie,
    Timed,
    UnmeasuredCell,
    UnstableCell,
    Winner,
)
from numbench.formatting import missing
from numbench.machine.analyse import capped_cells, machine_quality, replicate_setting, run_time
from numbench.roofline.analyse import roofline_findings
from numbench.roofline.contract import read_roofs
from numbench.stats import FASTER, SLOWER, could_settle, verdict

#: the warnings list cells by operation, size and library (a stable sort keeps the rest)
BY_SIZE = list(SORT_BY_SIZE[:3])


def firmness(speedups: pd.DataFrame, bench: pd.DataFrame | None = None) -> Firmness | None:
    """The run's ``Firmness``; None without a speedup, or from before ``settled``."""
    measured = speedups[speedups["speedup"].notna()]
    if measured.empty or "settled" not in measured:
        return None
    chance = measured["repeat_chance"] if "repeat_chance" in measured else None
    expected = None if chance is None or chance.isna().any() else float(chance.sum())
    settled = int((~in_doubt(measured)).sum())
    return Firmness(len(measured), settled, expected, stopped_short(measured, bench))


def stopped_short(measured: pd.DataFrame, bench: pd.DataFrame | None) -> int | None:
    """How many paired verdicts in doubt rest on a cell that stopped before its
    ``replicates.max`` rounds, uncapped, because ``max`` rounds could not have settled them:
    ``could_settle`` false at its speedup and stopping margin, the test the stopping rule
    makes (``numbench.measure.replicates.enough_rounds``), at the run's round spread (the
    one the row's ``ci_floor`` was made with), or the cell's own ``round_sd`` where the row
    has no floor. None where the cells lack their rounds or their settings."""
    if bench is None or not {"replicates", "replicate_settings"} <= set(bench):
        return None
    if bench["replicate_settings"].isna().all():
        return None
    doubtful = measured[in_doubt(measured)]
    if "paired" in doubtful:
        doubtful = doubtful[doubtful["paired"].fillna(False).astype(bool)]
    key = [k for k in KEY_WITH_HOST if k in doubtful and k in bench]
    extra = ["ci_floor"] if "ci_floor" in doubtful else []
    rows = doubtful[[*key, "speedup", *extra]].merge(
        bench.drop_duplicates(key), on=key, how="inner"
    )
    short = 0
    for row in rows.itertuples(index=False):
        most, sd, margin = (
            replicate_setting(row.replicate_settings, name)
            for name in ("max", "round_sd", "margin")
        )
        if None in (most, sd, margin) or bool(getattr(row, "capped", False) or False):
            continue
        sd = floor_spread(getattr(row, "ci_floor", None), row.replicates) or sd
        if row.replicates < most and not could_settle(row.speedup, most, sd, margin):
            short += 1
    return short


def measured_on_several_devices(bench: pd.DataFrame) -> bool:
    """Whether prose must name the device: ok cells exist on more than one device."""
    return bench.loc[bench["status"] == "ok", "device"].nunique() > 1


def fastest_at(
    bench: pd.DataFrame, operation: str, size: int, margin: float, setting: str = ""
) -> Fastest:
    """The fastest ok cell of ``operation`` at ``size`` in ``bench`` (one dtype and thread
    count: ``fastest`` splits a grid of several, and ``setting`` names the part)."""
    d = bench[
        (bench["operation"] == operation) & (bench["size"] == size) & (bench["status"] == "ok")
    ]
    if d.empty:
        return NotMeasured(operation, size, setting)
    d = d.sort_values("median_s")
    timed = [Timed(r.library, r.device, r.median_s) for r in d.itertuples()]
    best, rest = d.iloc[0], d.iloc[1:]
    # The same speed: the runner-up's CI of the median reaches the winner's, or it is
    # slower by less than the margin.
    reaches = list(
        (rest["ci_low_s"] <= best["ci_high_s"]) | (rest["median_s"] < margin * best["median_s"])
    )
    tied = tuple(t for t, r in zip(timed[1:], reaches, strict=True) if r)
    if tied:
        return Tie(operation, size, timed[0], tied, setting)
    if len(timed) > 1:
        lead = timed[1].median_s / timed[0].median_s
        return Winner(operation, size, timed[0], timed[1], lead, setting)
    return Winner(operation, size, timed[0], setting=setting)


def fastest(bench: pd.DataFrame, margin: float) -> tuple[Fastest, ...]:
    out = []
    for op in sorted(bench["operation"].unique()):
        sizes = sorted(bench.loc[bench["operation"] == op, "size"].unique())
        ends = [sizes[0]] if len(sizes) == 1 else [sizes[0], sizes[-1]]
        for setting, part in settings(bench):
            out += [fastest_at(part, op, int(s), margin, setting) for s in ends]
    return tuple(out)


def _speedup_facts(rows: pd.DataFrame, cls: type[SpeedupFact]) -> tuple:
    columns = ["library", "device", "operation", "size", "speedup"]
    columns += ["speedup_ci_low", "speedup_ci_high"]
    return tuple(cls(*r) for r in rows[columns].itertuples(index=False))


def largest_speedups(speedups: pd.DataFrame) -> tuple[LargestSpeedup, ...]:
    up = speedups[(speedups["verdict"] == FASTER) & speedups["speedup"].notna()]
    up = up.sort_values("speedup", ascending=False).head(TOP_SPEEDUPS)
    return _speedup_facts(up, LargestSpeedup)


def largest_slowdowns(speedups: pd.DataFrame) -> tuple[LargestSlowdown, ...]:
    down = speedups[(speedups["verdict"] == SLOWER) & speedups["speedup"].notna()]
    down = down.sort_values("speedup").head(TOP_SLOWDOWNS)
    return _speedup_facts(down, LargestSlowdown)


def _present(value):
    return None if missing(value) else value


def crossover(row, speedups: pd.DataFrame) -> Crossover:
    """The fact of one crossovers row (a namedtuple from ``itertuples``) and its curve."""
    group = [getattr(row, column) for column in GROUP_COLUMNS]
    in_group = speedups["speedup"].notna()
    for column, value in zip(GROUP_COLUMNS, group, strict=True):
        in_group &= speedups[column] == value
    points = tuple(
        SpeedupPoint(int(p.size), p.speedup, p.speedup_ci_low, p.speedup_ci_high, p.verdict)
        for p in speedups[in_group].sort_values("size").itertuples()
    )
    sizes = ("crossover_size", "ci_low", "ci_high", "below_size", "above_size")
    found = {name: _present(getattr(row, name)) for name in sizes}
    settled = _present(getattr(row, "settled", None))
    return Crossover(
        *group, row.kind, points, **found, settled=None if settled is None else bool(settled)
    )


def crossover_facts(crossovers: pd.DataFrame, speedups: pd.DataFrame) -> tuple[Crossover, ...]:
    facts = [crossover(r, speedups) for r in crossovers.itertuples()]
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    return tuple(sorted(facts, key=lambda c: (rank.get(c.kind, len(rank)), c.operation, c.library)))


def warnings(bench: pd.DataFrame, speedups: pd.DataFrame) -> tuple[CellWarning, ...]:
    out: list[CellWarning] = []
    ok = bench[bench["status"] == "ok"]
    noisy = ok[ok["iqr_s"] > NOISY_IQR_FRACTION * ok["median_s"]]
    for r in noisy.sort_values(BY_SIZE).itertuples():
        out.append(NoisyCell(r.library, r.device, r.operation, int(r.size), r.iqr_s, r.median_s))
    unstable = ok[ok["unstable"].fillna(False).astype(bool)]
    for r in unstable.sort_values(BY_SIZE).itertuples():
        cell = (r.library, r.device, r.operation, int(r.size))
        out.append(UnstableCell(*cell, r.process_spread, r.process_medians_s))
    if "cpu_taken" in ok:  # results from before the column have nothing to say
        busy = ok[ok["cpu_taken"].fillna(0) > BUSY_CPU_TAKEN]
        for r in busy.sort_values(BY_SIZE).itertuples():
            cell = (r.library, r.device, r.operation, int(r.size))
            set_aside = 0 if missing(r.set_aside) else int(r.set_aside)
            out.append(BusyCell(*cell, float(r.cpu_taken), set_aside))
    doubtful = speedups[speedups["speedup"].notna() & in_doubt(speedups)]
    for r in doubtful.sort_values(BY_SIZE).itertuples():
        cell = (r.library, r.device, r.operation, int(r.size))
        values = (r.speedup, r.speedup_ci_low, r.speedup_ci_high, r.verdict, r.margin)
        out.append(DoubtfulVerdict(*cell, *values))
    out += capped_cells(bench.sort_values(BY_SIZE), speedups)
    bad = bench[bench["status"] != "ok"]
    for r in bad.sort_values(["status", "operation", "size", "library"]).itertuples():
        reason = None if missing(r.error) else str(r.error)
        out.append(UnmeasuredCell(r.status, r.library, r.device, r.operation, int(r.size), reason))
    for r in speedups[speedups["speedup"].isna()].itertuples():
        out.append(NoBaseline(r.library, r.device, r.operation, int(r.size)))
    return tuple(out)


def decide(
    bench: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    baseline_library: str,
    baseline_device: str,
    margin: float,
    precision: pd.DataFrame | None = None,
    scaling: pd.DataFrame | None = None,
    roofs: pd.DataFrame | None = None,
    finished_unix: float | None = None,
) -> Findings:
    """The findings of the tables, against the baseline they were computed for; a ratio
    within ``margin`` of 1 is the same speed. A dimension whose table is not given, or
    empty (the grid has one dtype, or one thread count), has None for its findings.
    ``finished_unix``: when they are decided, the end of the run's wall (``run_time``)."""
    check_baseline(baseline_library, baseline_device, speedups, crossovers)
    multi_device = measured_on_several_devices(bench)
    gaps, same, sync = pipeline_facts(bench, margin)
    return Findings(
        baseline_library=baseline_library,
        baseline_device=baseline_device,
        margin=margin,
        multi_device=multi_device,
        gpu_notice=gpu_notice(bench, baseline_library, baseline_device),
        fastest=fastest(bench, margin),
        speedups=largest_speedups(speedups),
        slowdowns=largest_slowdowns(speedups),
        crossovers=crossover_facts(crossovers, speedups),
        warnings=warnings(bench, speedups),
        firmness=firmness(speedups, bench),
        precision=None if precision is None or precision.empty else precision_gaps(precision),
        scaling=None if scaling is None or scaling.empty else scaling_gaps(scaling),
        pipeline_gaps=gaps,
        queued_same_speed=same,
        synchronous=sync,
        roofline=tuple(roofline_findings(bench, roofs)),
        machine=machine_quality(bench, speedups),
        run_time=run_time(bench, roofs, finished_unix),
    )


def write_findings(
    benchmarks: str | os.PathLike,
    speedups: str | os.PathLike,
    crossovers: str | os.PathLike,
    output: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
    margin: float,
    precision: str | os.PathLike | None = None,
    scaling: str | os.PathLike | None = None,
    roofs: str | os.PathLike | None = None,
) -> Findings:
    """Decide the findings of the tables at these paths and write results/findings.parquet."""
    findings = decide(
        pd.read_parquet(benchmarks),
        pd.read_parquet(speedups),
        pd.read_parquet(crossovers),
        baseline_library,
        baseline_device,
        margin,
        precision=None if precision is None else pd.read_parquet(precision),
        scaling=None if scaling is None else pd.read_parquet(scaling),
        roofs=None if roofs is None else read_roofs(roofs).to_pandas(),
        finished_unix=time.time(),
    )
    write_findings_table(findings, output)
    return findings


# -- queued calls against waited-for calls ------------------------------------------------------
def synchronous_libraries(bench: pd.DataFrame) -> list[tuple[str, str]]:
    """(library, device) of the ok cells whose calls finish before they return."""
    if "dispatch" not in bench:
        return []
    d = bench[(bench["status"] == "ok") & (bench["dispatch"] == "synchronous")]
    return sorted(set(zip(d["library"], d["device"], strict=True)))


def pipeline_gaps(bench: pd.DataFrame, margin: float) -> tuple[PipelineGap, ...]:
    """One fact per library, device and direction where pipelining changes the time per
    call beyond the margin (``stats.verdict`` on the pipelined speedup)."""
    d = pipelined_cells(bench).copy()
    if d.empty:
        return ()
    d["verdict"] = [
        verdict(
            r.pipelined_speedup, r.pipelined_speedup_ci_low, r.pipelined_speedup_ci_high, margin
        )
        for r in d.itertuples()
    ]
    facts = []
    for setting, cells in settings(d):
        facts += _gaps(cells, setting)
    return tuple(facts)


def _gaps(d: pd.DataFrame, setting: str) -> list[PipelineGap]:
    facts = []
    for (lib, dev), part in d.groupby(["library", "device"], sort=True):
        for direction in (FASTER, SLOWER):
            hits = part[part["verdict"] == direction]
            if hits.empty:
                continue
            far = hits["pipelined_speedup"]
            best = hits.loc[far.idxmax() if direction == FASTER else far.idxmin()]
            facts.append(
                PipelineGap(
                    library=lib,
                    device=dev,
                    setting=setting,
                    direction=direction,
                    cells=len(hits),
                    of_cells=len(part),
                    operation=best["operation"],
                    size=int(best["size"]),
                    speedup=float(best["pipelined_speedup"]),
                    ci_low=float(best["pipelined_speedup_ci_low"]),
                    ci_high=float(best["pipelined_speedup_ci_high"]),
                )
            )
    return facts


def pipeline_facts(
    bench: pd.DataFrame, margin: float
) -> tuple[tuple[PipelineGap, ...], tuple[QueuedSameSpeed, ...], tuple[Synchronous, ...]]:
    """The gaps, the libraries timed both ways without one, and the synchronous libraries;
    nothing at all when no asynchronous library was timed both ways."""
    timed = pipelined_cells(bench)
    if timed.empty:
        return (), (), ()
    gaps = pipeline_gaps(bench, margin)
    told = {(g.library, g.device) for g in gaps}
    quiet = sorted(set(zip(timed["library"], timed["device"], strict=True)) - told)
    same = tuple(QueuedSameSpeed(lib, dev) for lib, dev in quiet)
    sync = tuple(Synchronous(lib, dev) for lib, dev in synchronous_libraries(bench))
    return gaps, same, sync


# -- the GPU notice -----------------------------------------------------------------------------
def _clean_reason(reason, library: str) -> str:
    text = re.sub(r"\s+", " ", str(reason or "no reason given")).strip()
    text = text.replace(f" (device=gpu asked for {library})", "")
    text = text.replace("|", "/")
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return text


def _skipped(cells: pd.DataFrame) -> tuple[SkippedGpuCells, ...]:
    reasons = zip(cells["error"], cells["library"], strict=True)
    cells = cells.assign(reason=[_clean_reason(r, lib) for r, lib in reasons])
    out = []
    for (library, reason), group in cells.groupby(["library", "reason"], sort=True):
        sizes = tuple(
            (op, tuple(int(s) for s in sorted(g["size"].unique())))
            for op, g in group.groupby("operation", sort=True)
        )
        out.append(SkippedGpuCells(library, reason, len(group), sizes))
    return tuple(out)


def _frame(benchmarks) -> pd.DataFrame:
    if hasattr(benchmarks, "to_pandas") and not isinstance(benchmarks, pd.DataFrame):
        return benchmarks.to_pandas()
    return benchmarks


def gpu_notice(
    bench: pd.DataFrame, baseline_library: str | None = None, baseline_device: str | None = None
) -> GpuNotice | None:
    """GPU cells that were asked for and are ``unavailable``; None when there are none."""
    bench = _frame(bench)
    gpu = bench[bench["device"] == "gpu"]
    skipped = gpu[gpu["status"] == "unavailable"]
    if skipped.empty:
        return None
    cpu = bench[bench["device"] == "cpu"]
    baseline_on_cpu = baseline_device == "cpu" and (cpu["library"] == baseline_library).any()
    return GpuNotice(
        none_found=len(skipped) == len(gpu),
        gpu_cells=len(gpu),
        skipped=_skipped(skipped),
        skipped_cells=len(skipped),
        hosts=tuple(sorted({str(h) for h in bench.get("host", pd.Series(dtype=str)).dropna()})),
        cpu_cells=len(cpu),
        cpu_baseline=baseline_library if baseline_on_cpu else None,
    )
