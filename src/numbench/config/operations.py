"""The config's operations: where each one comes from, its parameters, and the checks that
refuse a broken one before any job runs.

An entry of ``operations`` is ``{sizes: [...], module: PATH, params: {...}}``:

- ``module`` names a user's ``.py`` file (absolute, or relative to the workflow's folder)
  that defines ``OPERATION = numbench.Operation(...)``. Without it, the name is a built-in
  operation, else one installed under the entry-point group ``numbench.operations``. The
  name must be the file's ``OPERATION.name``, and no built-in one.
- ``seed`` draws the operation's inputs with another seed than the config's ``seed`` (or
  than the operation's own, ``Operation.seed``); it is recorded in each cell's ``seed``.
- ``inputs`` names a ``.npz`` or Parquet file of the operation's own inputs (``{size}`` in
  its path replaced by each size), read in place of those ``make_inputs`` draws
  (``numbench.inputs_file``).
- ``params`` overrides the operation's parameters (``Operation.params``). A parameter
  written directly under the entry (``operations.linreg_gd.iterations``) is the older
  spelling of the same thing and is still read; one given both ways is an error.

A user's operation (a file or an installed package) is checked here as far as it can be
without the libraries, and every problem found is said at once with its file and line
(``numbench.operations.check``): the file is missing or does not import, it defines no
``OPERATION`` or not an ``Operation``, its name differs from the key, a field is wrong, or
``make_inputs`` or ``reference`` fails at the smallest size of the config. ``numbench
check`` runs the implementations too.

The resolved file's absolute path replaces ``module`` in the validated config, so that every
later step (the grid, the cells' specs, an offsite plan) reads one path.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from numbench import inputs_file, operations
from numbench.cells import FIELD_PATTERNS
from numbench.config.dims import ConfigError
from numbench.operations.check import can_run, declared_problems, generator_problems

#: the keys of an operation's entry that are not its parameters
ENTRY_KEYS = ("sizes", "module", "params", "seed", "inputs", "options")

#: (name, the file's absolute path or None) -> the operation, as the last check found it
_CHECKED: dict[tuple[str, str | None], operations.Found] = {}


def module_file(value: str, workflow_dir: str | Path) -> Path:
    """The file a ``module`` names: as written when absolute (``~`` expanded), else under
    the workflow's folder. Spaces and other characters are kept as they are."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(workflow_dir) / path


def operation_found(cfg: dict, name: str) -> operations.Found:
    """The operation of the config's entry ``name`` (from its file or by its name)."""
    file = (cfg["operations"][name] or {}).get("module")
    found = _CHECKED.get((name, file))
    if found is None:
        found = operations.load(name, file)
        _CHECKED[(name, file)] = found
    return found


def given_params(entry: dict | None, name: str) -> dict[str, Any]:
    """The parameters an entry gives: those under ``params`` and, the older spelling, those
    written directly under the entry."""
    entry = entry or {}
    direct = {k: v for k, v in entry.items() if k not in ENTRY_KEYS}
    nested = entry.get("params") or {}
    both = sorted(set(direct) & set(nested))
    if both:
        raise ConfigError(
            f"operations.{name} gives {both[0]} twice, as operations.{name}.{both[0]} and "
            f"operations.{name}.params.{both[0]}; give it once, under params"
        )
    return {**direct, **nested}


def operation_params(cfg: dict, name: str) -> dict[str, Any]:
    """The parameters of one operation: its defaults, updated by the config's entry."""
    given = given_params(cfg["operations"][name], name)
    return operation_found(cfg, name).operation.resolve_params(given)


def operation_seed(cfg: dict, name: str) -> int:
    """The seed an operation's inputs are drawn with: its entry's ``seed``, else the
    operation's own (``Operation.seed``, where it draws with its own generator), else the
    config's ``seed``."""
    given = (cfg["operations"][name] or {}).get("seed")
    if given is not None:
        return int(given)
    own = operation_found(cfg, name).operation.seed
    return int(cfg["seed"]) if own is None else int(own)


def check_operations(cfg: dict, workflow_dir: str | Path) -> None:
    """Find every operation of the config, check it, and write each file's absolute path
    into its entry; raise ConfigError naming the key, the file and every problem."""
    if not cfg["operations"]:
        raise ConfigError("operations is empty; give at least one operation")
    for name, entry in cfg["operations"].items():
        entry = cfg["operations"][name] = dict(entry or {})
        if not re.fullmatch(FIELD_PATTERNS["operation"], name):
            raise ConfigError(
                f"operations.{name}: {name!r} is no operation name: lower-case letters, "
                "digits and _, first a letter (it names a folder of every cell's path)"
            )
        found = _find(name, entry, workflow_dir)
        if "sizes" not in entry:
            raise ConfigError(
                f"operations.{name} has no sizes; give them: operations.{name}.sizes: [...]"
            )
        try:
            params = found.operation.resolve_params(given_params(entry, name))
        except KeyError as exc:
            raise ConfigError(f"operations.{name}: {exc.args[0]}") from None
        if entry.get("inputs") is not None:
            entry["inputs"] = _inputs_files(name, entry, workflow_dir)
        if found.origin != operations.loading.BUILT_IN:
            _check_user_operation(cfg, name, found, params)
        _CHECKED[(name, entry.get("module"))] = found


def operation_inputs_from(cfg: dict, name: str) -> str | None:
    """The user's file of the operation's inputs (absolute, ``{size}`` in it where given),
    or None where they are drawn."""
    return (cfg["operations"][name] or {}).get("inputs")


def _inputs_files(name: str, entry: dict, workflow_dir: str | Path) -> str:
    """``inputs`` resolved against the workflow's folder; ConfigError where it is no .npz or
    Parquet file, or where a size's file is missing (its arrays are checked when the inputs
    are made, ``numbench.inputs_file``)."""
    pattern = str(module_file(entry["inputs"], workflow_dir))
    for size in sorted({int(s) for s in entry["sizes"]}):
        path = inputs_file.file_for(pattern, size)
        problem = inputs_file.suffix_problem(path)
        if problem is None and not path.is_file():
            problem = f"{path} (the inputs of size {size}) does not exist"
        if problem:
            raise ConfigError(f"operations.{name}.inputs: {problem}")
    return pattern


def _find(name: str, entry: dict, workflow_dir: str | Path) -> operations.Found:
    if entry.get("module") is None:
        try:
            return operations.loading.find(name)
        except operations.OperationError as exc:
            raise ConfigError(f"operations.{name}: {exc}") from None
        except KeyError:
            known = list(operations.OPERATIONS) + operations.loading.installed_names()
            raise ConfigError(
                f"operations.{name} is not a known operation; allowed: {', '.join(known)}; "
                f"or give operations.{name}.module: the .py file of your own"
            ) from None
    if name in operations.OPERATIONS:
        raise ConfigError(
            f"operations.{name}.module: {name} is a built-in operation; give yours another name"
        )
    path = module_file(entry["module"], workflow_dir)
    try:
        found = operations.load_file(path)
    except operations.OperationError as exc:
        raise ConfigError(f"operations.{name}.module: {exc}") from None
    if found.operation.name != name:
        raise ConfigError(
            f"operations.{name}.module: {found.file} defines the operation "
            f"{found.operation.name!r} (its OPERATION.name); the config's key must be the "
            f"same name: operations.{found.operation.name}, or name = {name!r} in the file"
        )
    entry["module"] = str(found.file)
    return found


def _check_user_operation(cfg: dict, name: str, found, params: dict) -> None:
    """Every problem of the declared fields and of the generator and the reference at the
    smallest size (where they can be tried), in one error."""
    problems = declared_problems(found, tuple(cfg["dtype"]))
    if can_run(found.operation):
        size = min(int(s) for s in cfg["operations"][name]["sizes"])
        seed = cfg["operations"][name].get("seed")
        seed = seed if seed is not None else found.operation.seed
        problems += generator_problems(found, size, params, cfg["seed"] if seed is None else seed)[
            0
        ]
    if problems:
        where = found.file or f"the {found.origin} operation {name}"
        listed = "\n  ".join(str(p) for p in problems)
        raise ConfigError(
            f"operations.{name}: the operation in {where} has {len(problems)} problem(s):"
            f"\n  {listed}\n(numbench check {shlex.quote(str(found.file or name))} says more)"
        )
