"""The facts the summary tells, as typed data, no sentences: ``numbench.analyse.findings``
decides them, ``numbench.contract.conclusions`` writes them to results/findings.parquet and back,
``numbench.report`` words them. On the ground floor, so neither stage imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from numbench.machine.contract import CappedCell, MachineQuality, RunTime  # noqa: F401

# the roofline's facts live beside its notes; here they are facts like the others
from numbench.roofline.contract import LOW_DRAM_SHARE, FirstTouch, RoofFinding  # noqa: F401
from numbench.stats import FASTER, SAME, SLOWER

NOISY_IQR_FRACTION = 0.10
#: a cell is said to have been measured on a busy machine when other programs took more than
#: this share of a kept process's CPUs (the default ``replicates.max_cpu_taken``: past it, a
#: round is measured again, up to twice, and kept busy only when it stays busy; it is not
#: measured again, kept as measured, when a half-second look finds the others still busy)
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
    BUSY_CPU_TAKEN of while it measured (``cpu_taken``, ``numbench.measure.cpu_taken``)."""

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


CellWarning = (
    NoisyCell | UnmeasuredCell | NoBaseline | UnstableCell | BusyCell | DoubtfulVerdict | CappedCell
)


@dataclass(frozen=True)
class Firmness:
    """How many of the run's verdicts should hold on a rerun: ``verdicts`` speedups with a
    verdict, ``settled`` of them settled, and ``expected`` the sum of their chances to repeat
    (``repeat_chance``; None for speedups from before the column). ``short``: of the paired
    verdicts in doubt, those whose cell stopped before its ``replicates.max`` rounds, uncapped:
    the stopping rule found that ``max`` rounds could not settle them (None where the cells
    do not say)."""

    verdicts: int
    settled: int
    expected: float | None
    short: int | None = None


# -- GPU cells that could not run ---------------------------------------------------------------
#: longest reason quoted in a GPU notice; the full text stays in benchmarks.parquet
MAX_REASON_CHARS = 240


@dataclass(frozen=True)
class SkippedGpuCells:
    """Unavailable GPU cells of one library for one (cleaned) reason."""

    library: str
    reason: str
    count: int
    sizes: tuple[tuple[str, tuple[int, ...]], ...]  # (operation, its sizes), by operation


@dataclass(frozen=True)
class GpuNotice:
    """GPU cells were asked for and some could not run. ``none_found``: every one was
    unavailable (no GPU on the host); otherwise some ran and ``skipped`` lists the gaps.
    ``cpu_baseline`` names the baseline library when it is among the CPU cells."""

    none_found: bool
    gpu_cells: int
    skipped: tuple[SkippedGpuCells, ...]
    skipped_cells: int
    hosts: tuple[str, ...]
    cpu_cells: int
    cpu_baseline: str | None = None


# -- the dtype and threads dimensions -----------------------------------------------------------
@dataclass(frozen=True)
class PrecisionGap:
    """Per operation, float32 against float64 at the largest size where they clearly differ
    (precision.parquet's row; ``ratio`` is float32 time / float64 time)."""

    operation: str
    library: str
    size: int
    threads: int
    ratio: float


@dataclass(frozen=True)
class ScalingGap:
    """Per operation, the most threads against 1 at the largest size where they clearly
    differ (scaling.parquet's row; ``speedup`` is the time at 1 thread over the time at
    ``threads``)."""

    operation: str
    library: str
    size: int
    threads: int
    dtype: str
    speedup: float
    efficiency: float


# -- queued calls against waited-for calls -------------------------------------------------------
@dataclass(frozen=True)
class PipelineGap:
    """Where a library's queued calls differ from its waited-for calls beyond the margin."""

    library: str
    device: str
    #: the dtype and threads of these cells, on a grid of several ("float32, 2 threads")
    setting: str
    #: faster (queued calls take less time per call) or slower
    direction: str
    cells: int
    of_cells: int
    #: the cell with the largest difference: operation, size, speedup and its CI
    operation: str
    size: int
    speedup: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class QueuedSameSpeed:
    """A library timed both ways, its queued calls within the margin in every cell."""

    library: str
    device: str


@dataclass(frozen=True)
class Synchronous:
    """A library whose calls finish before they return: latency and throughput are one."""

    library: str
    device: str


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
    #: float32 against float64 per operation; None when the grid has one dtype
    precision: tuple[PrecisionGap, ...] | None = None
    #: the most threads against 1 per operation; None when the grid has one thread count
    scaling: tuple[ScalingGap, ...] | None = None
    #: queued calls against waited-for calls (asynchronous libraries only)
    pipeline_gaps: tuple[PipelineGap, ...] = ()
    queued_same_speed: tuple[QueuedSameSpeed, ...] = ()
    #: synchronous libraries, told only where an asynchronous one was timed both ways
    synchronous: tuple[Synchronous, ...] = ()
    #: per (host, device, dtype, threads) and operation, sorted so
    roofline: tuple[RoofFinding, ...] = ()
    #: how quiet the machine was while the cells measured: the summary's first line
    machine: MachineQuality | None = None
    #: how long the cells took and where the time went
    run_time: RunTime | None = None
