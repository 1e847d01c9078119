"""The grid: every cell a validated config asks for, the spec each one runs from, the seeded
order the rules follow, and what the workflow's jobs ask of the scheduler, worked out from
the resolved config and its grid: the roofs job's dimensions, CPUs and GPUs, the wall time of
a cell and of an early round, how long a timing job waits for the host's timing lock, and
the priorities that order the jobs.

The workflow (``workflow/rules/common.smk``) calls ``job_plan`` once and hands its fields to
the rules under the names they use, so that the arithmetic is written here once, in plain
functions that are tested without Snakemake.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from numbench import inputs_file, libraries, operations
from numbench.cells import Cell, inputs_path, roof_dims, roof_libraries
from numbench.config.dims import adapter_of, cell_options
from numbench.config.environments import environment
from numbench.config.operations import (
    operation_found,
    operation_inputs_from,
    operation_params,
    operation_seed,
)
from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
from numbench.timing import TimingSettings

DEVICES = ("cpu", "gpu")


def job_order(cfg: dict, cells: list[Cell]) -> dict[str, int]:
    """A seeded random rank (0 .. len - 1) for every cell, by its path.

    The rules' priorities follow it within each stage (early rounds, then cells), so the
    grid runs interleaved (operations and libraries mixed, as Google Benchmark's random
    interleaving does) and a slow period of the machine spreads over many groups instead of
    landing on one; the seed keeps a rerun's order.
    """
    paths = sorted(cell.path for cell in cells)
    random.Random(cfg["seed"]).shuffle(paths)
    return {path: rank for rank, path in enumerate(paths)}


def operation_file(cfg: dict, name: str) -> str | None:
    """The user's file of an operation (its absolute path), or None where it is found by
    name (built in, or installed)."""
    return (cfg["operations"][name] or {}).get("module")


def operation_hash(cfg: dict, name: str) -> str:
    """The hash of an operation's code (``numbench.operations.loading``)."""
    return operation_found(cfg, name).sha256


def operation_params_json(cfg: dict, name: str) -> str:
    """The same, as the canonical JSON text the rules pass on ("" when it has none)."""
    return operations.params_json(operation_params(cfg, name))


def cell_spec(cfg: dict, cell: Cell) -> CellSpec:
    """The one spec a cell's supervisor and workers run from, built from the validated config."""
    reps, base = cfg["replicates"], cfg["baseline"]
    is_baseline = (cell.library, cell.device) == (base["library"], base["device"])
    # a cell of an environment is paired with its library in the base environment
    partner = f"{cell.library}/{cell.device}" if cell.environment else None
    from_file = operation_inputs_from(cfg, cell.operation)
    if partner is None and not is_baseline:
        partner = f"{base['library']}/{base['device']}"
    return CellSpec(
        library=cell.library,
        device=cell.device,
        operation=cell.operation,
        operation_file=operation_file(cfg, cell.operation),
        operation_hash=operation_hash(cfg, cell.operation),
        size=cell.size,
        dtype=cell.dtype,
        threads=int(cell.threads),
        inputs=inputs_path(cell.operation, cell.size),
        params=operation_params(cfg, cell.operation),
        seed=None if from_file else operation_seed(cfg, cell.operation),
        inputs_from=from_file and str(inputs_file.file_for(from_file, cell.size)),
        adapter=None
        if adapter_of(cfg, cell.library) == cell.library
        else adapter_of(cfg, cell.library),
        options=cell_options(cfg, cell.operation, cell.library),
        paired_options=cell_options(cfg, cell.operation, base["library"])
        if partner is not None and not cell.environment
        else {},
        timing=TimingSettings(**cfg["timing"]),
        timeout_s=float(cfg["cell_timeout_s"]),
        memory_limit_mb=cfg["cell_memory_limit_mb"],
        allocator=cfg["allocator"],
        worker_start=cfg["worker_start"],
        compile_cache=cfg["compile_cache"],
        replicates=ReplicateSettings(
            min=reps["min"],
            max=reps["max"],
            target_ci=float(reps["target_ci"]),
            stop_margin=float(reps["stop_margin"]),
            early_rounds=reps["early_rounds"],
            round_sd=float(reps["round_sd"]),
            max_cpu_taken=None if reps["max_cpu_taken"] is None else float(reps["max_cpu_taken"]),
            lockstep=bool(reps["lockstep"]),
            max_cell_s=None if reps["max_cell_s"] is None else float(reps["max_cell_s"]),
        ),
        paired_with=partner if reps["paired"] else None,
        contract=CELL_CONTRACT,
        environment=environment(cfg, cell.environment) if cell.environment else None,
    )


def devices_for(cfg: dict) -> tuple[str, ...]:
    return DEVICES if cfg["device"] == "all" else (cfg["device"],)


def grid(cfg: dict) -> list[Cell]:
    """Every (library, device, operation, size, dtype, threads) cell of the config, plus the baseline cells.

    A library is placed only on the devices it can run on (NumPy has no GPU cells); the
    baseline library's cells on the baseline device are always included, so ``device=gpu``
    still gives speedups against NumPy on the CPU of the same host.

    Each of the config's ``environments`` adds its libraries' cells again, on the same
    devices, in that environment (``numbench.config.environments``).
    """
    wanted, base = devices_for(cfg), cfg["baseline"]
    placed = {(base["library"], base["device"], "")}
    for lib in cfg["libraries"]:
        devices = libraries.get(adapter_of(cfg, lib)).devices
        placed.update((lib, dev, "") for dev in wanted if dev in devices)
    for name, entry in cfg.get("environments", {}).items():
        own = set(entry["libraries"])
        placed.update((lib, dev, name) for lib, dev, env in list(placed) if not env and lib in own)
    return sorted(
        Cell(lib, dev, op, int(s), dt, th, env)
        for lib, dev, env in placed
        for op, entry in cfg["operations"].items()
        for s in entry["sizes"]
        for dt in cfg["dtype"]
        for th in cfg["threads"]
    )


def input_files(cfg: dict) -> list[str]:
    return sorted({inputs_path(op, s) for op, e in cfg["operations"].items() for s in e["sizes"]})


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

    def stage_order(self, cells: Iterable[Cell]) -> list[Cell]:
        """``cells`` in the order each stage (every cell's round 0, round 1, ..., their own
        jobs) runs them: the highest priority first. ``offsite run`` measures a plan in this
        order too (``numbench.offsite.plan.make_plan``), so a grid is measured in one order
        wherever it runs."""
        return sorted(cells, key=self.cell_priority, reverse=True)


@dataclass(frozen=True)
class JobPlan:
    """Everything the rules ask the scheduler for that is worked out from the config."""

    roof_dims: list[RoofDim]
    #: each device's libraries, whose GEMMs may set its compute roof (``roof_libraries``)
    roof_libraries: dict[str, list[str]]
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
        roof_libraries=roof_libraries(cells),
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
