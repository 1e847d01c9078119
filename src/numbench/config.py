"""The configuration: normalise what Snakemake hands over, validate it against the JSON
Schema and the registries, and expand it into the grid of cells.

Every problem is reported as one ``ConfigError`` that names the key, the bad value and what
is allowed, so the workflow can stop before any job runs with a message and no traceback.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from numbench import libraries, operations
from numbench.config_dims import ConfigError, check_dtypes, check_memory, resolve_threads
from numbench.replicates import round_file
from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
from numbench.timing import TimingSettings

DEVICES = ("cpu", "gpu")
LIST_KEYS = ("libraries", "dtype", "threads")

#: The shipped default grid: the one place where each operation's default sizes are written.
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def default_margin() -> float:
    """The margin of the shipped default config (``margin`` in ``config/config.yaml``)."""
    return float(yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))["margin"])


def default_sizes(name: str) -> list[int]:
    """The sizes of ``name`` in the shipped default grid (``config/config.yaml``)."""
    shipped = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))["operations"]
    return [int(float(s)) for s in shipped[name]["sizes"]]


@dataclass(frozen=True, order=True)
class Cell:
    library: str
    device: str
    operation: str
    size: int
    dtype: str = "float64"
    threads: int = 1

    @property
    def path(self) -> str:
        return cell_path(
            self.library, self.device, self.operation, self.size, self.dtype, self.threads
        )


def cell_path(
    library: str,
    device: str,
    operation: str,
    size: int | str,
    dtype: str = "float64",
    threads: int | str = 1,
) -> str:
    return f"results/cells/{library}/{device}/{dtype}/t{threads}/{operation}/{size}.parquet"


def round_path(cell: Cell, replicate: int | str) -> str:
    """A spread round's file: temporary, read and removed by the cell's job."""
    return round_file(cell.path, replicate)


def job_order(cfg: dict, cells: list[Cell]) -> dict[str, int]:
    """A seeded random rank (0 .. len - 1) for every cell, by its path.

    The rules' priorities follow it within each stage (spread rounds, then cells), so the
    grid runs interleaved (operations and libraries mixed, as Google Benchmark's random
    interleaving does) and a slow period of the machine spreads over many groups instead of
    landing on one; the seed keeps a rerun's order.
    """
    paths = sorted(cell.path for cell in cells)
    random.Random(cfg["seed"]).shuffle(paths)
    return {path: rank for rank, path in enumerate(paths)}


def inputs_path(operation: str, size: int | str) -> str:
    return f"results/inputs/{operation}/{size}.npz"


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
            entry = {"sizes": default_sizes(name) if name in operations.OPERATIONS else [1]}
        elif isinstance(entry, dict) and "sizes" not in entry and name in operations.OPERATIONS:
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
        result[name] = entry
    return result


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


def normalise(config: dict) -> dict:
    cfg = copy.deepcopy(dict(config))
    for key in LIST_KEYS:
        if key in cfg:
            value = [] if cfg[key] is None else _split_list(cfg[key])
            cfg[key] = value if isinstance(value, list) else [value]
    if isinstance(cfg.get("threads"), list):
        cfg["threads"] = [_number(t, int) for t in cfg["threads"]]
    if "operations" in cfg:
        cfg["operations"] = _normalise_operations(cfg["operations"])
    if "seed" in cfg:
        cfg["seed"] = _number(cfg["seed"], int)
    if "margin" in cfg:
        cfg["margin"] = _number(cfg["margin"], float)
    if isinstance(cfg.get("replicates"), dict):
        reps = dict(cfg["replicates"])
        for key in ("min", "max", "spread"):
            if key in reps:
                reps[key] = _number(reps[key], int)
        for key in ("target_ci", "round_sd", "max_cpu_taken"):
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


def check_semantics(cfg: dict, cells_run_here: bool = True) -> None:
    check_dtypes(cfg)
    resolve_threads(cfg, cells_run_here)
    for i, lib in enumerate(cfg["libraries"]):
        if lib not in libraries.ADAPTERS:
            raise ConfigError(
                f"libraries[{i}] = {lib!r} is not a known library; allowed: "
                + ", ".join(libraries.ADAPTERS)
            )
    if len(set(cfg["libraries"])) != len(cfg["libraries"]):
        raise ConfigError(f"libraries = {cfg['libraries']!r} lists a library twice")
    if not cfg["operations"]:
        raise ConfigError("operations is empty; give at least one operation")
    for name in cfg["operations"]:
        if name not in operations.OPERATIONS:
            raise ConfigError(
                f"operations.{name} is not a known operation; allowed: "
                + ", ".join(operations.OPERATIONS)
            )
    for name in cfg["operations"]:
        try:
            operation_params(cfg, name)
        except KeyError as exc:
            raise ConfigError(f"operations.{name}: {exc.args[0]}") from None
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
    if reps["spread"] > reps["min"]:
        raise ConfigError(
            f"replicates.spread = {reps['spread']} is larger than replicates.min = "
            f"{reps['min']}; at most min rounds can be spread (the rest adapt)"
        )
    base = cfg["baseline"]
    if base["library"] not in cfg["libraries"]:
        raise ConfigError(
            f"baseline.library = {base['library']!r} is not in the grid; it must be one of "
            f"libraries: {', '.join(cfg['libraries'])}"
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
            lambda name, size, dtype: operations.get(name).memory_floor_bytes(
                size, dtype, params[name]
            ),
        )


def snakemake_runs_cells_here(workflow) -> bool:
    """Whether the jobs of this Snakemake run (``workflow`` in a Snakefile) run on this host,
    so that the config's host checks apply (``numbench.config_dims``).

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
    config: dict, schema_path: str | Path, cli_configfiles=(), *, cells_run_here: bool = True
) -> dict:
    """Normalise and validate Snakemake's merged config.

    ``cells_run_here`` says whether the cells run on this host (a local Snakemake run): only
    then are thread counts and sizes checked against this host's CPUs and memory, and
    ``threads: all`` resolved to its CPUs (``numbench.config_dims``).

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
    check_semantics(cfg, cells_run_here)
    return cfg


def load_file(path: str | Path, schema_path: str | Path) -> dict:
    return resolve(yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}, schema_path)


def operation_params(cfg: dict, name: str) -> dict[str, Any]:
    """The parameters of one operation: its defaults, updated by the config's entry."""
    entry = cfg["operations"][name] or {}
    return operations.get(name).resolve_params({k: v for k, v in entry.items() if k != "sizes"})


def operation_params_json(cfg: dict, name: str) -> str:
    """The same, as the canonical JSON text the rules pass on ("" when it has none)."""
    return operations.params_json(operation_params(cfg, name))


def cell_spec(cfg: dict, cell: Cell) -> CellSpec:
    """The one spec a cell's supervisor and workers run from, built from the validated config."""
    reps, base = cfg["replicates"], cfg["baseline"]
    is_baseline = (cell.library, cell.device) == (base["library"], base["device"])
    return CellSpec(
        library=cell.library,
        device=cell.device,
        operation=cell.operation,
        size=cell.size,
        dtype=cell.dtype,
        threads=int(cell.threads),
        inputs=inputs_path(cell.operation, cell.size),
        params=operation_params(cfg, cell.operation),
        timing=TimingSettings(**cfg["timing"]),
        timeout_s=float(cfg["cell_timeout_s"]),
        memory_limit_mb=cfg["cell_memory_limit_mb"],
        allocator=cfg["allocator"],
        replicates=ReplicateSettings(
            min=reps["min"],
            max=reps["max"],
            target_ci=float(reps["target_ci"]),
            margin=float(cfg["margin"]),
            spread=reps["spread"],
            round_sd=float(reps["round_sd"]),
            max_cpu_taken=None if reps["max_cpu_taken"] is None else float(reps["max_cpu_taken"]),
            lockstep=bool(reps["lockstep"]),
        ),
        paired_with=None
        if is_baseline or not reps["paired"]
        else f"{base['library']}/{base['device']}",
        contract=CELL_CONTRACT,
    )


def devices_for(cfg: dict) -> tuple[str, ...]:
    return DEVICES if cfg["device"] == "all" else (cfg["device"],)


def grid(cfg: dict) -> list[Cell]:
    """Every (library, device, operation, size, dtype, threads) cell of the config, plus the baseline cells.

    A library is placed only on the devices it can run on (NumPy has no GPU cells); the
    baseline library's cells on the baseline device are always included, so ``device=gpu``
    still gives speedups against NumPy on the CPU of the same host.
    """
    wanted, base = devices_for(cfg), cfg["baseline"]
    placed = {(base["library"], base["device"])}
    for lib in cfg["libraries"]:
        placed.update((lib, dev) for dev in wanted if dev in libraries.get(lib).devices)
    return sorted(
        Cell(lib, dev, op, int(s), dt, th)
        for lib, dev in placed
        for op, entry in cfg["operations"].items()
        for s in entry["sizes"]
        for dt in cfg["dtype"]
        for th in cfg["threads"]
    )


def input_files(cfg: dict) -> list[str]:
    return sorted({inputs_path(op, s) for op, e in cfg["operations"].items() for s in e["sizes"]})
