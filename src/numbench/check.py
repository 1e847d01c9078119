"""``numbench check PATH`` (or ``NAME``): try an operation before the workflow measures it.

It loads the operation (a user's ``.py`` file, or a built-in or installed one by name),
checks its declared fields, runs its generator and its reference at one size, then builds
each implementation whose library imports here and calls it once on those inputs, checking
what a cell checks: it runs, its output has the reference's count, shapes and the cell's
dtype and lies within the tolerance, and it leaves its inputs as they were. Every problem
is printed as ``FILE:LINE: message``, all of them rather than the first (asv's ``check``
stops at the first); a library that does not import here is said to be skipped, and is no
problem. The exit status is 1 when there is any problem, else 0.

The size is ``--size``, else the smallest of the operation's sizes in the config files given
(``--configfile``, read as Snakemake merges them; their ``params`` are used too), else a
built-in operation's smallest default size, else ``CHECK_SIZE``. All implementations run in
this one process, one after another, each library imported once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

#: the size an operation is checked at when neither ``--size`` nor a config gives one
CHECK_SIZE = 16


def _config_entry(name: str, configfiles: list[str]) -> dict:
    """The operation's entry in the config files, later files overriding earlier ones key
    by key, as Snakemake merges them."""
    import yaml

    entry: dict = {}
    for file in configfiles:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8")) or {}
        ops = data.get("operations") if isinstance(data, dict) else None
        if isinstance(ops, dict) and isinstance(ops.get(name), dict):
            entry.update(ops[name])
    return entry


def _load(target: str, directory: str, configfiles: list[str]):
    """The operation ``target`` names: a file (a path, or a name whose config entry has a
    ``module``), else a built-in or installed operation."""
    from numbench import operations
    from numbench.config.operations import module_file

    looks_like_file = target.endswith(".py") or os.sep in target or "/" in target
    if not looks_like_file:
        module = _config_entry(target, configfiles).get("module")
        if module:
            return operations.load_file(module_file(module, directory))
        try:
            return operations.loading.find(target)
        except KeyError as exc:
            raise operations.OperationError(exc.args[0]) from None
    return operations.load_file(Path(directory) / Path(target).expanduser())


def _size_and_params(found, size: int | None, configfiles: list[str]) -> tuple[int, dict]:
    from numbench import operations
    from numbench.config import default_sizes
    from numbench.config.operations import given_params

    entry = _config_entry(found.operation.name, configfiles)
    if size is None and entry.get("sizes"):
        size = min(int(float(s)) for s in entry["sizes"])
    if size is None and found.operation.name in operations.OPERATIONS:
        size = min(default_sizes(found.operation.name))
    return size or CHECK_SIZE, found.operation.resolve_params(
        given_params(entry, found.operation.name)
    )


def _adapter_for(family: str, dtype: str):
    """An adapter that runs ``family`` (the first of the registry, on the CPU where the family
    runs there), or None; test-only adapters are left out."""
    from numbench.libraries import ADAPTERS

    for cls in ADAPTERS.values():
        if cls.test_only:
            continue
        for device in cls.devices:
            adapter = cls(device, dtype, 1)
            if adapter.family == family:
                return adapter
    return None


def check(
    target: str,
    size: int | None = None,
    dtype: str = "float64",
    directory: str = ".",
    configfiles: list[str] = (),
    say: Callable[[str], None] = print,
) -> int:
    """Check the operation ``target`` and say what was found; return the exit status."""
    from numbench import operations
    from numbench.config.dims import ConfigError
    from numbench.libraries import Unavailable
    from numbench.operations.check import (
        can_run,
        declared_problems,
        families,
        generator_problems,
        implementation_problems,
    )

    configfiles = list(configfiles)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter
    try:
        found = _load(target, directory, configfiles)
    except operations.OperationError as exc:
        say(f"error: {exc}")
        return 1
    op = found.operation
    where = found.file or f"the {found.origin} operation {op.name}"
    say(f"{op.name}: {where} (code {found.sha256[:12]})")
    say(f"  {op.summary}")
    problems = declared_problems(found)
    try:
        size, params = _size_and_params(found, size, list(configfiles))
    except (KeyError, ConfigError, OSError, ValueError) as exc:
        say(f"error: {exc.args[0] if exc.args else exc}")
        return 1
    inputs = reference = None
    if can_run(op):
        more, inputs, reference = generator_problems(found, size, params)
        problems += more
    if reference is not None and isinstance(op.dtypes, (tuple, list)) and dtype not in op.dtypes:
        say(f"  inputs and reference at size {size}: made")
        say(f"  {dtype}: unsupported ({op.unsupported_reason('numpy', dtype)}); nothing run")
        reference = None
    if reference is not None:
        say(f"  inputs and reference at size {size} ({dtype}): made")
        for family in families():
            if family not in op.implementations:
                why = op.unsupported_reason(family)
                say(f"  {family}: unsupported ({why})")
                continue
            adapter = _adapter_for(family, dtype)
            try:
                os.environ.update(adapter.environment())
                adapter.load()
            except (Unavailable, ImportError) as exc:
                say(f"  {family}: skipped, {adapter.name} cannot run here: {exc}")
                continue
            found_here = implementation_problems(
                found, family, adapter, inputs, reference, dtype, params
            )
            say(f"  {family}: " + (f"{len(found_here)} problem(s)" if found_here else "ok"))
            problems += found_here
    for problem in problems:
        say(str(problem))
    say(f"{len(problems)} problem(s)" if problems else "no problems")
    return 1 if problems else 0


def main(args) -> int:
    """The ``numbench check`` subcommand (``numbench.cli``)."""
    status = check(args.target, args.size, args.dtype, args.directory, args.configfile)
    sys.stdout.flush()
    return status
