"""The configuration: normalise what Snakemake hands over, validate it against the JSON
Schema and the registries, and expand it into the grid of cells.

Normalising comes before validating: ``--config`` gives every value as a string
(``libraries=numpy,jax``, ``timing.budget_s=0.1``), YAML reads ``1e6`` as a float and ``1e3``
as text. Each value is turned into what the schema expects, or left as it is for the schema
to refuse with the key named.

Every problem is reported as one ``ConfigError`` that names the key, the bad value and what
is allowed, so the workflow can stop before any job runs with a message and no traceback.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from numbench import libraries
from numbench.config.dims import (
    ConfigError,
    check_dtypes,
    check_memory,
    check_variants,
    known_libraries,
    resolve_threads,
)
from numbench.config.environments import (
    built_environments,
    check_environments,
    normalise_environments,
)
from numbench.config.grid import (
    DEVICES,
    JobOrder,
    JobPlan,
    cell_spec,
    devices_for,
    grid,
    input_files,
    job_order,
    job_plan,
    operation_file,
    operation_hash,
    operation_params,
    operation_params_json,
)
from numbench.config.operations import (
    check_operations,
    module_file,
    operation_found,
    operation_inputs_from,
    operation_seed,
)
from numbench.operations import OPERATIONS  # by name: here operations is config.operations

#: What the workflow, the offsite plan and the tests use of the config: resolve a config,
#: expand it into cells (``grid``) and specs (``cell_spec``), and work out what its jobs ask
#: of the scheduler (``job_plan``).
__all__ = [
    "DEFAULT_CONFIG",
    "DEVICES",
    "ConfigError",
    "JobOrder",
    "JobPlan",
    "built_environments",
    "cell_spec",
    "default_margin",
    "default_sizes",
    "devices_for",
    "grid",
    "input_files",
    "job_order",
    "job_plan",
    "load_file",
    "module_file",
    "normalise",
    "operation_file",
    "operation_found",
    "operation_hash",
    "operation_params",
    "operation_params_json",
    "operation_seed",
    "operation_inputs_from",
    "resolve",
    "snakemake_runs_cells_here",
]


# -- normalising what Snakemake hands over -------------------------------------------------
LIST_KEYS = ("libraries", "dtype", "threads")

#: The shipped default grid: the one place where each operation's default sizes are written.
DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config" / "config.yaml"


def default_margin() -> float:
    """The margin of the shipped default config (``margin`` in ``config/config.yaml``)."""
    return float(yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))["margin"])


def default_sizes(name: str) -> list[int]:
    """The sizes of ``name`` in the shipped default grid (``config/config.yaml``)."""
    shipped = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))["operations"]
    return [int(float(s)) for s in shipped[name]["sizes"]]


def _split_list(value: Any) -> Any:
    """``--config libraries=numpy,jax`` arrives as a string: accept it as a list."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _parse_size(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{where} = {value!r} is not a positive integer size")
    if isinstance(value, int):
        size = value
    elif isinstance(value, float) and value.is_integer():
        size = int(value)  # YAML reads 1e6 as a float: accept whole numbers
    elif isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            raise ConfigError(f"{where} = {value!r} is not a positive integer size") from None
        if not f.is_integer():
            raise ConfigError(f"{where} = {value!r} is not a positive integer size")
        size = int(f)
    else:
        raise ConfigError(f"{where} = {value!r} is not a positive integer size")
    if size < 1:
        raise ConfigError(f"{where} = {value!r} is not a positive integer size")
    return size


def _parse_sizes(name: str, sizes: list) -> list[int]:
    """An operation's sizes as integers; two spellings of one size (``1000`` and ``"1e3"``)
    are an error, since the grid would list the one cell twice."""
    parsed: list[int] = []
    spelt: dict[int, Any] = {}
    for i, value in enumerate(sizes):
        size = _parse_size(value, f"operations.{name}.sizes[{i}]")
        if size in spelt:
            first = spelt[size]
            if repr(first) == repr(value):
                raise ConfigError(
                    f"operations.{name}.sizes lists {value!r} twice; list each size once"
                )
            raise ConfigError(
                f"operations.{name}.sizes: {first!r} and {value!r} are the same size "
                f"({size}); list each size once"
            )
        spelt[size] = value
        parsed.append(size)
    return parsed


def _normalise_operations(value: Any) -> Any:
    """Accept a mapping name -> {sizes}, a list of names, or ``--config operations=a,b``
    (names with their default sizes)."""
    value = _split_list(value)
    if isinstance(value, list):
        out = {}
        for name in value:
            if not isinstance(name, str):
                raise ConfigError(f"operations: {name!r} is not an operation name")
            out[name] = None
        value = out
    if not isinstance(value, dict):
        return value
    result = {}
    for name, entry in value.items():
        if entry is None:
            # a built-in operation has default sizes; any other is told to give them
            entry = {"sizes": default_sizes(name)} if name in OPERATIONS else {}
        elif isinstance(entry, dict) and "sizes" not in entry and name in OPERATIONS:
            # parameters given without sizes: the operation's default sweep
            entry = {"sizes": default_sizes(name), **entry}
        if isinstance(entry, dict) and "sizes" in entry:
            entry = dict(entry)
            sizes = _split_list(entry["sizes"])
            if isinstance(sizes, (int, float)):
                sizes = [sizes]
            if isinstance(sizes, list):
                sizes = _parse_sizes(name, sizes)
            entry["sizes"] = sizes
        if isinstance(entry, dict) and "seed" in entry:
            entry = {**entry, "seed": _number(entry["seed"], int)}
        result[name] = entry
    return result


#: Config keys that were renamed so that each word has one meaning, under their new names:
#: ``replicates.margin`` read as the report's ``margin``, ``replicates.spread`` as a spread of
#: times. A config that still has one is refused with the new name, never silently ignored.
RENAMED_KEYS = {
    ("replicates", "margin"): (
        "replicates.stop_margin",
        "the stopping margin of a paired cell's rounds; the top-level margin stays the report's",
    ),
    ("replicates", "spread"): (
        "replicates.early_rounds",
        "the first rounds of every cell, each run as a job of its own",
    ),
}

TIMING_INTS = ("min_samples", "max_samples")
TIMING_FLOATS = ("min_sample_time_s", "budget_s")
NULL_WORDS = ("", "null", "none", "~")


def _number(value: Any, kind: type) -> Any:
    """``--config`` hands numbers over as strings (nested ones too): convert where clean."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        return value


def check_renamed(cfg: dict) -> None:
    """Refuse a key of ``RENAMED_KEYS``, naming its new name."""
    for (section, key), (new, meaning) in RENAMED_KEYS.items():
        if isinstance(cfg.get(section), dict) and key in cfg[section]:
            raise ConfigError(
                f"{section}.{key} was renamed to {new} ({meaning}); "
                f"write {new} in your config instead"
            )


def normalise(config: dict) -> dict:
    cfg = copy.deepcopy(dict(config))
    check_renamed(cfg)
    for key in LIST_KEYS:
        if key in cfg:
            value = [] if cfg[key] is None else _split_list(cfg[key])
            cfg[key] = value if isinstance(value, list) else [value]
    if isinstance(cfg.get("threads"), list):
        cfg["threads"] = [_number(t, int) for t in cfg["threads"]]
    if "operations" in cfg:
        cfg["operations"] = _normalise_operations(cfg["operations"])
    if "environments" in cfg:
        cfg["environments"] = normalise_environments(cfg["environments"])
    if "seed" in cfg:
        cfg["seed"] = _number(cfg["seed"], int)
    if "margin" in cfg:
        cfg["margin"] = _number(cfg["margin"], float)
    if isinstance(cfg.get("replicates"), dict):
        reps = dict(cfg["replicates"])
        for key in ("min", "max", "early_rounds"):
            if key in reps:
                reps[key] = _number(reps[key], int)
        for key in ("target_ci", "round_sd", "stop_margin", "max_cpu_taken", "max_cell_s"):
            if reps.get(key) is not None:
                reps[key] = _number(reps[key], float)
        for key in ("paired", "lockstep"):
            if isinstance(reps.get(key), str):
                word = reps[key].strip().lower()
                reps[key] = {"true": True, "false": False}.get(word, reps[key])
        cfg["replicates"] = reps
    for key in ("cell_timeout_s", "lock_timeout_s"):
        if key in cfg:
            cfg[key] = _number(cfg[key], float)
    if isinstance(cfg.get("wait_for_quiet"), dict):
        cfg["wait_for_quiet"] = {
            key: _number(value, float) if key in ("below", "max_wait_s") else value
            for key, value in cfg["wait_for_quiet"].items()
        }
    if "cell_memory_limit_mb" in cfg:
        limit = cfg["cell_memory_limit_mb"]
        if isinstance(limit, str) and limit.strip().lower() in NULL_WORDS:
            limit = None
        cfg["cell_memory_limit_mb"] = _number(limit, float)
    if isinstance(cfg.get("timing"), dict):
        timing = dict(cfg["timing"])
        for key in TIMING_INTS:
            if key in timing:
                timing[key] = _number(timing[key], int)
        for key in TIMING_FLOATS:
            if key in timing:
                timing[key] = _number(timing[key], float)
        cfg["timing"] = timing
    return cfg


# -- validating ----------------------------------------------------------------------------
def _describe_schema_error(err) -> str:
    path = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    validator, schema = err.validator, err.schema
    if validator == "additionalProperties":
        allowed = ", ".join(sorted(schema.get("properties", {})))
        extra = sorted(set(err.instance) - set(schema.get("properties", {})))
        where = "" if path == "(top level)" else f" under {path}"
        return f"unknown key {', '.join(map(repr, extra))}{where}; allowed keys: {allowed}"
    if validator == "enum":
        allowed = ", ".join(map(str, schema["enum"]))
        return f"{path} = {err.instance!r} is not allowed; allowed: {allowed}"
    if validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bound = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"{path} = {err.instance!r} is out of range; it must be {bound[validator]} {err.validator_value}"
    if validator == "type":
        expected = err.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"{path} = {err.instance!r} has the wrong type; expected {expected}"
    if validator == "minItems":
        return f"{path} is empty; give at least {err.validator_value} item(s)"
    if validator == "required":
        return f"{path}: {err.message}"
    return f"{path} = {err.instance!r}: {err.message}"


def validate_schema(cfg: dict, schema_path: str | Path) -> dict:
    """Validate against the JSON Schema, filling defaults for missing keys."""
    import jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator_cls = jsonschema.validators.validator_for(schema)

    def set_defaults(validator, properties, instance, schema_):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validator_cls.VALIDATORS["properties"](validator, properties, instance, schema_)

    filling = jsonschema.validators.extend(validator_cls, {"properties": set_defaults})
    errors = sorted(filling(schema).iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(_describe_schema_error(errors[0]))
    return cfg


#: the workflow's results folder, relative to its working directory
RESULTS_FOLDER = "results"


def check_history(cfg: dict, cwd: str | os.PathLike | None = None) -> None:
    """The history's folder is never results/ or inside it: clearing results keeps it. The
    site's folder (a build deletes pages there) is neither, nor the store or inside it, nor
    a folder that holds either."""
    folder = cfg["history"]["folder"]
    here = Path(cwd or os.getcwd()).resolve()
    where = Path(os.path.normpath(here / folder))
    results = here / RESULTS_FOLDER
    if where == results or results in where.parents:
        raise ConfigError(
            f"history.folder = {folder!r} is inside {RESULTS_FOLDER}/: the history is kept "
            f"beside the results, never inside them (clearing {RESULTS_FOLDER}/ must keep "
            "it); use e.g. history"
        )
    site = cfg["history"].get("site")
    if site is None:
        return
    built = Path(os.path.normpath(here / site))
    for other, what in ((where, f"the store (history.folder = {folder!r})"), (results, "results/")):
        if built == other:
            how = "is"
        elif other in built.parents:
            how = "is inside"
        elif built in other.parents:
            how = "holds"
        else:
            continue
        raise ConfigError(
            f"history.site = {site!r} {how} {what}: the site is a folder of its own, whose "
            "pages each build replaces and deletes; use e.g. history-site"
        )


def check_semantics(cfg: dict, cells_run_here: bool = True, workflow_dir=None) -> None:
    """Check what the schema cannot; ``workflow_dir``: where an operation's relative
    ``module`` lies (``numbench.config.operations``)."""
    check_dtypes(cfg)
    resolve_threads(cfg, cells_run_here)
    check_variants(cfg)
    for i, lib in enumerate(cfg["libraries"]):
        if lib not in known_libraries(cfg):
            raise ConfigError(
                f"libraries[{i}] = {lib!r} is not a known library; allowed: "
                + ", ".join(known_libraries(cfg))
            )
    if len(set(cfg["libraries"])) != len(cfg["libraries"]):
        raise ConfigError(f"libraries = {cfg['libraries']!r} lists a library twice")
    check_operations(cfg, workflow_dir)
    check_environments(cfg)
    check_history(cfg)
    timing = cfg["timing"]
    if timing["min_samples"] > timing["max_samples"]:
        raise ConfigError(
            f"timing.min_samples = {timing['min_samples']} is larger than "
            f"timing.max_samples = {timing['max_samples']}; it must be <= max_samples"
        )
    reps = cfg["replicates"]
    if reps["min"] > reps["max"]:
        raise ConfigError(
            f"replicates.min = {reps['min']} is larger than replicates.max = {reps['max']}; "
            "it must be <= max"
        )
    if reps["early_rounds"] > reps["min"]:
        raise ConfigError(
            f"replicates.early_rounds = {reps['early_rounds']} is larger than replicates.min = "
            f"{reps['min']}; at most min rounds can run early (the rest adapt)"
        )
    base = cfg["baseline"]
    if base["library"] not in cfg["libraries"]:
        raise ConfigError(
            f"baseline.library = {base['library']!r} is not in the grid; it must be one of "
            f"libraries: {', '.join(cfg['libraries'])}"
        )
    if base["library"] in (cfg.get("variants") or {}):
        raise ConfigError(
            f"baseline.library = {base['library']!r} is a variant; the baseline is one of "
            "numbench's libraries"
        )
    adapter = libraries.get(base["library"])
    if base["device"] not in adapter.devices:
        raise ConfigError(
            f"baseline.device = {base['device']!r} is not a device {base['library']} runs on; "
            f"allowed: {', '.join(adapter.devices)}"
        )
    if cfg["device"] == "cpu" and base["device"] != "cpu":
        raise ConfigError(
            f"baseline.device = {base['device']!r} is not in the grid (device = {cfg['device']!r}); "
            "use device: all, or a cpu baseline"
        )
    if cells_run_here:
        params = {name: operation_params(cfg, name) for name in cfg["operations"]}
        check_memory(
            cfg,
            lambda name, size, dtype: operation_found(cfg, name).operation.memory_floor_bytes(
                size, dtype, params[name]
            ),
        )


def snakemake_runs_cells_here(workflow) -> bool:
    """Whether the jobs of this Snakemake run (``workflow`` in a Snakefile) run on this host,
    so that the config's host checks apply (``numbench.config.dims``).

    Snakemake reads the Snakefile before it sets up its executor (``workflow.executor_plugin``
    is still None there), so this reads what it has decided by then. A non-local executor
    (slurm, or any other that submits jobs) must be given ``--jobs`` (the slurm profile's
    ``jobs:``), which Snakemake keeps as the number of nodes, whereas a local run turns a lone
    ``--jobs`` into ``--cores``; and a job running on a node reads the Snakefile again in
    remote mode. A local run given both ``--cores`` and ``--jobs`` (or a dry run given
    ``--jobs``) reads as a cluster run: its host checks are skipped and ``threads: all`` is
    refused, which errs on the side of saying so.
    """
    if getattr(workflow, "remote_exec", False):
        return False
    return workflow.resource_settings.nodes is None


def resolve(
    config: dict,
    schema_path: str | Path,
    cli_configfiles=(),
    *,
    cells_run_here: bool = True,
    workflow_dir: str | Path | None = None,
) -> dict:
    """Normalise and validate Snakemake's merged config.

    ``workflow_dir``: the workflow's folder, where an operation's relative ``module`` path
    lies (by default the one whose ``workflow/schemas/`` holds ``schema_path``).

    ``cells_run_here`` says whether the cells run on this host (a local Snakemake run): only
    then are thread counts and sizes checked against this host's CPUs and memory, and
    ``threads: all`` resolved to its CPUs (``numbench.config.dims``).

    Snakemake merges a ``--configfile`` into the default config key by key, so an
    ``operations`` mapping in the user's file would be *added* to the default operations.
    Here an ``operations`` mapping given in any command-line config file replaces the
    default set instead: a file that lists fewer operations runs only those.
    """
    cfg = dict(config)
    user_ops: dict | None = None
    for path in cli_configfiles or ():
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
        if isinstance(data, dict) and "operations" in data:
            ops = data["operations"]
            if isinstance(ops, dict) and isinstance(user_ops, dict):
                user_ops.update(ops)
            else:
                user_ops = copy.deepcopy(ops)
    if user_ops is not None and isinstance(cfg.get("operations"), dict):
        cfg["operations"] = user_ops
    cfg = normalise(cfg)
    cfg = validate_schema(cfg, schema_path)
    if workflow_dir is None:
        workflow_dir = Path(schema_path).resolve().parents[2]
    check_semantics(cfg, cells_run_here, workflow_dir)
    return cfg


def load_file(path: str | Path, schema_path: str | Path) -> dict:
    return resolve(yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}, schema_path)
