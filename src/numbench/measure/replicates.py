"""A cell is several fresh worker processes, paired with the baseline where it has one.

Why several: processes of the same cell differ (allocator state, memory layout, JIT code
placement), often by more than the samples inside one process do; one process cannot show
it. Why paired: the machine drifts over minutes, and Snakemake promises no job order, so the
baseline cell and a library's cell may be measured far apart, on a slow minute and a fast
one, or on different nodes of a cluster. Instead, a cell that has a baseline runs, in each
round, one baseline process and one of its own, in a seeded random order (neither side
always first), so every ratio is formed from measurements taken close together on the same
host, whatever order the jobs ran in. With ``replicates.lockstep`` (the default) both
processes of a round are alive at once and take their samples in turns, milliseconds apart
(``numbench.measure.lockstep``); without it they run back to back, seconds apart. The baseline's own
cell measures it alone.

Rounds apart in time (``replicates.early_rounds``): the machine also drifts between the
minutes of a run, by more than processes measured seconds apart differ (docs/history.md,
"Reproducibility: fourteen run pairs", pairs 1 and 2). A cell
whose rounds all run back to back sees none of that drift, so its interval is too narrow and
a second run lands outside it. So the first ``early_rounds`` rounds of every cell run as jobs
of their own (rule ``early_round``), scheduled before any cell's remaining rounds, and the
cell's job continues from them (``measure_replicates(earlier=...)``): each cell's rounds
are then minutes apart, and its interval sees the drift.

The number of rounds adapts (``replicates`` in the config): ``min`` rounds always; then, up
to ``max``, one more while the verdict is in doubt. A paired cell's verdict (faster, same,
slower: ``numbench.stats.verdict``) is in doubt while its speedup's 95% interval holds the
stopping margin or its inverse (``stop_margin``), the interval widened first to the least spread a few rounds can show
(``round_sd``: two or three rounds cannot measure their own spread; the typical round
spread, estimated as ``numbench.analyse.speedups`` does, is in docs/history.md,
"Reproducibility: fourteen run pairs"). Once ``RUN_SD_CELLS`` paired cells of the run
have finished on the cell's device and host, the floor takes their typical round spread
(``run_round_sd``) for ``round_sd``: the same estimate the speedup table floors every
interval with once all cells are in, so that a cell the rule calls settled is settled
there too, and a cell the table would call in doubt is not stopped as settled. A cell
settled faster, slower or the same stops at ``min``, however wide its interval; a cell near
the stopping margin gets more rounds, because there a second run would otherwise give the other
verdict. A cell that even ``max`` rounds could not settle stops too (``could_settle``: the
narrowest interval ``max`` rounds can show about its speedup, ``round_sd``'s floor, still
holds an edge): a speedup just short of the margin stays in doubt however its rounds fall,
so its rounds past ``min`` would be spent for nothing. An unpaired cell (the baseline's own, or one with ``paired: false``) has no verdict
of its own and adds rounds while its median's interval is wider than ``target_ci`` of its
value. Cells whose processes still disagree are flagged unstable later. Processes are the
cost of a cell, so they go where a verdict is in doubt.

A cap on a cell's time (``replicates.max_cell_s``): on a busy machine every round takes
longer and more verdicts stay in doubt, so the stopping rule adds more rounds of longer
processes. With the cap, a cell whose rounds (its early rounds' jobs included) have taken
that long adds no further round, the stopping rule's wish or ``min`` notwithstanding; its
first round always runs, and a round begun runs to its end (measured again, if disturbed).
The cell records that the cap stopped it (``capped``), and the summary says so.

A process that is not ``ok`` ends the cell's measuring: its status and error are the cell's
(a fault in any process is the cell's fault). A failed baseline process ends the pairing
only: the cell keeps its own processes, and its speedup is then taken against the baseline
cell instead.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numbench.contract import BASELINE, MEASURED, write_text_atomic
from numbench.measure.activity import Activity
from numbench.measure.quiet import LAST, STILL_BUSY, taken_beyond, undisturbed
from numbench.measure.quiet import busy_now as look
from numbench.spec import CellSpec, ProcessReport
from numbench.stats import (
    Z95,
    could_settle,
    median_ci,
    ratio_ci,
    relative_half_width,
    typical_sd,
    verdict_settled,
)
from numbench.stats import round_variance as stats_round_variance

#: bootstrap resamples of the stopping rule (the published intervals use the full count)
STOPPING_RESAMPLES = 500
#: the finished paired cells of a run whose round spread the stopping rule takes for
#: ``replicates.round_sd`` (``run_round_sd``): fewer leave ``round_sd``'s own value, since a
#: typical spread from a few 2-round cells is a guess of its own
RUN_SD_CELLS = 20


@dataclass
class ProcessRun:
    """One worker process of a cell: which side it measured, in which round, and when."""

    role: str
    replicate: int
    started_unix: float
    report: ProcessReport


@dataclass(frozen=True)
class RunSd:
    """The run's typical round-to-round standard deviation of a log speedup so far
    (``run_round_sd``), and over how many finished cells."""

    sd: float
    cells: int


@dataclass
class CellClock:
    """The time a cell has spent on its rounds, held against ``replicates.max_cell_s``:
    ``earlier_s`` (its early rounds' jobs) and the ``clock``'s seconds since it was made
    (tests hand in a constructed clock). ``capped`` is set once the cap stopped the cell."""

    earlier_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    capped: bool = False
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spent_s(self) -> float:
        return self.earlier_s + self.clock() - self.started


def capped(spec: CellSpec, replicate: int, clock: CellClock) -> bool:
    """True when the cell adds no round ``replicate`` because of ``replicates.max_cell_s``
    (never its first round); says so in the cell's log."""
    cap = spec.replicates.max_cell_s
    if cap is None or replicate < 1 or clock.spent_s() < cap:
        return False
    print(
        f"round {replicate}: the cell has spent {clock.spent_s():.1f} s on its rounds, "
        f"past replicates.max_cell_s = {cap:g}; stopping at {replicate} rounds",
        flush=True,
    )
    clock.capped = True
    return True


def round_seed(spec: CellSpec, replicate: int) -> int:
    """The seed of a round's orders: the cell and the round, so a rerun keeps them."""
    seed = zlib.crc32(f"{spec.library}/{spec.device}/{spec.operation}/{spec.size}".encode())
    return seed * 1000 + replicate


def round_order(spec: CellSpec, replicate: int) -> tuple[str, str]:
    """Which side runs (lockstep: starts) first in a paired round: seeded by the cell and
    the round, so a rerun keeps the order and neither side is always first."""
    first_baseline = random.Random(round_seed(spec, replicate)).random() < 0.5
    return (BASELINE, MEASURED) if first_baseline else (MEASURED, BASELINE)


def enough_rounds(
    spec: CellSpec, runs: list[ProcessRun], run_sd: RunSd | None = None
) -> str | None:
    """Why more processes would not change what the cell says, in words, or None while they
    could. Paired: its speedup's verdict is settled (``verdict_settled``, with the floor
    ``1.96 * sd / sqrt(rounds)``), or no round up to ``max`` could settle it
    (``could_settle``: the narrowest interval ``max`` rounds can show about its speedup
    still holds the stopping margin or its inverse, so those rounds would leave it in doubt
    at their cost). ``sd`` is the run's own round spread so far (``run_sd``, from
    ``run_round_sd``) where known, else ``replicates.round_sd``. Unpaired: its median's
    interval is within ``replicates.target_ci`` of its value."""
    own = [r.report.samples_s for r in runs if r.role == MEASURED]
    base = [r.report.samples_s for r in runs if r.role == BASELINE]
    reps = spec.replicates
    if base and len(base) == len(own):
        sd, whose = (
            (reps.round_sd, "replicates.round_sd")
            if run_sd is None
            else (run_sd.sd, f"the run's round spread over {run_sd.cells} cells")
        )
        point, lo, hi = ratio_ci(base, own, paired=True, resamples=STOPPING_RESAMPLES)
        floor = Z95 * sd / math.sqrt(len(own))
        if verdict_settled(point, lo, hi, reps.stop_margin, floor):
            return "its verdict is settled"
        if not could_settle(point, reps.max, sd, reps.stop_margin):
            return (
                f"its verdict is in doubt and {reps.max} rounds could not settle it (speedup "
                f"{point:.3g}: even the narrowest interval {reps.max} rounds can show, "
                f"at {whose} {sd:.3g}, holds the stopping margin "
                f"{reps.stop_margin:g} or its inverse)"
            )
        return None
    point = float(np.median([s for g in own for s in g]))
    lo, hi = median_ci(own, resamples=STOPPING_RESAMPLES)
    if relative_half_width(point, lo, hi) <= reps.target_ci:
        return "its median's interval is within replicates.target_ci"
    return None


#: runs the processes of a lockstep round: their specs in starting order and the seed of
#: the turns' order -> each one's start (Unix seconds) and report (``numbench.measure.supervisor.run_lockstep``)
RunPair = Callable[[list[CellSpec], int], list[tuple[float, ProcessReport]]]


def measure_round(
    spec: CellSpec,
    replicate: int,
    run_worker: Callable[[CellSpec], ProcessReport],
    paired: CellSpec | None,
    run_pair: RunPair | None = None,
    busy_now: Callable[[int], float | None] | None = look,
) -> list[ProcessRun]:
    """One round: the cell's own process and, paired, a baseline process beside it, in the
    round's seeded order: back to back, where a failed own process ends the round, or, with
    ``replicates.lockstep`` and a ``run_pair``, both at once taking their samples in turns
    (``numbench.measure.lockstep``; without a ``run_pair`` a lockstep round runs back to back).

    A round in which something else took more than ``replicates.max_cpu_taken`` of a
    process's CPUs while it measured (another program, or the host of a virtual machine:
    ``numbench.measure.cpu_taken``) is measured again, both processes, up to ``CPU_TAKEN_RETRIES``
    times (the rule the roofs follow too: ``numbench.measure.quiet.undisturbed``): its samples timed
    the other program too, and would weigh on one side of the ratio only. The attempt kept
    says how many were set aside (``ProcessReport.set_aside``); the last is kept, busy or not.
    Before a retry the machine is looked at (``busy_now(spec.threads)``; None: no look):
    where what others take would still take more than the limit of the worker's CPUs, the
    round is kept as measured.
    """
    limit = spec.replicates.max_cpu_taken

    def attempt(number: int) -> list[ProcessRun]:
        return _attempt(spec, replicate, number, run_worker, paired, run_pair)

    def say(runs: list[ProcessRun], then: str) -> None:
        busy = [r for r in runs if taken_beyond(_shares([r]), limit)]
        took = ", ".join(f"{r.report.cpu_taken:.0%} of the {r.role} process's" for r in busy)
        print(
            f"round {replicate}: other programs took {took} CPU time while it measured "
            f"(over replicates.max_cpu_taken = {limit:g}); {then}",
            flush=True,
        )

    def still_busy(runs: list[ProcessRun], now: float) -> None:
        say(runs, f"other programs would still take {now:.0%} of the worker's CPUs: {STILL_BUSY}")

    def again(runs: list[ProcessRun]) -> None:
        say(runs, "measuring the round again")
        forget_compiled(runs, spec, paired)

    look_now = None if busy_now is None else functools.partial(busy_now, spec.threads)
    runs, set_aside = undisturbed(
        attempt, _shares, limit, again, LAST, busy_now=look_now, still_busy=still_busy
    )
    for run in runs:
        run.report.set_aside = set_aside
    return runs


def forget_compiled(runs: list[ProcessRun], spec: CellSpec, paired: CellSpec | None) -> None:
    """An attempt set aside that compiled for its cell (``compile_cache``: ``cold``) takes
    its compilations with it: the next attempt compiles again, so that the cell's first
    call is still measured in a process it keeps."""
    from numbench.measure.compile_cache import forget
    from numbench.measure.process import cell_compile_folder

    for run in runs:
        if run.report.compile_cache == "cold":
            forget(cell_compile_folder(spec if run.role == MEASURED else paired))


def _shares(runs: list[ProcessRun]) -> list[float | None]:
    """The CPU shares others took of a round's processes that ended ``ok`` (the others'
    samples end the cell or the pairing, disturbed or not)."""
    return [r.report.cpu_taken for r in runs if r.report.status == "ok"]


def _attempt(
    spec: CellSpec,
    replicate: int,
    attempt: int,
    run_worker: Callable[[CellSpec], ProcessReport],
    paired: CellSpec | None,
    run_pair: RunPair | None,
) -> list[ProcessRun]:
    """One attempt at a round (``measure_round``)."""
    if paired is None:
        started = time.time()
        return [ProcessRun(MEASURED, replicate, started, run_worker(spec))]
    roles = round_order(spec, replicate)
    if spec.replicates.lockstep and run_pair is not None:
        specs = [spec if role == MEASURED else paired for role in roles]
        ended = run_pair(specs, round_seed(spec, replicate) * 10 + attempt)
        return [ProcessRun(role, replicate, t, rep) for role, (t, rep) in zip(roles, ended)]
    runs = []
    for role in roles:
        started = time.time()
        report = run_worker(spec if role == MEASURED else paired)
        runs.append(ProcessRun(role, replicate, started, report))
        if role == MEASURED and report.status != "ok":
            break
    return runs


def measure_replicates(
    spec: CellSpec,
    run_worker: Callable[[CellSpec], ProcessReport],
    earlier: list[ProcessRun] = (),
    run_pair: RunPair | None = None,
    clock: CellClock | None = None,
    busy_now: Callable[[int], float | None] | None = look,
    run_sd: RunSd | None = None,
) -> tuple[list[ProcessRun], str | None]:
    """Run the cell's processes; return them and, when pairing had to stop, why.
    ``run_pair`` runs a lockstep round (``measure_round``); ``run_sd``: the run's round
    spread so far, which the stopping rule takes for ``round_sd`` (``enough_rounds``).

    ``earlier``: the processes of rounds already measured in jobs of their own (the spread
    rounds, ``replicates.early_rounds``); they count as the first rounds, and the rounds run here
    continue their numbering. ``clock``: the cell's time against ``replicates.max_cell_s``
    (its ``capped`` says whether the cap stopped the cell); None starts one here.
    ``busy_now``: the look before a disturbed round is measured again (``measure_round``).
    """
    clock = CellClock() if clock is None else clock
    runs: list[ProcessRun] = []
    paired = spec.paired_spec()
    pairing_error = None
    done = 1 + max((r.replicate for r in earlier), default=-1)

    def absorb(round_runs: list[ProcessRun]) -> bool:
        """Add a round's processes; True when the cell's own process failed (the end)."""
        nonlocal runs, paired, pairing_error
        for run in round_runs:
            if run.role == BASELINE:
                if paired is None:
                    continue  # pairing ended in an earlier round
                if run.report.status != "ok":
                    pairing_error = (
                        f"the paired baseline process ({spec.paired_with}) ended "
                        f"{run.report.status}: {run.report.error}; speedup taken against "
                        "the baseline cell"
                    )
                    runs = [r for r in runs if r.role == MEASURED]
                    paired = None
                    continue
            runs.append(run)
            if run.role == MEASURED and run.report.status != "ok":
                return True
        return False

    for replicate in range(done):
        if absorb(sorted((r for r in earlier if r.replicate == replicate), key=_started)):
            return runs, pairing_error
    for replicate in range(done, spec.replicates.max):
        if replicate >= spec.replicates.min:
            why = enough_rounds(spec, runs, run_sd)
            if why is not None:
                print(f"after {replicate} rounds: {why}; no more rounds", flush=True)
                break
        if capped(spec, replicate, clock):
            break
        if absorb(measure_round(spec, replicate, run_worker, paired, run_pair, busy_now)):
            break
    return runs, pairing_error


def _started(run: ProcessRun) -> float:
    return run.started_unix


def write_round(
    path: str | os.PathLike,
    spec: CellSpec,
    runs: list[ProcessRun],
    wall_s: float,
    quiet_wait_s: float | None = None,
    activity: dict | None = None,
    job_started_unix: float | None = None,
):
    """Write one early round (its processes, its supervisor's wall time, its wait for
    quiet, what the machine did while it measured, ``activity.Activity.to_dict``, and when
    its job started) as JSON, whole or not at all (``numbench.contract.replacing``)."""
    data = {
        "spec": json.loads(spec.to_json()),
        "wall_s": wall_s,
        "quiet_wait_s": quiet_wait_s,
        "activity": activity,
        "job_started_unix": job_started_unix,
        "runs": [
            {
                "role": r.role,
                "replicate": r.replicate,
                "started_unix": r.started_unix,
                "report": r.report.to_dict(),
            }
            for r in runs
        ],
    }
    write_text_atomic(json.dumps(data), path)


class RoundFileError(ValueError):
    """An early round's file that cannot be used (unreadable, or another cell's): the
    message names it, and ``path`` is the file."""

    def __init__(self, path: str | os.PathLike, why: str):
        super().__init__(f"{path}: {why}")
        self.path = path


def read_rounds(paths: list[str | os.PathLike], spec: CellSpec) -> tuple[list[ProcessRun], float]:
    """The processes of the cell's early rounds and their summed supervisor wall time.

    A file that does not parse, or that was measured for another spec (another cell, or the
    config changed since), is refused with its path named.
    """
    runs, wall = [], 0.0
    want = json.loads(spec.to_json())
    for path in paths:
        try:
            with open(path) as fh:
                data = json.load(fh)
            if data["spec"] != want:
                raise RoundFileError(path, "measured for another spec than this cell's")
            wall += float(data["wall_s"])
            _check_round_extras(path, data)
            for r in data["runs"]:
                report = ProcessReport.from_dict(r["report"])
                runs.append(ProcessRun(r["role"], int(r["replicate"]), r["started_unix"], report))
        except RoundFileError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RoundFileError(path, f"not a readable early round ({exc})") from None
    return runs, wall


def _check_round_extras(path: str | os.PathLike, data: dict) -> None:
    """Refuse a round file whose wait for quiet, job start or activity entry the cell's job
    could not use after the lock (``rounds_fields``): each may be absent (files from before
    it was recorded) or null."""
    for name in ("quiet_wait_s", "job_started_unix"):
        value = data.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise RoundFileError(path, f"its {name} is {value!r}, not a number or null")
    if data.get("activity") is not None:
        try:
            Activity.from_dict(data["activity"])
        except ValueError as exc:
            raise RoundFileError(path, f"a bad activity entry: {exc}") from None


def rounds_fields(paths: list[str | os.PathLike], names: tuple[str, ...]) -> dict[str, list]:
    """Each entry of ``names`` over the early rounds that ``read_rounds`` has read, in order,
    where a round holds one (``quiet_wait_s``, ``activity``: ``activity.Activity.to_dict``,
    ``job_started_unix``), each file read once; a round file from before an entry was
    recorded gives nothing for it."""
    found: dict[str, list] = {name: [] for name in names}
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        for name in names:
            if data.get(name) is not None:
                found[name].append(data[name])
    return found


def round_variance(runs: list[ProcessRun]) -> tuple[float, int] | None:
    """A paired cell's variance of its rounds' log speedups and its degrees of freedom
    (rounds - 1), as the speedup table's floor takes it (``numbench.analyse.speedups``);
    None for a cell without two paired rounds."""
    own = [r.report.samples_s for r in runs if r.role == MEASURED]
    base = [r.report.samples_s for r in runs if r.role == BASELINE]
    if len(own) < 2 or len(base) != len(own) or not all(own) or not all(base):
        return None
    variance, df = stats_round_variance(base, own)
    return (variance, df) if math.isfinite(variance) else None


def write_round_sd(
    folder: str | os.PathLike, name: str, spec: CellSpec, host: str | None, runs: list[ProcessRun]
) -> bool:
    """Leave a finished paired cell's round variance (``round_variance``) in ``folder``
    as ``name``.json for the cells measured after it (``run_round_sd``); False (nothing
    written) for a cell without two paired rounds."""
    found = round_variance(runs)
    if found is None:
        return False
    data = {"device": spec.device, "host": host, "variance": found[0], "df": found[1]}
    os.makedirs(folder, exist_ok=True)
    write_text_atomic(json.dumps(data), Path(folder, f"{name}.json"))
    return True


def run_round_sd(
    folder: str | os.PathLike, device: str, host: str | None, but: str | None = None
) -> RunSd | None:
    """The run's round spread so far on ``device`` of ``host``: ``typical_sd`` of the round
    variances that the finished cells left in ``folder`` (``write_round_sd``), the same
    estimate the speedup table's floor makes once every cell is in; None below
    ``RUN_SD_CELLS`` cells. ``but``: a cell's own name, left out (its earlier measurement).
    A file that cannot be read is passed over: the estimate is a guide to the stopping rule,
    never part of a result."""
    variances, dfs = [], []
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json") and n != f"{but}.json"]
    except OSError:
        return None
    for name in names:
        try:
            with open(Path(folder, name)) as fh:
                data = json.load(fh)
            if data["device"] != device or data["host"] != host:
                continue
            variance, df = float(data["variance"]), int(data["df"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if df > 0 and math.isfinite(variance) and variance >= 0:
            variances.append(variance)
            dfs.append(df)
    if len(variances) < RUN_SD_CELLS:
        return None
    return RunSd(typical_sd(variances, dfs), len(variances))
