"""What the workflow's jobs ask of the scheduler, worked out from the resolved config and
its grid: the roofs job's dimensions, CPUs and GPUs, the wall time of a cell and of a spread
round, how long a timing job waits for the host's timing lock, and the priorities that order
the jobs.

The workflow (``workflow/rules/common.smk``) calls ``job_plan`` once and hands its fields to
the rules under the names they use, so that the arithmetic is written here once, in plain
functions that are tested without Snakemake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from numbench.cells import Cell, roof_dims
from numbench.config.grid import job_order

#: Minutes added to a job's worker timeouts for its start-up, the supervisor and the wait
#: for the host's timing lock, so that a worker that runs into its own timeout is stopped by
#: numbench (and its cell says so) before Slurm kills the job.
RUNTIME_MARGIN_MIN = 5

#: one (device, dtype, threads) of the grid: the roofs are measured once for each
RoofDim = tuple[str, str, int]


def roof_threads(dims: list[RoofDim]) -> int:
    """The CPUs the roofs job asks for: the most threads of its dimensions."""
    return max((threads for _, _, threads in dims), default=1)


def roof_gpus(dims: list[RoofDim]) -> int:
    """The GPUs the roofs job asks for: one where the grid has a gpu dimension."""
    return 1 if any(device == "gpu" for device, _, _ in dims) else 0


def cpu_taken_option(cfg: dict) -> str:
    """``--max-cpu-taken X`` for the roofs script (empty when ``replicates.max_cpu_taken`` is
    null): a roof disturbed by other programs is measured again, as a cell's round is."""
    limit = cfg["replicates"]["max_cpu_taken"]
    return "" if limit is None else f"--max-cpu-taken {limit}"


def lock_timeout_s(cfg: dict) -> int:
    """How long a timing job waits for the host's timing lock, in whole seconds: it is passed
    as a resource, which Snakemake wants whole."""
    return math.ceil(cfg["lock_timeout_s"])


def quiet_wait_s(cfg: dict) -> int:
    """The longest a timing job waits for quiet (``wait_for_quiet.max_wait_s``), in whole
    seconds: a resource, as ``lock_timeout_s`` is, so that changing it remeasures nothing."""
    return math.ceil(cfg["wait_for_quiet"]["max_wait_s"])


def quiet_below(cfg: dict) -> str:
    """The others' share a timing job waits for (``wait_for_quiet.below``), as the text of
    a resource (Snakemake's resources are whole numbers or text)."""
    return f"{float(cfg['wait_for_quiet']['below']):g}"


def round_processes(cfg: dict) -> int:
    """Worker processes of one round: the cell's own and, paired, a baseline process."""
    return 2 if cfg["replicates"]["paired"] else 1


def cell_max_processes(cfg: dict) -> int:
    """The most worker processes a cell's job may run: ``replicates.max`` rounds."""
    return cfg["replicates"]["max"] * round_processes(cfg)


def runtime_min(processes: int, timeout_s: float) -> int:
    """Wall time, in whole minutes as Slurm's ``--time`` wants them, of a job that runs
    ``processes`` workers one after another, each of which may take up to ``timeout_s``."""
    return math.ceil(processes * timeout_s / 60) + RUNTIME_MARGIN_MIN


def cell_runtime_min(cfg: dict) -> int:
    """The wall time a cell's job asks for (resource ``runtime``), its wait for quiet
    included."""
    wait_min = math.ceil(quiet_wait_s(cfg) / 60)
    return runtime_min(cell_max_processes(cfg), cfg["cell_timeout_s"]) + wait_min


def round_runtime_min(cfg: dict) -> int:
    """The wall time an early round's job asks for: one round's processes, and its wait."""
    wait_min = math.ceil(quiet_wait_s(cfg) / 60)
    return runtime_min(round_processes(cfg), cfg["cell_timeout_s"]) + wait_min


@dataclass(frozen=True)
class JobOrder:
    """The priorities that order the ready jobs (Snakemake runs the highest first).

    Every inputs file (and the roofs) first, then the early rounds (round 0 of every cell,
    then round 1, ...), then the cells' own jobs, and within each stage the seeded random
    order of ``job_order``. So a cell's rounds lie minutes apart, and a slow period of the
    machine spreads over the grid (``numbench.measure.replicates``). The order is a
    preference, not a dependency: a cell named on its own runs its rounds back to back, and
    every round is valid whenever it runs.
    """

    #: each cell's place (0 .. stage - 1) by its path
    rank: dict[str, int] = field(repr=False)
    #: ``replicates.early_rounds``: the rounds each cell measures in jobs of their own
    early_rounds: int
    #: the width of one stage: the number of cells
    stage: int

    @classmethod
    def of(cls, cfg: dict, cells: list[Cell]) -> JobOrder:
        return cls(job_order(cfg, cells), cfg["replicates"]["early_rounds"], len(cells))

    @property
    def inputs_priority(self) -> int:
        """An inputs job's (and the roofs job's): above every round and every cell."""
        return (self.early_rounds + 1) * self.stage

    def cell_priority(self, cell: Cell) -> int:
        """A cell's own job: after every early round, in the seeded order."""
        return self.rank.get(cell.path, 0)

    def round_priority(self, cell: Cell, round_: int) -> int:
        """Early round ``round_`` of ``cell``: after every round before it, before every
        cell's own job."""
        return (self.early_rounds - round_) * self.stage + self.cell_priority(cell)


@dataclass(frozen=True)
class JobPlan:
    """Everything the rules ask the scheduler for that is worked out from the config."""

    roof_dims: list[RoofDim]
    roof_threads: int
    roof_gpus: int
    roof_cpu_taken_option: str
    lock_timeout_s: int
    quiet_wait_s: int
    quiet_below: str
    cell_runtime_min: int
    round_runtime_min: int
    order: JobOrder


def job_plan(cfg: dict, cells: list[Cell]) -> JobPlan:
    """The plan of the resolved config ``cfg`` and its grid ``cells``."""
    dims = roof_dims(cells)
    return JobPlan(
        roof_dims=dims,
        roof_threads=roof_threads(dims),
        roof_gpus=roof_gpus(dims),
        roof_cpu_taken_option=cpu_taken_option(cfg),
        lock_timeout_s=lock_timeout_s(cfg),
        quiet_wait_s=quiet_wait_s(cfg),
        quiet_below=quiet_below(cfg),
        cell_runtime_min=cell_runtime_min(cfg),
        round_runtime_min=round_runtime_min(cfg),
        order=JobOrder.of(cfg, cells),
    )
