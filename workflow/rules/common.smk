# Grid expansion, validated config and the paths rules share. No rule lives here; what the
# rules ask of the scheduler is worked out in the package (numbench.config.grid).
import glob
import json
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# numbench's own files (schema, scripts, package) lie beside this file, wherever the
# Snakefile that includes it is: in a module of another workflow, workflow.basedir is that
# workflow's folder. Results and logs go under the working directory, as always.
_HERE = workflow.current_basedir
if not _HERE.is_local:
    raise WorkflowError(
        f"numbench runs from a local copy of its repository, not from {_HERE}: clone it "
        "and name its Snakefile by path (module numbench: snakefile: PATH/Snakefile)"
    )
NUMBENCH_DIR = Path(_HERE.get_path_or_uri(secret_free=True)).resolve().parents[1]
sys.path.insert(0, str(NUMBENCH_DIR / "src"))

from numbench import cells  # noqa: E402
from numbench.cells import Cell  # noqa: E402
from numbench.config import (  # noqa: E402
    ConfigError,
    built_environments,
    cell_spec,
    grid,
    input_files,
    job_plan,
    operation_file,
    operation_hash,
    operation_params_json,
    operation_inputs_from,
    operation_seed,
    resolve,
    snakemake_runs_cells_here,
)
from numbench.config import environments  # noqa: E402
from numbench.measure.compile_cache import clear as clear_compile_caches  # noqa: E402
from numbench.measure.zygote import stop_all as stop_zygotes  # noqa: E402
from numbench.roofline.contract import ROOFS_VERSION  # noqa: E402

SCHEMA = NUMBENCH_DIR / "workflow" / "schemas" / "config.schema.yaml"
try:
    CFG = resolve(
        config,
        SCHEMA,
        workflow.overwrite_configfiles,
        cells_run_here=snakemake_runs_cells_here(workflow),
        # a user's operation file (operations.NAME.module) lies beside the Snakefile run
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
SCRIPTS = NUMBENCH_DIR / "scripts"
BASELINE = CFG["baseline"]
CHARTS_DIR = "results/charts"
# The history store beside results/ (numbench.history): the finished run is added to it
# unless history.add is false; results/history.json says which runs were added.
HISTORY = CFG["history"]
HISTORY_FILE = "results/history.json"
HISTORY_INPUT = [HISTORY_FILE] if HISTORY["add"] else []
# the results site, built by the site rule (a target of its own) once the run is added
SITE_INDEX = str(Path(HISTORY["site"]) / "index.html")


def site_store(wildcards):
    """The store the site rule reads whole; not one of its files, and a function because
    its name may begin the site's (history, history-site)."""
    return HISTORY["folder"]


def site_runs(wildcards):
    """The store's run files: a run added any way (rule history, numbench history add, another
    host's add to a shared store, an imported offsite run) is a new input, and rebuilds the
    site. Read when the jobs are planned: a run rule history adds in the same invocation is
    covered by results/history.json (HISTORY_INPUT)."""
    runs = glob.escape(str(Path(HISTORY["folder"]) / "runs"))
    return sorted(glob.glob(os.path.join(runs, "*.parquet")))


def site_folder(wildcards, output):
    return str(Path(output[0]).parent)


# What the rules ask of the scheduler (numbench.config.grid): the roofs job's dimensions,
# CPUs and GPUs, the timing lock's wait, the wall times a cell and an early round ask Slurm
# for, and the priorities that put every inputs job first, then the early rounds, then the
# cells' own jobs, each stage in a seeded random order.
PLAN = job_plan(CFG, GRID)
ROOFS_FILE = "results/roofs.parquet"
# What the analysis reads of the roofs: nothing when the config leaves them out.
ROOFS_INPUT = [ROOFS_FILE] if CFG["roofs"] else []
# Measured again after every cell (roofs_at_end): the start's rows go to a file of their
# own, which rule roofs_at_end reads and keeps ahead of its own in ROOFS_FILE.
ROOFS_AT_END = CFG["roofs"] and CFG["roofs_at_end"]
ROOFS_START_FILE = "results/roofs_start.parquet" if ROOFS_AT_END else ROOFS_FILE
ROOF_DIMS = PLAN.roof_dims
ROOF_LIBRARIES = PLAN.roof_libraries
ROOF_THREADS = PLAN.roof_threads
ROOF_GPUS = PLAN.roof_gpus
ROOF_CPU_TAKEN_ARG = PLAN.roof_cpu_taken_option
LOCK_TIMEOUT_S = PLAN.lock_timeout_s
QUIET_WAIT_S = PLAN.quiet_wait_s
QUIET_BELOW = PLAN.quiet_below
CELL_RUNTIME_MIN = PLAN.cell_runtime_min
ROUND_RUNTIME_MIN = PLAN.round_runtime_min
INPUTS_PRIORITY = PLAN.order.inputs_priority


def wildcards_cell(wildcards):
    return Cell.from_fields(wildcards)


def cell_priority(wildcards):
    """A cell's job: after every early round, in the seeded order."""
    return PLAN.order.cell_priority(wildcards_cell(wildcards))


def early_round_priority(wildcards):
    """Early round k: after every round before k, before every cell's job."""
    return PLAN.order.round_priority(wildcards_cell(wildcards), int(wildcards.round))


def early_round_files(wildcards):
    """The cell's early rounds, which its job continues from."""
    cell = wildcards_cell(wildcards)
    return [cell.round_path(k) for k in range(PLAN.order.early_rounds)]


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


def roofs_option(wildcards, input):
    """``--roofs FILE`` for the analysis and the report where the config measures roofs."""
    return f"--roofs {input.roofs}" if input.roofs else ""


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


def op_seed(wildcards):
    """The seed of the operation's inputs (its entry's seed, its own, or the config's)."""
    return operation_seed(CFG, wildcards.operation)


def op_inputs_from(wildcards):
    """The user's file of the operation's inputs ("" where they are drawn), for rule inputs."""
    return operation_inputs_from(CFG, wildcards.operation) or ""


def op_inputs_file(wildcards):
    """That file at the size (none where they are drawn): an input of rule inputs, so that
    an edited file remakes them."""
    pattern = operation_inputs_from(CFG, wildcards.operation)
    return [] if pattern is None else [pattern.replace("{size}", str(wildcards.size))]


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


# What on this machine makes timings less stable (`numbench system`'s short form), in the
# run's log before any job: a run whose timings drift can be read against it.
onstart:
    from snakemake.logging import logger
    from numbench.machine.system import short_form, system_report

    logger.info(short_form(system_report()))
