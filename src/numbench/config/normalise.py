"""Normalising what Snakemake hands over before it is validated: ``--config`` gives every
value as a string (``libraries=numpy,jax``, ``timing.budget_s=0.1``), YAML reads ``1e6`` as a
float and ``1e3`` as text. Each value is turned into what the schema expects, or left as it is
for the schema to refuse with the key named.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from numbench import operations
from numbench.config.dims import ConfigError
from numbench.config.environments import normalise_environments

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
            entry = {"sizes": default_sizes(name)} if name in operations.OPERATIONS else {}
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
