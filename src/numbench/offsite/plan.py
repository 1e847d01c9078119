"""Step 1, here: validate the config as the workflow does and write the plan (and bundle);
and the checks a plan read back must pass, in ``run`` there and ``import`` here alike
(``check_plan``): a plan names nothing the config's cells would not.

A user's data files (``operations.NAME.inputs``) travel in the plan's bundle, so they are the
plan's own: named in the plan by their place in the bundle, with their SHA-256 and size;
checked there before anything is measured (``checked_data_beside``), and here again on import
(``check_data_here``).

The plan names each size's file by a place derived from the operation's name and the size
alone (``bundled_data_file``), never by this host's path, so that the plan (and its hash) is
the same wherever the file lies, as for a user's operation file. Each inputs entry of the
plan whose inputs are read from a file holds ``data``: ``{"file": place in the bundle,
"sha256": ..., "bytes": ...}``; the plan's hash covers it, and the cells' specs name that
place as their ``inputs_from``. The archive never carries the data back: ``import`` reads the
file the config here names, which must still hash as the plan says.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from numbench.contract import write_bytes_atomic
from numbench.offsite.common import (
    DEFAULT_CONFIG,
    FORMAT_VERSION,
    PLAN_FORMAT,
    SCHEMA,
    TRANSFER_LIMIT_BYTES,
    OffsiteError,
    bundled_operation_file,
    canonical,
    cell_of,
    code_hash,
    file_sha256,
    inputs_files_of,
    inputs_log_path,
    inside,
    log_path,
    now_iso,
    plan_hash,
    write_tar_gz,
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
    """The plan of a resolved config: its cells in the workflow's order
    (``numbench.config.JobOrder.stage_order``: seeded by the config's ``seed``), which ``run``
    follows, so that a grid is measured in one order here and there, and a slow spell of the
    remote host is spread over libraries instead of landing on one.

    A user's operation file is named by its place in the bundle (``bundled_operation_file``),
    here and in the archive alike, so that a plan does not depend on where the file lies on
    this host, and the hash of its code (in every cell's spec) says which code it is. A
    user's data file likewise (``planned_data``), with its SHA-256 and size."""
    from numbench.config import JobOrder, cell_spec, grid

    _carried(cfg)
    inputs = _inputs_entries(cfg)
    data_of = {i["path"]: i.get("data") for i in inputs}
    cells = grid(cfg)
    cells = JobOrder.of(cfg, cells).stage_order(cells)
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
    place in the bundle, SHA-256 and size (``data``, ``planned_data``)."""
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
    the names they have there (``numbench.operations.loading``), so that it imports there as
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
    (``data_files``, copied from their files in pieces). Unpack it
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


# -- a user's data files, carried offsite ---------------------------------------------------------
#: where the bundle keeps a user's data files, beside the plan
DATA_DIR = "data"
#: a data file larger than this is carried all the same, with a warning naming it: an offsite
#: bundle, like its archive, is meant to travel by copy (``TRANSFER_LIMIT_BYTES``)
LARGE_DATA_BYTES = TRANSFER_LIMIT_BYTES
#: the placeholder of the size in ``operations.NAME.inputs`` (``numbench.inputs_file``)
SIZE_FIELD = "{size}"
#: the kinds of data file, by suffix (``numbench.inputs_file.SUFFIXES``)
SUFFIXES = (".npz", ".parquet")


def bundled_pattern(pattern: str, operation: str) -> str:
    """The place in the bundle of the files of ``operations.NAME.inputs`` (``pattern``, this
    host's path): ``data/NAME/NAME_{size}.npz`` where the pattern has ``{size}``, else one
    file for every size, ``data/NAME/NAME.npz`` (``.parquet`` for a Parquet file)."""
    suffix = Path(pattern.replace(SIZE_FIELD, "0")).suffix
    stem = f"{operation}_{SIZE_FIELD}" if SIZE_FIELD in pattern else operation
    return f"{DATA_DIR}/{operation}/{stem}{suffix}"


def bundled_data_file(pattern: str, operation: str, size: int) -> str:
    """The place in the bundle of the data file of ``operation`` at ``size``."""
    return bundled_pattern(pattern, operation).replace(SIZE_FIELD, str(int(size)))


def _places(operation: str, size: int) -> set[str]:
    """Every place a plan may name for the data of ``operation`` at ``size``."""
    return {
        bundled_data_file(f"x{stem}{suffix}", operation, size)
        for stem in ("", SIZE_FIELD)
        for suffix in SUFFIXES
    }


def _local_file(cfg: dict, operation: str, size: int) -> Path | None:
    """This host's data file of ``operation`` at ``size``; None where its inputs are drawn."""
    from numbench.config import operation_inputs_from
    from numbench.inputs_file import file_for

    pattern = operation_inputs_from(cfg, operation)
    return None if pattern is None else file_for(pattern, size)


def planned_data(cfg: dict, operation: str, size: int) -> dict | None:
    """The inputs entry's ``data`` (place in the bundle, SHA-256, size in bytes) of this
    host's file of ``operation`` at ``size``; None where its inputs are drawn."""
    from numbench.config import operation_inputs_from

    file = _local_file(cfg, operation, size)
    if file is None:
        return None
    try:
        digest, size_bytes = file_sha256(file), file.stat().st_size
    except OSError as exc:
        raise OffsiteError(
            f"operations.{operation}.inputs: cannot read {file} (size {size}): {exc}"
        ) from None
    pattern = operation_inputs_from(cfg, operation)
    return {
        "file": bundled_data_file(pattern, operation, size),
        "sha256": digest,
        "bytes": size_bytes,
    }


def bundled_entry(entry: dict, operation: str) -> dict:
    """An operation's config entry as the plan holds it: ``inputs`` naming the files' place
    in the bundle instead of this host's path."""
    if entry.get("inputs") is None:
        return entry
    return {**entry, "inputs": bundled_pattern(entry["inputs"], operation)}


def bundled_spec(spec: dict, data: dict[str, dict]) -> dict:
    """A cell's spec as the plan holds it: ``inputs_from`` naming the data file's place in
    the bundle (``data``: the plan's ``data`` by inputs file) instead of this host's path."""
    if spec.get("inputs_from") is None:
        return spec
    return {**spec, "inputs_from": data[spec["inputs"]]["file"]}


def data_files(cfg: dict) -> dict[str, Path]:
    """Place in the bundle -> this host's file, for every data file of the config."""
    from numbench.config import operation_inputs_from

    files = {}
    for name, entry in cfg["operations"].items():
        pattern = operation_inputs_from(cfg, name)
        for size in sorted({int(s) for s in entry["sizes"]}) if pattern else ():
            files[bundled_data_file(pattern, name, size)] = _local_file(cfg, name, size)
    return files


def warn_large(files: dict[str, Path], say: Callable[[str], None]) -> None:
    """Say which data files are larger than an offsite bundle is meant to be: they are
    carried whole all the same."""
    for place, file in sorted(files.items()):
        size = file.stat().st_size
        if size > LARGE_DATA_BYTES:
            say(
                f"warning: the data file {file} is {size / 2**20:.1f} MiB, more than the "
                f"{LARGE_DATA_BYTES // 2**20} MiB an offsite bundle is meant to carry; it "
                f"goes into the bundle whole (as {place}), which is as much larger"
            )


def check_planned_data(plan: dict, what: str) -> None:
    """Each ``data`` of the plan's inputs entries must name a place derived from its
    operation and size, with a SHA-256 and a size in bytes; each cell's ``inputs_from`` must
    be the place of its inputs file's data (None where its inputs are drawn)."""
    places: dict[str, str | None] = {}
    for item in plan["inputs"]:
        data = item.get("data")
        places[item["path"]] = None if data is None else _checked_entry(item, data, what)
    for entry in plan["cells"]:
        spec = entry["spec"]
        want = places.get(spec["inputs"])
        if spec.get("inputs_from") != want:
            raise OffsiteError(
                f"{what}: the cell {entry['path']} names {spec.get('inputs_from')!r} as the "
                f"file its inputs are read from, not {want!r}, its inputs file's data in the "
                "plan; a plan that names another is refused"
            )


def _checked_entry(item: dict, data, what: str) -> str:
    """The place of an inputs entry's ``data``, once it is well formed."""
    op, size = item["operation"], item["size"]
    if not isinstance(data, dict):
        raise OffsiteError(f"{what}: the data of {item['path']} is no mapping: {data!r}")
    if data.get("file") not in _places(op, size):
        raise OffsiteError(
            f"{what} names the data file {data.get('file')!r} for {op} n={size}, whose data "
            f"file is one of {', '.join(sorted(_places(op, size)))} beside the plan: a data "
            "file's place is derived from its operation and size, and a plan that names "
            "another is refused"
        )
    digest, size_bytes = data.get("sha256"), data.get("bytes")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise OffsiteError(f"{what}: the data file {data['file']} has no SHA-256: {digest!r}")
    if not (isinstance(size_bytes, int) and not isinstance(size_bytes, bool) and size_bytes >= 0):
        raise OffsiteError(f"{what}: the data file {data['file']} has no size: {size_bytes!r}")
    return data["file"]


def checked_data_beside(plan: dict, folder: Path) -> dict[str, str]:
    """Inputs file -> its data file here, beside the plan in ``folder`` (where the bundle put
    it), once each hashes as the plan says: a file missing or of another SHA-256 is an
    OffsiteError naming it, the hash expected and the one found, before anything is made or
    measured."""
    found: dict[str, str | None] = {}
    files = {}
    for item in plan["inputs"]:
        data = item.get("data")
        if data is None:
            continue
        path = inside(folder, data["file"])
        if data["file"] not in found:
            found[data["file"]] = file_sha256(path) if path.is_file() else None
        got = found[data["file"]]
        if got != data["sha256"]:
            seen = "no file" if got is None else f"SHA-256 {got}"
            raise OffsiteError(
                f"the plan's data file {data['file']} (operations.{item['operation']}.inputs "
                f"at size {item['size']}) at {path}: the plan expects SHA-256 "
                f"{data['sha256']}, found {seen}. It is not the file the plan was made with; "
                "nothing was measured. The data travels in the bundle (offsite plan --bundle) "
                "beside the plan: unpack the bundle whole, or plan again"
            )
        files[item["path"]] = str(path)
    return files


def check_data_here(plan: dict, local: dict, cfg: dict) -> None:
    """Each data file the config here names (hashed into ``local``, its plan here) must be
    the one the archive's cells were measured on (the archive's ``plan``)."""
    here = {i["path"]: i.get("data") for i in local["inputs"]}
    for item in plan["inputs"]:
        there, mine = item.get("data"), here.get(item["path"])
        if there is None or mine is None:
            continue  # drawn on one side: the configs differ, check_against_config says how
        if mine["sha256"] != there["sha256"]:
            op, size = item["operation"], item["size"]
            raise OffsiteError(
                f"{_local_file(cfg, op, size)} (operations.{op}.inputs at size {size}) has "
                f"SHA-256 {mine['sha256']} here, but the archive's cells were measured on "
                f"data of SHA-256 {there['sha256']}: they were measured on other data. Import "
                "with the file as it was planned, or plan and run it again"
            )
