"""How quiet the machine was while the run measured, and where the run's wall time went,
both from the records the cells (and the roofs) keep: nothing is measured here.

The run's headline (``numbench.machine.contract``, where the rule and its thresholds are):
every figure comes from benchmarks.parquet (each cell's ``other_cpu_share``, ``steal_share``,
``workflow_cpu_share``, ``sentinel_s`` and ``unstable``; a table from before a column reads
it as unknown) and speedups.parquet (each verdict's ``settled``).

Where the run's wall time went (``timeline``: ``numbench.machine.contract.TimeLine``, part of
the run's ``RunTime``): the wall runs from the run's first record to its findings. Timing
jobs hold the host's lock one at a time and the findings come after every one of them, so
the recorded parts never overlap: what they leave of the wall is process starts, scheduling
and the rest, said as one line (``other_s``) so that the parts sum to the wall exactly.
Records are per cell, with per-process figures as medians (``import_s``, ``first_call_s``)
or sums (``sampling_s``) over the cell's kept processes; a paired cell's baseline processes
are not in its row, so each is counted at its baseline cell's per-process figures.
"""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd

from numbench.cells import KEY_WITH_HOST
from numbench.contract.conclusions import in_doubt
from numbench.machine.contract import (
    BUSY_MACHINE_SHARE,
    BUSY_RUN_FRACTION,
    SENTINEL_QUANTILES,
    UNSTABLE_RUN_FRACTION,
    UNSTEADY_SENTINEL_SPREAD,
    CappedCell,
    MachineQuality,
    RunTime,
    TimeLine,
)


def disturbance(bench: pd.DataFrame) -> pd.Series:
    """Per cell, the share of all CPUs' time others took meanwhile (other processes and
    steal; NaN where the cell did not record the machine)."""
    if "other_cpu_share" not in bench:
        return pd.Series(float("nan"), index=bench.index)
    other = pd.to_numeric(bench["other_cpu_share"], errors="coerce")
    if "steal_share" not in bench:
        return other
    return other + pd.to_numeric(bench["steal_share"], errors="coerce").fillna(0.0)


def _median(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame:
        return None
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    return None if values.empty else float(values.median())


def sentinel_figures(bench: pd.DataFrame) -> dict:
    """The sentinel's figures of ``MachineQuality`` from every cell that timed it, whatever
    its status (each cell's job timed it before measuring): the count, the fastest and
    slowest time, the spread (slowest over fastest) and the middle spread (between the
    ``SENTINEL_QUANTILES``, linearly interpolated), and whether the machine's speed moved
    past ``UNSTEADY_SENTINEL_SPREAD`` (spreads and verdict None below two cells)."""
    if "sentinel_s" not in bench:
        return {}
    times = pd.to_numeric(bench["sentinel_s"], errors="coerce").dropna()
    times = times[times > 0]
    if times.empty:
        return {}
    fastest, slowest = float(times.min()), float(times.max())
    low, high = (float(times.quantile(q)) for q in SENTINEL_QUANTILES)
    middle = high / low if len(times) > 1 else None
    return {
        "sentinel_cells": len(times),
        "sentinel_fastest_s": fastest,
        "sentinel_slowest_s": slowest,
        "sentinel_spread": slowest / fastest if len(times) > 1 else None,
        "sentinel_middle_spread": middle,
        "speed_moved": None if middle is None else bool(middle > UNSTEADY_SENTINEL_SPREAD),
    }


def machine_quality(bench: pd.DataFrame, speedups: pd.DataFrame) -> MachineQuality:
    """The run's ``MachineQuality``: its ok cells' records, and its verdicts in doubt."""
    ok = bench[bench["status"] == "ok"].copy()
    ok["_taken"] = disturbance(ok)
    ok["_busy"] = ok["_taken"] > BUSY_MACHINE_SHARE
    watched = ok[ok["_taken"].notna()]
    unstable = ok["unstable"].fillna(False).astype(bool)
    quiet = None
    if not watched.empty:
        quiet = bool(watched["_busy"].sum() <= BUSY_RUN_FRACTION * len(watched))
    measured = speedups[speedups["speedup"].notna()]
    doubtful = measured[in_doubt(measured)]
    key = list(KEY_WITH_HOST)
    busy_keys = {tuple(r) for r in ok.loc[ok["_busy"], key].itertuples(index=False)}
    busy_doubt = sum(tuple(r) in busy_keys for r in doubtful[key].itertuples(index=False))
    return MachineQuality(
        quiet=quiet,
        watched=len(watched),
        busy_cells=int(watched["_busy"].sum()),
        other_cpu_share=_median(watched, "other_cpu_share"),
        steal_share=_median(watched, "steal_share"),
        busiest_share=None if watched.empty else float(watched["_taken"].max()),
        ok_cells=len(ok),
        unstable_cells=int(unstable.sum()),
        busy_unstable=int((unstable & ok["_busy"]).sum()),
        verdicts=len(measured),
        in_doubt=len(doubtful),
        busy_in_doubt=int(busy_doubt),
        **sentinel_figures(bench),
        workflow_cpu_share=_median(watched, "workflow_cpu_share"),
        mostly_unstable=bool(unstable.sum() > UNSTABLE_RUN_FRACTION * len(ok)),
    )


def replicate_setting(text, name: str):
    """One of a cell's ``replicate_settings`` (its JSON), or None where unreadable."""
    try:
        return json.loads(text).get(name)
    except (TypeError, ValueError, AttributeError):
        return None


def _number(frame: pd.DataFrame, column: str, default: float = 0.0) -> pd.Series:
    if column not in frame:
        return pd.Series(default, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").fillna(default)


def run_time(
    bench: pd.DataFrame, roofs: pd.DataFrame | None = None, finished_unix: float | None = None
) -> RunTime | None:
    """How long the cells took and where the time went, with the run's whole wall
    (``timeline``: to ``finished_unix``, when the findings were decided); None where no cell
    recorded its time. Every cell counts, whatever its status: each took its time."""
    timed = bench[pd.to_numeric(bench.get("wall_s"), errors="coerce").notna()]
    if "wall_s" not in bench or timed.empty:
        return None
    wall = _number(timed, "wall_s")
    rounds = _number(timed, "replicates")
    least = timed.get("replicate_settings", pd.Series(None, index=timed.index))
    least = pd.to_numeric(least.map(lambda t: replicate_setting(t, "min")), errors="coerce")
    added = (rounds - least.fillna(rounds)).clip(lower=0)
    retries = _number(timed, "set_aside")
    per_attempt = wall / (rounds + retries).clip(lower=1)
    busy = disturbance(timed) > BUSY_MACHINE_SHARE
    capped = timed["capped"].fillna(False).astype(bool) if "capped" in timed else busy & False
    return RunTime(
        cells=len(timed),
        total_s=float(wall.sum()),
        rounds=int(rounds.sum()),
        added_rounds=int(added.sum()),
        added_s=float((per_attempt * added).sum()),
        retries=int(retries.sum()),
        retries_s=float((per_attempt * retries).sum()),
        busy_s=float(wall[busy].sum()),
        capped=int(capped.sum()),
        **quiet_waits(timed),
        timeline=timeline(bench, roofs, finished_unix),
    )


def quiet_waits(timed: pd.DataFrame) -> dict:
    """``RunTime``'s figures of the waits for quiet (none where no cell was asked to wait)."""
    if "quiet_wait_s" not in timed or timed["quiet_wait_s"].isna().all():
        return {}
    waits = _number(timed, "quiet_wait_s")
    reached = timed["quiet_reached"] if "quiet_reached" in timed else None
    not_quiet = 0 if reached is None else int((reached == False).sum())  # noqa: E712
    return {
        "waited_cells": int((waits > 0).sum()),
        "waited_s": float(waits.sum()),
        "not_quiet": not_quiet,
    }


def capped_cells(bench: pd.DataFrame, speedups: pd.DataFrame) -> list[CappedCell]:
    """The cells a time cap stopped (``capped``), with the cap they were measured with and
    their speedup's verdict."""
    if "capped" not in bench:
        return []
    key = list(KEY_WITH_HOST)
    verdicts = {
        tuple(r[:-2]): (r[-2], r[-1])
        for r in speedups[speedups["speedup"].notna()]
        .assign(_settled=~in_doubt(speedups))[[*key, "verdict", "_settled"]]
        .itertuples(index=False)
    }
    out = []
    for r in bench[bench["capped"].fillna(False).astype(bool)].itertuples():
        verdict, settled = verdicts.get(tuple(getattr(r, k) for k in key), (None, None))
        out.append(
            CappedCell(
                r.library,
                r.device,
                r.operation,
                int(r.size),
                int(r.replicates),
                float(r.wall_s),
                replicate_setting(r.replicate_settings, "max_cell_s"),
                verdict,
                None if settled is None else bool(settled),
            )
        )
    return out


#: ``started_at`` is written to the whole second, cut short: a wait for the lock shorter
#: than that cannot be told from it, and only what lies past it counts
STARTED_AT_RESOLUTION_S = 1.0


def _floats(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column as floats, a missing value or a missing column as 0 (``timeline``'s)."""
    if column not in frame:
        return pd.Series(0.0, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").fillna(0.0).astype(float)


def _unix(text) -> float:
    try:
        return dt.datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return float("nan")


def per_process(bench: pd.DataFrame) -> pd.DataFrame:
    """Per cell, one of its processes' import, first call and sampling (both modes). The
    import is what a process paid itself (``import_paid_s``, over the cell's processes: a
    zygote's import counts once, in its first worker), ``import_s`` where a cell does not
    say; the first call likewise (``first_call_paid_s``, over its processes), else
    ``first_call_s``."""
    rounds = _floats(bench, "replicates").clip(lower=1)
    imports = _floats(bench, "import_s")
    if "import_paid_s" in bench:
        paid = pd.to_numeric(bench["import_paid_s"], errors="coerce")
        imports = (paid / rounds).where(paid.notna(), imports)
    first = _floats(bench, "first_call_s")
    if "first_call_paid_s" in bench:
        # what the processes paid, not what one costs a user: where a cell's processes shared
        # their compilations (``compile_cache``), the later ones paid less than the first
        paid = pd.to_numeric(bench["first_call_paid_s"], errors="coerce")
        first = (paid / rounds).where(paid.notna(), first)
    return pd.DataFrame(
        {
            "import": imports,
            "first": first,
            "sampling": (_floats(bench, "sampling_s") + _floats(bench, "pipelined_sampling_s"))
            / rounds,
        },
        index=bench.index,
    )


def paired_baselines(bench: pd.DataFrame) -> pd.DataFrame:
    """Per cell, its paired baseline's per-process figures (zero where it ran alone or its
    baseline has no row)."""
    own = per_process(bench)
    zero = pd.DataFrame(0.0, index=bench.index, columns=own.columns)
    if "paired_with" not in bench:
        return zero
    key = list(KEY_WITH_HOST)
    rows = {tuple(k): i for i, k in zip(bench.index, bench[key].itertuples(index=False))}
    for i, paired in bench["paired_with"].items():
        if not isinstance(paired, str) or "/" not in paired:
            continue
        library, device = paired.split("/", 1)
        cell = bench.loc[i, key].to_dict() | {"library": library, "device": device}
        j = rows.get(tuple(cell[k] for k in key))
        if j is not None:
            zero.loc[i] = own.loc[j]
    return zero


def _roof_stretches(roofs: pd.DataFrame | None) -> pd.DataFrame:
    """The roofs' jobs' times holding the lock, each once (every roof of a job repeats it)."""
    columns = ["locked_from_unix", "locked_until_unix"]
    if roofs is None or not set(columns) <= set(roofs.columns):
        return pd.DataFrame(columns=columns, dtype=float)
    return roofs[columns].apply(pd.to_numeric, errors="coerce").dropna().drop_duplicates()


def timeline(
    bench: pd.DataFrame, roofs: pd.DataFrame | None = None, finished_unix: float | None = None
) -> TimeLine | None:
    """Where the run's wall went, from its first record (the first job's start, where every
    cell recorded its jobs', ``jobs_from_unix``; else estimated from the cells' records, or
    the roofs' lock if earlier) to ``finished_unix`` (when the findings were decided; without
    it, to the last record, with no analysis); None where no cell recorded when it held the
    lock."""
    needed = {"locked_from_unix", "locked_until_unix", "wall_s", "started_at"}
    if not needed <= set(bench.columns):
        return None
    cells = bench[bench["locked_until_unix"].notna() & bench["wall_s"].notna()]
    if cells.empty:
        return None
    started = cells["started_at"].map(_unix)
    locked_from, locked_until = (
        _floats(cells, "locked_from_unix"),
        _floats(cells, "locked_until_unix"),
    )
    jobs_from = pd.to_numeric(cells.get("jobs_from_unix", pd.Series()), errors="coerce")
    if len(jobs_from) == len(cells) and jobs_from.notna().all():
        first = float(jobs_from.min())  # each cell recorded when its first job started
    else:
        # a cell's wall_s is its own job's and its early rounds'; its job ran from its start
        # to its lock's end (and a moment after, writing), so the rest is the early rounds'
        early = (_floats(cells, "wall_s") - (locked_until - started)).clip(lower=0.0)
        first = float(started.min()) - float(early.fillna(0.0).sum())
    roof = _roof_stretches(roofs)
    if not roof.empty:
        first = min(first, float(roof["locked_from_unix"].min()))
    last = float(locked_until.max())
    if not roof.empty:
        last = max(last, float(roof["locked_until_unix"].max()))
    ended = last if finished_unix is None else max(float(finished_unix), last)
    rounds = _floats(cells, "replicates")
    own, beside = per_process(cells), paired_baselines(bench).loc[cells.index]
    spent = (own.mul(rounds, axis=0) + beside.mul(rounds, axis=0)).sum()
    lock_waits = (locked_from - started - STARTED_AT_RESOLUTION_S).clip(lower=0.0).fillna(0.0)
    parts = {
        "imports_s": float(spent["import"]),
        "first_calls_s": float(spent["first"]),
        "sampling_s": float(spent["sampling"]),
        "quiet_waits_s": float(_floats(cells, "quiet_wait_s").sum()),
        "lock_waits_s": float(lock_waits.sum()),
        "roofs_s": float((roof["locked_until_unix"] - roof["locked_from_unix"]).sum()),
        "analysis_s": ended - last,
    }
    # the parts never overlap, so the wall is at least their sum, whatever the estimate of
    # the run's start; what they leave is the residual
    wall = max(ended - first, sum(parts.values()))
    return TimeLine(
        started_unix=ended - wall,
        ended_unix=ended,
        wall_s=wall,
        **parts,
        other_s=wall - sum(parts.values()),
    )
