"""Step 1, here: validate the config as the workflow does and write the plan (and bundle)."""

from __future__ import annotations

import io
import json
import os
import random
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from numbench.offsite.common import (
    DEFAULT_CONFIG,
    FORMAT_VERSION,
    PLAN_FORMAT,
    SCHEMA,
    OffsiteError,
    _add_bytes,
    _write_bytes_atomic,
    canonical,
    code_hash,
    log_path,
    now_iso,
    plan_hash,
)


# -- step 1: plan (here) -------------------------------------------------------------------------
def load_config(
    root: str | os.PathLike, configfiles: Iterable[str] = (), config_args: Iterable[str] = ()
) -> dict:
    """The config the workflow in ``root`` would run with these ``--configfile``/``--config``
    arguments: Snakemake's own merge (``config/config.yaml``, updated by each config file in
    turn, then by ``--config``), then ``numbench.config.resolve`` as ``common.smk`` calls it."""
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
        return resolve(config, root / SCHEMA, configfiles)
    except ConfigError as exc:
        raise OffsiteError(f"config error: {exc}") from None


def make_plan(cfg: dict, made_with: dict | None = None) -> dict:
    """The plan of a resolved config: cells in a seeded random order (``seed`` of the config),
    so that a slow spell of the remote host is spread over libraries instead of landing on one."""
    from numbench.config import cell_spec, grid, input_files, inputs_path, operation_params

    cells = sorted(grid(cfg))
    random.Random(f"numbench-offsite-{cfg['seed']}").shuffle(cells)
    entries = [
        {"path": c.path, "log": log_path(c.path), "spec": json.loads(cell_spec(cfg, c).to_json())}
        for c in cells
    ]
    wanted = set(input_files(cfg))
    inputs = []
    for op, entry in cfg["operations"].items():
        for size in sorted({int(s) for s in entry["sizes"]}):
            path = inputs_path(op, size)
            assert path in wanted
            inputs.append(
                {
                    "path": path,
                    "log": f"logs/inputs/{op}/{size}.log",
                    "operation": op,
                    "size": size,
                    "seed": cfg["seed"],
                    "params": operation_params(cfg, op),
                }
            )
    inputs.sort(key=lambda i: i["path"])
    plan = {
        "format": PLAN_FORMAT,
        "version": FORMAT_VERSION,
        "created_at": now_iso(),
        "made_with": made_with or {},
        "code_hash": code_hash(),
        # through JSON, so that the plan compares equal with one read back from its file
        "config": json.loads(canonical(cfg)),
        "inputs": inputs,
        "cells": entries,
    }
    plan["plan_hash"] = plan_hash(plan)
    return plan


def write_plan(
    root: str | os.PathLike,
    output: str | os.PathLike,
    configfiles: Iterable[str] = (),
    config_args: Iterable[str] = (),
    bundle: str | os.PathLike | None = None,
) -> dict:
    configfiles, config_args = list(configfiles), list(config_args)
    cfg = load_config(root, configfiles, config_args)
    plan = make_plan(cfg, {"configfiles": configfiles, "config": config_args})
    text = json.dumps(plan, indent=1, sort_keys=True) + "\n"
    _write_bytes_atomic(text.encode(), Path(output))
    if bundle is not None:
        write_bundle(root, text, Path(output).name, bundle)
    return plan


def write_bundle(root: str | os.PathLike, plan_text: str, plan_name: str, bundle) -> None:
    """What the remote host needs, in one ``.tar.gz``: the package's sources, the entry point
    and the plan. Unpack it anywhere there and run ``python scripts/offsite.py run``."""
    root = Path(root)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        files = sorted((root / "src" / "numbench").rglob("*.py"))
        files += [root / "scripts" / "offsite.py", root / "scripts" / "_path.py"]
        for path in files:
            _add_bytes(tar, path.relative_to(root).as_posix(), path.read_bytes())
        _add_bytes(tar, plan_name, plan_text.encode())
    _write_bytes_atomic(buf.getvalue(), Path(bundle))


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
    return plan
