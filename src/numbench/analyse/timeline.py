"""Where a run's wall time went (``numbench.machine.contract.TimeLine``), from the records
the cells and the roofs keep: nothing is measured here.

The run's wall runs from its first record to its findings. Timing jobs hold the host's lock
one at a time and the findings come after every one of them, so the recorded parts never
overlap: what they leave of the wall is process starts, scheduling and the rest, said as one
line (``other_s``) so that the parts sum to the wall exactly. Records are per cell, with
per-process figures as medians (``import_s``, ``first_call_s``) or sums (``sampling_s``) over
the cell's kept processes; a paired cell's baseline processes are not in its row, so each is
counted at its baseline cell's per-process figures.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from numbench.cells import KEY_WITH_HOST
from numbench.machine.contract import TimeLine

#: ``started_at`` is written to the whole second, cut short: a wait for the lock shorter
#: than that cannot be told from it, and only what lies past it counts
STARTED_AT_RESOLUTION_S = 1.0


def _number(frame: pd.DataFrame, column: str) -> pd.Series:
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
    rounds = _number(bench, "replicates").clip(lower=1)
    imports = _number(bench, "import_s")
    if "import_paid_s" in bench:
        paid = pd.to_numeric(bench["import_paid_s"], errors="coerce")
        imports = (paid / rounds).where(paid.notna(), imports)
    first = _number(bench, "first_call_s")
    if "first_call_paid_s" in bench:
        # what the processes paid, not what one costs a user: where a cell's processes shared
        # their compilations (``compile_cache``), the later ones paid less than the first
        paid = pd.to_numeric(bench["first_call_paid_s"], errors="coerce")
        first = (paid / rounds).where(paid.notna(), first)
    return pd.DataFrame(
        {
            "import": imports,
            "first": first,
            "sampling": (_number(bench, "sampling_s") + _number(bench, "pipelined_sampling_s"))
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
    """Where the run's wall went, from its first record to ``finished_unix`` (when the
    findings were decided; without it, to the last record, with no analysis); None where
    no cell recorded when it held the lock."""
    needed = {"locked_from_unix", "locked_until_unix", "wall_s", "started_at"}
    if not needed <= set(bench.columns):
        return None
    cells = bench[bench["locked_until_unix"].notna() & bench["wall_s"].notna()]
    if cells.empty:
        return None
    started = cells["started_at"].map(_unix)
    locked_from, locked_until = (
        _number(cells, "locked_from_unix"),
        _number(cells, "locked_until_unix"),
    )
    # a cell's wall_s is its own job's and its early rounds'; its job ran from its start
    # to its lock's end (and a moment after, writing), so the rest is the early rounds'
    early = (_number(cells, "wall_s") - (locked_until - started)).clip(lower=0.0).fillna(0.0)
    roof = _roof_stretches(roofs)
    first = float(started.min()) - float(early.sum())
    if not roof.empty:
        first = min(first, float(roof["locked_from_unix"].min()))
    last = float(locked_until.max())
    if not roof.empty:
        last = max(last, float(roof["locked_until_unix"].max()))
    ended = last if finished_unix is None else max(float(finished_unix), last)
    rounds = _number(cells, "replicates")
    own, beside = per_process(cells), paired_baselines(bench).loc[cells.index]
    spent = (own.mul(rounds, axis=0) + beside.mul(rounds, axis=0)).sum()
    lock_waits = (locked_from - started - STARTED_AT_RESOLUTION_S).clip(lower=0.0).fillna(0.0)
    parts = {
        "imports_s": float(spent["import"]),
        "first_calls_s": float(spent["first"]),
        "sampling_s": float(spent["sampling"]),
        "quiet_waits_s": float(_number(cells, "quiet_wait_s").sum()),
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
