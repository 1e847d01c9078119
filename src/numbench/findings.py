"""What the summary says, decided as data: typed facts, no sentences.

``decide(benchmarks, speedups, crossovers, baseline_library, baseline_device)`` reads the three
tables and returns ``Findings``: the fastest library per operation at its smallest and largest
size (a ``Winner``, a ``Tie`` within noise, or ``NotMeasured``), the largest significant
speedups and slowdowns over the baseline, one ``Crossover`` per group with its kind, the
warnings (``NoisyCell``, ``UnmeasuredCell``, ``NoBaseline``, ``UnstableCell``, ``BusyCell``,
``DoubtfulVerdict``), the ``Firmness`` of the verdicts and the ``GpuNotice``. The
renderer (``numbench.summary``) turns them into Markdown; nothing here is worded.

The baseline is always given: the tables are checked against it, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import pandas as pd

from numbench.crossovers import GROUP_COLUMNS
from numbench.formatting import missing
from numbench.gpu_report import GpuNotice, gpu_notice
from numbench.speedups import check_baseline, in_doubt
from numbench.stats import FASTER, SAME, SLOWER

NOISY_IQR_FRACTION = 0.10
#: a cell is said to have been measured on a busy machine when other programs took more than
#: this share of a kept process's CPUs (the default ``replicates.max_cpu_taken``: past it, a
#: round is measured again, up to twice, and kept busy only when it stays busy)
BUSY_CPU_TAKEN = 0.10
TOP_SPEEDUPS = 5
TOP_SLOWDOWNS = 3

CrossoverKind = Literal["crosses", "always_faster", "crosses_back", "never_faster", "insufficient"]
#: the order in which crossovers are told: clear claims first
KIND_ORDER: tuple[CrossoverKind, ...] = get_args(CrossoverKind)


# -- the fastest library per operation ----------------------------------------------------------
@dataclass(frozen=True)
class Timed:
    library: str
    device: str
    median_s: float


@dataclass(frozen=True)
class Winner:
    """The fastest ok cell of ``operation`` at ``size``, clear of the others' noise.
    ``runner_up`` is None when it was the only ok cell there; ``lead`` is the runner-up's
    median over the winner's."""

    operation: str
    size: int
    fastest: Timed
    runner_up: Timed | None = None
    lead: float | None = None
    #: the dtype and threads compared, on a grid of several ("float32, 2 threads"), else ""
    setting: str = ""


@dataclass(frozen=True)
class Tie:
    """The fastest ok cell, and the others whose CI of the median reaches the fastest's."""

    operation: str
    size: int
    fastest: Timed
    within_noise: tuple[Timed, ...]
    setting: str = ""


@dataclass(frozen=True)
class NotMeasured:
    """No ok cell of ``operation`` at ``size``."""

    operation: str
    size: int
    setting: str = ""


Fastest = Winner | Tie | NotMeasured


# -- speedups over the baseline -----------------------------------------------------------------
@dataclass(frozen=True)
class SpeedupFact:
    library: str
    device: str
    operation: str
    size: int
    speedup: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class LargestSpeedup(SpeedupFact):
    """One of the largest speedups whose CI lies wholly above 1."""


@dataclass(frozen=True)
class LargestSlowdown(SpeedupFact):
    """One of the largest slowdowns: a speedup whose CI lies wholly below 1."""


# -- crossovers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpeedupPoint:
    size: int
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str  # faster / same / slower (numbench.stats.verdict)


@dataclass(frozen=True)
class Crossover:
    """One row of crossovers.parquet with its group's speedup curve (``points``, by size; empty
    when no speedup could be computed). The sizes are None unless ``kind`` is 'crosses'."""

    library: str
    device: str
    operation: str
    dtype: str
    threads: int
    host: str
    kind: CrossoverKind
    points: tuple[SpeedupPoint, ...]
    crossover_size: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    below_size: int | None = None
    above_size: int | None = None
    #: every size's verdict settled (crossovers.parquet ``settled``); None when not known
    settled: bool | None = None

    @property
    def last(self) -> SpeedupPoint:
        return self.points[-1]

    @property
    def best(self) -> SpeedupPoint:
        """The largest speedup (the first, at equal speedups)."""
        return max(self.points, key=lambda p: p.speedup)

    @property
    def tied(self) -> tuple[int, ...]:
        """Sizes at the same speed (the CI holds 1, or the speedup is within the margin)."""
        return tuple(p.size for p in self.points if p.verdict == SAME)

    @property
    def faster(self) -> tuple[int, ...]:
        """Sizes where the library is faster (CI above 1, speedup beyond the margin)."""
        return tuple(p.size for p in self.points if p.verdict == FASTER)

    @property
    def slower(self) -> tuple[int, ...]:
        """Sizes where the library is slower (CI below 1, beyond the margin)."""
        return tuple(p.size for p in self.points if p.verdict == SLOWER)

    @property
    def back_size(self) -> int | None:
        """For 'crosses_back': the first slower size after the first faster one."""
        later = [s for s in self.slower if self.faster and s > min(self.faster)]
        return min(later) if later else None


# -- warnings -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoisyCell:
    """An ok cell whose IQR is above NOISY_IQR_FRACTION of its median."""

    library: str
    device: str
    operation: str
    size: int
    iqr_s: float
    median_s: float


@dataclass(frozen=True)
class UnmeasuredCell:
    """A cell without a usable measurement, with its status and the reason recorded (if any)."""

    status: str
    library: str
    device: str
    operation: str
    size: int
    reason: str | None


@dataclass(frozen=True)
class NoBaseline:
    """An ok cell with no speedup: its baseline cell was not measured."""

    library: str
    device: str
    operation: str
    size: int


@dataclass(frozen=True)
class UnstableCell:
    """An ok cell whose processes disagree far beyond their own noise (stats.is_unstable)."""

    library: str
    device: str
    operation: str
    size: int
    process_spread: float
    process_medians_s: str


@dataclass(frozen=True)
class BusyCell:
    """An ok cell with a kept process whose CPUs other programs used more than
    BUSY_CPU_TAKEN of while it measured (``cpu_taken``, ``numbench.cpu_taken``)."""

    library: str
    device: str
    operation: str
    size: int
    cpu_taken: float
    set_aside: int


@dataclass(frozen=True)
class DoubtfulVerdict(SpeedupFact):
    """A speedup whose interval holds the margin or 1 / margin (``settled`` false): its
    verdict could go the other way in a second run."""

    verdict: str
    margin: float


CellWarning = NoisyCell | UnmeasuredCell | NoBaseline | UnstableCell | BusyCell | DoubtfulVerdict


@dataclass(frozen=True)
class Firmness:
    """How many of the run's verdicts should hold on a rerun: ``verdicts`` speedups with a
    verdict, ``settled`` of them settled, and ``expected`` the sum of their chances to repeat
    (``repeat_chance``; None for speedups from before the column)."""

    verdicts: int
    settled: int
    expected: float | None


def firmness(speedups: pd.DataFrame) -> Firmness | None:
    """The run's ``Firmness``; None without a speedup, or from before ``settled``."""
    measured = speedups[speedups["speedup"].notna()]
    if measured.empty or "settled" not in measured:
        return None
    chance = measured["repeat_chance"] if "repeat_chance" in measured else None
    expected = None if chance is None or chance.isna().any() else float(chance.sum())
    return Firmness(len(measured), int((~in_doubt(measured)).sum()), expected)


# -- all of it ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Findings:
    baseline_library: str
    baseline_device: str
    margin: float  # a ratio within this factor of 1 is the same speed
    multi_device: bool  # ok cells on more than one device: prose must name the device
    gpu_notice: GpuNotice | None
    fastest: tuple[Fastest, ...]  # per operation (sorted), at its smallest and largest size
    speedups: tuple[LargestSpeedup, ...]  # largest first
    slowdowns: tuple[LargestSlowdown, ...]  # largest (smallest speedup) first
    crossovers: tuple[Crossover, ...]  # in KIND_ORDER, then by operation and library
    warnings: tuple[CellWarning, ...]  # noisy cells, then unmeasured cells, then no baseline
    firmness: Firmness | None = None  # how many verdicts should hold on a rerun


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


def settings(bench: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The grid split by (dtype, threads), each part named ("float32, 2 threads"); one
    unnamed part when the grid has one of each. Libraries are only compared like with like."""
    dims = [c for c in ("dtype", "threads") if c in bench and bench[c].nunique() > 1]
    if not dims:
        return [("", bench)]
    parts = []
    for key, part in bench.groupby(dims, sort=True):
        values = key if isinstance(key, tuple) else (key,)
        words = [
            str(v) if d == "dtype" else f"{int(v)} thread" + ("" if int(v) == 1 else "s")
            for d, v in zip(dims, values, strict=True)
        ]
        parts.append((", ".join(words), part))
    return parts


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
    for r in noisy.sort_values(["operation", "size", "library"]).itertuples():
        out.append(NoisyCell(r.library, r.device, r.operation, int(r.size), r.iqr_s, r.median_s))
    unstable = ok[ok["unstable"].fillna(False).astype(bool)]
    for r in unstable.sort_values(["operation", "size", "library"]).itertuples():
        cell = (r.library, r.device, r.operation, int(r.size))
        out.append(UnstableCell(*cell, r.process_spread, r.process_medians_s))
    if "cpu_taken" in ok:  # results from before the column have nothing to say
        busy = ok[ok["cpu_taken"].fillna(0) > BUSY_CPU_TAKEN]
        for r in busy.sort_values(["operation", "size", "library"]).itertuples():
            cell = (r.library, r.device, r.operation, int(r.size))
            set_aside = 0 if missing(r.set_aside) else int(r.set_aside)
            out.append(BusyCell(*cell, float(r.cpu_taken), set_aside))
    doubtful = speedups[speedups["speedup"].notna() & in_doubt(speedups)]
    for r in doubtful.sort_values(["operation", "size", "library"]).itertuples():
        cell = (r.library, r.device, r.operation, int(r.size))
        values = (r.speedup, r.speedup_ci_low, r.speedup_ci_high, r.verdict, r.margin)
        out.append(DoubtfulVerdict(*cell, *values))
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
) -> Findings:
    """The findings of the three tables, against the baseline they were computed for; a
    ratio within ``margin`` of 1 is the same speed."""
    check_baseline(baseline_library, baseline_device, speedups, crossovers)
    return Findings(
        baseline_library=baseline_library,
        baseline_device=baseline_device,
        margin=margin,
        multi_device=measured_on_several_devices(bench),
        gpu_notice=gpu_notice(bench, baseline_library, baseline_device),
        fastest=fastest(bench, margin),
        speedups=largest_speedups(speedups),
        slowdowns=largest_slowdowns(speedups),
        crossovers=crossover_facts(crossovers, speedups),
        warnings=warnings(bench, speedups),
        firmness=firmness(speedups),
    )
