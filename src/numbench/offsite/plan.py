"""Step 1, here: validate the config as the workflow does and write the plan (and bundle)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from numbench.contract import write_bytes_atomic
from numbench.offsite.common import (
    DEFAULT_CONFIG,
    FORMAT_VERSION,
    PLAN_FORMAT,
    SCHEMA,
    OffsiteError,
    bundled_operation_file,
    canonical,
    cell_of,
    code_hash,
    inputs_files_of,
    inputs_log_path,
    log_path,
    now_iso,
    plan_hash,
    write_tar_gz,
)
from numbench.offsite.data import (
    bundled_entry,
    bundled_spec,
    check_planned_data,
    data_files,
    planned_data,
    warn_large,
)


# -- step 1: plan (here) -------------------------------------------------------------------------
def load_config(
    root: str | os.PathLike,
    configfiles: Iterable[str] = (),
    config_args: Iterable[str] = (),
    cells_run_here: bool = False,
) -> dict:
    """The config the workflow in ``root`` would run with these ``--configfile``/``--config``
    arguments: Snakemake's own merge (``config/config.yaml``, updated by each config file in
    turn, then by ``--config``), then ``numbench.config.resolve`` as ``common.smk`` calls it.
    ``cells_run_here``: the cells run on this host (``compare --confirm``), so its CPUs and
    memory are checked against them; an offsite plan's run on another host."""
    from snakemake.cli import parse_config
    from snakemake.common.configfile import load_configfile
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import update_config

    from numbench.config import ConfigError, resolve

    root = Path(root)
    configfiles = [str(f) for f in configfiles]
    try:
        config = load_configfile(str(root / DEFAULT_CONFIG))
        overwrite: dict = {}
        for path in configfiles:
            update_config(overwrite, load_configfile(path))
        update_config(overwrite, parse_config(list(config_args)))
    except (WorkflowError, ValueError, OSError) as exc:
        raise OffsiteError(f"cannot read the config: {exc}") from None
    update_config(config, overwrite)
    try:
        # An offsite plan's cells run on another host: its CPUs and memory are not this host's.
        return resolve(config, root / SCHEMA, configfiles, cells_run_here=cells_run_here)
    except ConfigError as exc:
        raise OffsiteError(f"config error: {exc}") from None


def _bundled(spec_or_entry: dict, key: str, name: str) -> dict:
    """A copy whose ``key`` (a user's operation file) names its place in the bundle."""
    if spec_or_entry.get(key) is None:
        return spec_or_entry
    return {**spec_or_entry, key: bundled_operation_file(name)}


def _carried(cfg: dict) -> None:
    """OffsiteError where the config holds what a plan does not carry: environments."""
    if cfg.get("environments"):
        names = ", ".join(cfg["environments"])
        raise OffsiteError(
            f"environments ({names}) are not carried offsite: their virtual environments "
            "are made where the workflow runs. Leave the key out of the offsite config, and "
            "run the environments' cells with the workflow on that host"
        )


def make_plan(cfg: dict, made_with: dict | None = None) -> dict:
    """The plan of a resolved config: cells in a seeded random order (``seed`` of the config),
    so that a slow spell of the remote host is spread over libraries instead of landing on one.

    A user's operation file is named by its place in the bundle (``bundled_operation_file``),
    here and in the archive alike, so that a plan does not depend on where the file lies on
    this host, and the hash of its code (in every cell's spec) says which code it is. A
    user's data file likewise (``numbench.offsite.data``), with its SHA-256 and size."""
    from numbench.config import cell_spec, grid

    _carried(cfg)
    inputs = _inputs_entries(cfg)
    data_of = {i["path"]: i.get("data") for i in inputs}
    cells = sorted(grid(cfg))
    random.Random(f"numbench-offsite-{cfg['seed']}").shuffle(cells)
    entries = [
        {
            "path": c.path,
            "log": log_path(c.path),
            "spec": bundled_spec(
                _bundled(json.loads(cell_spec(cfg, c).to_json()), "operation_file", c.operation),
                data_of,
            ),
        }
        for c in cells
    ]
    plan = {
        "format": PLAN_FORMAT,
        "version": FORMAT_VERSION,
        "created_at": now_iso(),
        "made_with": made_with or {},
        "code_hash": code_hash(),
        # through JSON, so that the plan compares equal with one read back from its file
        "config": json.loads(
            canonical(
                {
                    **cfg,
                    "operations": {
                        op: bundled_entry(_bundled(entry, "module", op), op)
                        for op, entry in cfg["operations"].items()
                    },
                }
            )
        ),
        "inputs": inputs,
        "cells": entries,
    }
    plan["plan_hash"] = plan_hash(plan)
    return plan


def _inputs_entries(cfg: dict) -> list[dict]:
    """The plan's inputs files, each with what makes it: operation, size, seed, parameters,
    the operation's code and, where its inputs are read from the user's file, that file's
    place in the bundle, SHA-256 and size (``data``, ``numbench.offsite.data``)."""
    from numbench.cells import inputs_path
    from numbench.config import (
        input_files,
        operation_file,
        operation_hash,
        operation_params,
        operation_seed,
    )

    wanted = set(input_files(cfg))
    inputs = []
    for op, entry in cfg["operations"].items():
        for size in sorted({int(s) for s in entry["sizes"]}):
            path = inputs_path(op, size)
            assert path in wanted
            item = {
                "path": path,
                "log": inputs_log_path(op, size),
                "operation": op,
                "size": size,
                "seed": operation_seed(cfg, op),
                "params": operation_params(cfg, op),
                "operation_file": operation_file(cfg, op) and bundled_operation_file(op),
                "operation_hash": operation_hash(cfg, op),
            }
            data = planned_data(cfg, op, size)
            if data is not None:  # no key where drawn: such a plan hashes as before
                item["data"] = data
            inputs.append(item)
    return sorted(inputs, key=lambda i: i["path"])


def write_plan(
    root: str | os.PathLike,
    output: str | os.PathLike,
    configfiles: Iterable[str] = (),
    config_args: Iterable[str] = (),
    bundle: str | os.PathLike | None = None,
    say: Callable[[str], None] = print,
) -> dict:
    """Write the plan of the config to ``output`` and, with ``bundle``, the bundle beside it:
    numbench's sources, the plan, the user's operation files and data files (a data file
    larger than a bundle is meant to be is carried, and ``say`` warns naming it)."""
    configfiles, config_args = list(configfiles), list(config_args)
    cfg = load_config(root, configfiles, config_args)
    plan = make_plan(cfg, {"configfiles": configfiles, "config": config_args})
    text = json.dumps(plan, indent=1, sort_keys=True) + "\n"
    write_bytes_atomic(text.encode(), Path(output))
    if bundle is not None:
        files = data_files(cfg)
        warn_large(files, say)
        write_bundle(root, text, Path(output).name, bundle, {**operation_files(cfg), **files})
    return plan


def operation_files(cfg: dict) -> dict[str, bytes]:
    """The bundle's copy of every user's operation of the config: its own file as
    ``operations/NAME/NAME.py`` and the files it imports from its folder beside it, under
    the names they have there (``numbench.operations.sources``), so that it imports there as
    here and its code hashes the same."""
    from numbench.config import operation_file, operation_found

    files: dict[str, bytes] = {}
    for name in cfg["operations"]:
        if operation_file(cfg, name) is None:
            continue
        code = operation_found(cfg, name).code
        own = bundled_operation_file(name)
        files[own] = code.main.read_bytes()
        for helper in code.helpers:
            member = f"{Path(own).parent.as_posix()}/{code.relative(helper)}"
            if member == own:
                raise OffsiteError(
                    f"the operation {name}'s helper {helper} would take the place of its own "
                    f"file in the bundle ({own}); rename the helper"
                )
            files[member] = helper.read_bytes()
    return files


def write_bundle(
    root: str | os.PathLike,
    plan_text: str,
    plan_name: str,
    bundle,
    operations: dict[str, bytes | Path] | None = None,
) -> None:
    """What the remote host needs, in one ``.tar.gz``: the package's sources, the plan, and
    beside it the files of the user's operations (``operation_files``) and data
    (``numbench.offsite.data.data_files``, copied from their files in pieces). Unpack it
    anywhere there and run ``PYTHONPATH=src python -m numbench offsite run``."""
    root = Path(root)

    def members():
        for path in sorted((root / "src" / "numbench").rglob("*.py")):
            yield path.relative_to(root).as_posix(), path.read_bytes(), None
        yield plan_name, plan_text.encode(), None
        for member, data in sorted((operations or {}).items()):
            yield member, data, None

    write_tar_gz(bundle, members())


def read_plan(path: str | os.PathLike) -> dict:
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OffsiteError(f"cannot read the plan {path}: {exc}") from None
    return check_plan(plan, f"the plan {path}")


def check_plan(plan: Any, what: str) -> dict:
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise OffsiteError(f"{what} is not a numbench offsite plan")
    if plan.get("version") != FORMAT_VERSION:
        raise OffsiteError(
            f"{what} has format version {plan.get('version')!r}; this numbench reads "
            f"version {FORMAT_VERSION}"
        )
    try:
        recomputed = plan_hash(plan)
    except (KeyError, TypeError) as exc:
        raise OffsiteError(f"{what} is incomplete: {exc!r}") from None
    if recomputed != plan.get("plan_hash"):
        raise OffsiteError(f"{what} was changed after it was made: its plan_hash does not match")
    check_plan_paths(plan, what)
    check_planned_data(plan, what)
    return plan


def check_plan_paths(plan: dict, what: str) -> None:
    """Every path the plan names must be the one its cell's (or inputs file's) identity gives.

    A matching plan_hash proves nothing (whoever edits a plan can recompute it, and it does not
    cover the cells' logs), so ``run`` and ``import`` write only to paths derived here from
    each cell's fields (``numbench.cells``) and refuse a plan that names others: a cell file,
    a log or an inputs file elsewhere, climbing out with ``..`` or absolute."""
    if not isinstance(plan.get("cells"), list) or not isinstance(plan.get("inputs"), list):
        raise OffsiteError(f"{what} is incomplete: it lists no cells or no inputs files")
    inputs = set()
    for item in plan["inputs"]:
        path, log = inputs_files_of(item, what)
        if item.get("path") != path:
            raise OffsiteError(
                f"{what} names the inputs file {item.get('path')!r} for {item['operation']} "
                f"n={item['size']}, whose inputs file is {path}: an inputs file's paths are "
                "derived from its operation and size, and a plan that names others is refused"
            )
        if item.get("operation_file") not in (None, bundled_operation_file(item["operation"])):
            raise OffsiteError(
                f"{what} names the operation file {item.get('operation_file')!r} for "
                f"{item['operation']}, whose file is {bundled_operation_file(item['operation'])}"
                " beside the plan; a plan that names another is refused"
            )
        if item.get("log") != log:
            raise OffsiteError(
                f"{what} names the log {item.get('log')!r} for {path}, whose log is {log}: "
                "an inputs file's paths are derived from its operation and size, and a plan "
                "that names others is refused"
            )
        inputs.add(path)
    seen = set()
    for entry in plan["cells"]:
        if not isinstance(entry, dict):
            raise OffsiteError(f"{what}: a cell entry is {type(entry).__name__}, not a mapping")
        cell = cell_of(entry.get("spec"), what)
        if entry.get("path") != cell.path:
            raise OffsiteError(
                f"{what} names the file {entry.get('path')!r} for the cell whose file is "
                f"{cell.path}: a cell's paths are derived from its identity, and a plan that "
                "names others is refused"
            )
        if entry.get("log") != cell.log:
            raise OffsiteError(
                f"{what} names the log {entry.get('log')!r} for the cell {cell.path}, whose "
                f"log is {cell.log}: a cell's paths are derived from its identity, and a plan "
                "that names others is refused"
            )
        own_file = entry["spec"].get("operation_file")
        if own_file not in (None, bundled_operation_file(cell.operation)):
            raise OffsiteError(
                f"{what} names the operation file {own_file!r} for the cell {cell.path}, "
                f"whose operation's file is {bundled_operation_file(cell.operation)} beside "
                "the plan; a plan that names another is refused"
            )
        if entry["spec"].get("inputs") != cell.inputs or cell.inputs not in inputs:
            raise OffsiteError(
                f"{what}: the cell {cell.path} reads {entry['spec'].get('inputs')!r}, not its "
                f"inputs file {cell.inputs} among the plan's inputs files"
            )
        if cell.path in seen:
            raise OffsiteError(f"{what} lists the cell {cell.path} twice")
        seen.add(cell.path)


def check_operation_code(plan: dict, local: dict) -> None:
    """Each operation's code here (the hash of its file and helpers, in the specs of the plan
    made here) must be the code the archive's cells were measured with."""

    def hashes(p: dict) -> dict[str, str]:
        return {c["spec"]["operation"]: c["spec"].get("operation_hash") for c in p["cells"]}

    here, there = hashes(local), hashes(plan)
    for name in sorted(set(here) & set(there)):
        if here[name] != there[name]:
            raise OffsiteError(
                f"the operation {name}'s code here (hash {str(here[name])[:12]}) is not the "
                f"code the archive's cells were measured with ({str(there[name])[:12]}): "
                "import with the operation's files as they were planned, or plan and run it again"
            )
