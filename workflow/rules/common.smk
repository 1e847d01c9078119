# Grid expansion, validated config and the paths rules share. No rule lives here.
import json
import math
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from numbench import cells  # noqa: E402
from numbench.cells import Cell  # noqa: E402
from numbench.config import (  # noqa: E402
    ConfigError,
    built_environments,
    cell_spec,
    grid,
    input_files,
    job_order,
    operation_file,
    operation_hash,
    operation_params_json,
    resolve,
    snakemake_runs_cells_here,
)
from numbench.config import environments  # noqa: E402
from numbench.measure.snakemake_timers import limit_reevaluation_timers  # noqa: E402

# One pending wake-up timer in Snakemake's scheduler instead of a chain per finished job,
# which made the main process spin a CPU beside the cell being timed.
try:
    limit_reevaluation_timers()
except RuntimeError as exc:
    raise WorkflowError(str(exc)) from None

SCHEMA = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
try:
    CFG = resolve(
        config,
        SCHEMA,
        workflow.overwrite_configfiles,
        cells_run_here=snakemake_runs_cells_here(workflow),
        workflow_dir=workflow.basedir,
    )
except ConfigError as exc:
    raise WorkflowError(f"config error: {exc}") from None

GRID = grid(CFG)
# The base environment's cells feed benchmarks.parquet and everything after it; the cells of
# the config's environments (LIBRARY@NAME) feed results/versions.parquet alone.
CELL_FILES = [cell.path for cell in GRID if not cell.environment]
ENV_CELL_FILES = [cell.path for cell in GRID if cell.environment]
BUILT_ENVIRONMENTS = built_environments(CFG)
VERSIONS_FILE = "results/versions.parquet"
# What the summary and the charts read of the environments: nothing without them.
VERSIONS_INPUT = [VERSIONS_FILE] if ENV_CELL_FILES else []
INPUT_FILES = input_files(CFG)
SCRIPTS = Path(workflow.basedir) / "scripts"
BASELINE = CFG["baseline"]
CHARTS_DIR = "results/charts"
# The roofs: measured once per (device, dtype, threads) of the grid (numbench.measure.roofs),
# on as many CPUs as its most threads, with a GPU where the grid has one.
ROOFS_FILE = "results/roofs.parquet"
ROOF_DIMS = sorted({(cell.device, cell.dtype, int(cell.threads)) for cell in GRID})
ROOF_THREADS = max(threads for _, _, threads in ROOF_DIMS)
ROOF_GPUS = 1 if any(device == "gpu" for device, _, _ in ROOF_DIMS) else 0
# A roof disturbed by other programs is measured again, as a cell's round is.
MAX_CPU_TAKEN = CFG["replicates"]["max_cpu_taken"]
ROOF_CPU_TAKEN_ARG = "" if MAX_CPU_TAKEN is None else f"--max-cpu-taken {MAX_CPU_TAKEN}"
# How long a timing job waits for the host's timing lock, in whole seconds (a resource).
LOCK_TIMEOUT_S = math.ceil(CFG["lock_timeout_s"])

# Scheduler resources of a cell (used by the slurm profile; harmless on one machine).
# Wall time: the worker's own timeout plus a margin for start-up, the supervisor and the
# host lock, in whole minutes as Slurm's --time wants them.
CELL_RUNTIME_MARGIN_MIN = 5
# A cell runs up to replicates.max processes of its own, and as many baseline processes when
# paired; each may take up to cell_timeout_s.
CELL_MAX_PROCESSES = CFG["replicates"]["max"] * (
    2 if CFG["replicates"]["paired"] else 1
)
CELL_RUNTIME_MIN = (
    math.ceil(CELL_MAX_PROCESSES * CFG["cell_timeout_s"] / 60) + CELL_RUNTIME_MARGIN_MIN
)
# A spread round runs one process of its own and, paired, one baseline process.
ROUND_RUNTIME_MIN = (
    math.ceil(
        CELL_MAX_PROCESSES / CFG["replicates"]["max"] * CFG["cell_timeout_s"] / 60
    )
    + CELL_RUNTIME_MARGIN_MIN
)


# Job order. Snakemake runs ready jobs by priority: every inputs file first, then the spread
# rounds (round 0 of every cell, then round 1, ...), then the cells' own jobs, and within each
# stage the seeded random order of job_order. So a cell's rounds lie minutes apart, and a slow
# period of the machine spreads over the grid (numbench.measure.replicates). The order is a
# preference, not a dependency: a cell named on its own runs its rounds back to back, and
# every round is valid whenever it runs.
SPREAD = CFG["replicates"]["spread"]
RANK = job_order(CFG, GRID)
STAGE = len(GRID)
INPUTS_PRIORITY = (SPREAD + 1) * STAGE


def wildcards_cell(wildcards):
    return Cell.from_fields(wildcards)


def cell_priority(wildcards):
    """A cell's job: after every spread round, in the seeded order."""
    return RANK.get(wildcards_cell(wildcards).path, 0)


def spread_round_priority(wildcards):
    """Spread round k: after every round before k, before every cell's job."""
    return (SPREAD - int(wildcards.round)) * STAGE + cell_priority(wildcards)


def spread_rounds(wildcards):
    """The cell's spread rounds, which its job continues from."""
    cell = wildcards_cell(wildcards)
    return [cell.round_path(k) for k in range(SPREAD)]


def environment_ready(wildcards):
    """The made environment a cell of an environment with pins runs in (none otherwise)."""
    name = wildcards_cell(wildcards).environment
    return [environments.ready_file(name)] if name in BUILT_ENVIRONMENTS else []


def environment_pins(wildcards):
    """An environment's pins as JSON: a param, so that changing them makes it again."""
    return json.dumps(CFG["environments"][wildcards.environment]["pins"])


def versions_option(wildcards, input):
    """``--versions FILE`` for the summary and the charts where the config has environments."""
    return f"--versions {input.versions}" if input.versions else ""


def cell_gpus(wildcards):
    """GPUs a cell asks the scheduler for: one for a gpu cell, none otherwise."""
    return 1 if wildcards.device == "gpu" else 0


def cell_threads(wildcards):
    """The cell's thread count: the CPUs it is given (and asks Slurm for)."""
    return int(wildcards.threads)


def cell_inputs(wildcards):
    """The inputs file a cell is measured on."""
    return cells.inputs_path(wildcards.operation, wildcards.size)


def cell_spec_json(wildcards):
    """The cell's whole spec (numbench.spec.CellSpec) as JSON: the one thing the rule passes."""
    return cell_spec(CFG, wildcards_cell(wildcards)).to_json()


def op_params(wildcards):
    """The operation's parameters as JSON ("" when it has none), for rules inputs and cell."""
    return operation_params_json(CFG, wildcards.operation)


def op_file(wildcards):
    """The user's file of the operation ("" for one found by name), for rule inputs."""
    return operation_file(CFG, wildcards.operation) or ""


def op_hash(wildcards):
    """The hash of the operation's code: a param, so that editing the code remakes the
    operation's inputs (its cells carry it in their spec)."""
    return operation_hash(CFG, wildcards.operation)


wildcard_constraints:
    **cells.FIELD_PATTERNS,
    environment=cells.ENVIRONMENT_PATTERN,
