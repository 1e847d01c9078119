"""Step 3, here: check an archive and move its cells into ``results/`` as up to date."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from numbench.cells import Cell
from numbench.contract import replacing
from numbench.offsite.archive import JSON_MEMBERS, StagedMember, unpack_archive
from numbench.offsite.common import (
    ARCHIVE_FORMAT,
    COPY_CHUNK_BYTES,
    FORMAT_VERSION,
    OffsiteError,
    canonical,
    code_hash,
    compare_inputs,
    file_sha256,
    inputs_checksums,
    inside,
)
from numbench.offsite.plan import (
    check_operation_code,
    check_plan,
    load_config,
    make_plan,
)
from numbench.offsite.roofs import ROOFS_MEMBER, ROOFS_MEMBERS, merge_into, staged_roofs


# -- step 3: import (here) -----------------------------------------------------------------------
def _json_member(members: dict[str, StagedMember], name: str, archive) -> Any:
    if name not in members:
        raise OffsiteError(f"{archive} lacks {name}: it is not an archive made by `offsite run`")
    try:
        return json.loads(members[name].path.read_bytes())  # at most ARCHIVE_MEMBER_LIMIT_BYTES
    except ValueError as exc:
        raise OffsiteError(f"{archive}: {name} is not readable JSON: {exc}") from None


def _config_differences(here: Any, there: Any, where: str = "") -> list[str]:
    if isinstance(here, dict) and isinstance(there, dict):
        out = []
        for key in sorted(set(here) | set(there), key=str):
            sub = f"{where}.{key}" if where else str(key)
            if key not in here:
                out.append(f"{sub} is {there[key]!r} in the archive's plan and not set here")
            elif key not in there:
                out.append(f"{sub} is {here[key]!r} here and not in the archive's plan")
            else:
                out.extend(_config_differences(here[key], there[key], sub))
        return out
    if here == there:
        return []
    return [f"{where} = {here!r} here, {there!r} in the archive's plan"]


def _made_with(plan: dict) -> str:
    made = plan.get("made_with") or {}
    words = []
    if made.get("configfiles"):
        words.append("--configfile " + " ".join(made["configfiles"]))
    if made.get("config"):
        words.append("--config " + " ".join(made["config"]))
    return " ".join(words) or "no --configfile or --config"


def check_against_config(plan: dict, local: dict) -> None:
    """The archive's plan must be the plan of the config here (same cells, same specs)."""
    if local["plan_hash"] == plan["plan_hash"]:
        return
    diffs = _config_differences(local["config"], plan["config"])
    if diffs:
        shown = "; ".join(diffs[:5]) + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else "")
        raise OffsiteError(
            f"the archive's cells were planned with another config than the one here: {shown}. "
            f"Import with the same --configfile/--config as the plan (it was made with "
            f"{_made_with(plan)})"
        )
    here = {c["path"]: canonical(c["spec"]) for c in local["cells"]}
    there = {c["path"]: canonical(c["spec"]) for c in plan["cells"]}
    only_here, only_there = sorted(set(here) - set(there)), sorted(set(there) - set(here))
    changed = sorted(p for p in set(here) & set(there) if here[p] != there[p])
    raise OffsiteError(
        "the same config makes another grid here than in the archive's plan (the numbench "
        f"sources differ?): {len(only_here)} cells only here {only_here[:3]}, "
        f"{len(only_there)} only in the archive {only_there[:3]}, {len(changed)} with "
        f"another spec {changed[:3]}"
    )


def _check_cell_file(name: str, staged: StagedMember, spec: dict, recorded: dict | None) -> None:
    import pyarrow.parquet as pq

    if not isinstance(recorded, dict):
        raise OffsiteError(f"the archive's manifest does not list {name}")
    if staged.sha256 != recorded.get("sha256"):
        raise OffsiteError(
            f"{name} in the archive does not match its checksum in the manifest: the archive "
            "is corrupt"
        )
    try:
        table = pq.read_table(staged.path)
        row = {k: table.column(k)[0].as_py() for k in ("library", "device", "operation", "size")}
        status = table.column("status")[0].as_py()
        code = table.column("operation_hash")[0].as_py()
    except Exception as exc:  # noqa: BLE001 - any reader error means the cell is unusable
        raise OffsiteError(f"{name} in the archive is not a readable cell file: {exc}") from None
    want = {k: spec[k] for k in row}
    if row != want:
        raise OffsiteError(f"{name} in the archive holds the cell {row}, not {want}")
    if code != spec.get("operation_hash"):
        raise OffsiteError(
            f"{name} in the archive was measured with the operation's code {str(code)[:12]}, "
            f"not the code its plan names ({str(spec.get('operation_hash'))[:12]})"
        )
    if not status:
        raise OffsiteError(f"{name} in the archive has no status")


def import_archive(
    archive: str | os.PathLike,
    root: str | os.PathLike = ".",
    results: str | os.PathLike | None = None,
    configfiles: Iterable[str] = (),
    config_args: Iterable[str] = (),
    force: bool = False,
    say: Callable[[str], None] = print,
) -> dict:
    """Check the archive and bring its cells into ``results`` as if made here; return a
    summary. Nothing under ``results`` or ``logs`` changes unless every check passes, and
    nothing is written anywhere else: every member is checked from its header before any is
    unpacked (``numbench.offsite.archive``), the archive's plan must name exactly the paths
    its cells' identities give (``check_plan``) and the config here must plan the same cells,
    and every destination is derived from a cell's identity (``inside`` guards it again)."""
    root = Path(root)
    results = Path(results) if results is not None else root / "results"
    logs_dir = results.parent / "logs"

    def local_path(name: str) -> Path:
        top, _, rest = name.partition("/")
        return inside(results if top == "results" else logs_dir, rest)

    staging: list[Path] = []

    def make_staging() -> Path:
        """Made only once every member's header has passed; removed whatever happens."""
        staging.append(
            Path(tempfile.mkdtemp(prefix=".offsite-import-", dir=_existing_parent(results)))
        )
        return staging[0] / "archive"

    try:
        members = unpack_archive(archive, make_staging)
        manifest, plan = _check_contents(archive, members)
        expected_cells = {c["path"]: c for c in plan["cells"]}
        recorded_cells = manifest["cells"]

        # the config here must plan the same grid, with the same operations' code
        cfg = load_config(root, configfiles, config_args)
        local = make_plan(cfg)
        check_operation_code(plan, local)
        check_against_config(plan, local)

        # cells here that differ from the archive's are not overwritten without --force
        conflicts = []
        for name in expected_cells:
            dest = local_path(name)
            if dest.exists() and file_sha256(dest) != recorded_cells[name]["sha256"]:
                conflicts.append(name)
        if conflicts and not force:
            raise OffsiteError(
                f"{len(conflicts)} cell files here differ from the archive's (first: "
                f"{conflicts[0]}); refusing to overwrite them: pass --force to replace them"
            )
        made, notes = _check_inputs(plan, manifest, local_path, staging[0] / "inputs", cfg)
        roofs = staged_roofs(members, manifest, plan, archive)  # the cells' host's

        # every check passed: move into place
        for src, dest in made:
            _move(src, dest)
        newest_input = max(
            (local_path(i["path"]).stat().st_mtime_ns for i in plan["inputs"]), default=0
        )
        for name, staged in members.items():
            if name in JSON_MEMBERS or name == ROOFS_MEMBER:
                continue
            dest = local_path(name)
            if not (dest.exists() and file_sha256(dest) == staged.sha256):
                _move(staged.path, dest)
        if roofs is not None:
            merge_into(roofs, manifest.get("host"), local_path(ROOFS_MEMBER))
    finally:
        for folder in staging:
            shutil.rmtree(folder, ignore_errors=True)
    # Snakemake reruns an output older than its inputs: the cells are made newer than every
    # inputs file, as they would be had they been made here.
    stamp = max(time.time_ns(), newest_input + 1_000_000)
    for name in expected_cells:
        os.utime(local_path(name), ns=(stamp, stamp))
    # ... and so are the records of their spread rounds (temporary files, gone, whose records
    # would still name an earlier run's params and make Snakemake remeasure the cell)
    rounds = [
        Cell.from_path(name).round_path(k)
        for name, cell in expected_cells.items()
        for k in range(int(cell["spec"]["replicates"].get("spread", 0)))
    ]
    forgotten = _forget_metadata(
        root,
        results,
        [i["path"] for i in plan["inputs"]]
        + sorted(expected_cells)
        + rounds
        + [ROOFS_MEMBER] * (roofs is not None),
        say,
    )
    for note in notes:
        say(f"note: {note}")
    if manifest.get("code_hash") != code_hash():
        say("note: the cells were measured with numbench sources that differ from the ones here")
    statuses = Counter(recorded_cells[n].get("status") for n in expected_cells)
    summary = {
        "cells": len(expected_cells),
        "statuses": dict(statuses),
        "inputs_made": [str(d) for _, d in made],
        "replaced": conflicts,
        "host": manifest.get("host"),
        "snakemake_records_cleared": forgotten,
    }
    say(
        f"imported {len(expected_cells)} cells from {manifest.get('host')} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}); "
        f"{len(made)} inputs files made here, {len(plan['inputs']) - len(made)} already here"
        + (f"; {len(conflicts)} cell files replaced" if conflicts else "")
    )
    return summary


def _check_contents(archive, members: dict[str, StagedMember]) -> tuple[dict, dict]:
    """(manifest, plan) of an unpacked archive, once it holds exactly its plan's cells and
    their logs, each cell as its manifest records it."""
    manifest = _json_member(members, "manifest.json", archive)
    plan = check_plan(_json_member(members, "plan.json", archive), f"the plan in {archive}")
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != ARCHIVE_FORMAT
        or manifest.get("version") != FORMAT_VERSION
    ):
        raise OffsiteError(f"{archive}: manifest.json is not a numbench offsite manifest")
    if manifest.get("plan_hash") != plan["plan_hash"]:
        raise OffsiteError(
            f"{archive}: the manifest's plan_hash {str(manifest.get('plan_hash'))[:12]} is not "
            f"the plan's {plan['plan_hash'][:12]}: the manifest belongs to another plan"
        )
    if not isinstance(manifest.get("cells"), dict) or not isinstance(
        manifest.get("inputs") or {}, dict
    ):
        raise OffsiteError(f"{archive}: manifest.json lists no cells")
    # the paths of the plan are its cells' own (check_plan): the logs allowed are theirs
    expected_cells = {c["path"]: c for c in plan["cells"]}
    allowed_logs = {c["log"] for c in plan["cells"]} | {i["log"] for i in plan["inputs"]}
    for name in members:
        known = name in JSON_MEMBERS or name in ROOFS_MEMBERS
        if not known and name not in allowed_logs and name not in expected_cells:
            raise OffsiteError(f"{archive}: unexpected member {name!r} (not a cell of its plan)")
    missing = sorted(set(expected_cells) - set(members))
    if missing:
        raise OffsiteError(
            f"{archive} lacks {len(missing)} of its plan's {len(expected_cells)} cells "
            f"(first: {missing[0]}): was the run interrupted? Finish it with `offsite run "
            "--resume`"
        )
    for name, entry in expected_cells.items():
        _check_cell_file(name, members[name], entry["spec"], manifest["cells"].get(name))
    return manifest, plan


def _check_inputs(
    plan: dict, manifest: dict, local_path: Callable[[str], Path], staging: Path, cfg: dict
) -> tuple[list[tuple[Path, Path]], list[str]]:
    """The inputs: present here, or made (in ``staging``) with the plan's seed and the
    operation as the config here names it, and the very arrays the cells were measured on.
    Returns ([(made, destination)], notes)."""
    from numbench.config import operation_file, operation_hash
    from numbench.errors import CorruptFile
    from numbench.measure import inputs as inputs_file

    recorded_inputs = manifest.get("inputs") or {}
    made: list[tuple[Path, Path]] = []
    notes: list[str] = []
    for item in plan["inputs"]:
        dest = local_path(item["path"])
        entry = recorded_inputs.get(item["path"])
        recorded = entry.get("arrays") if isinstance(entry, dict) else None
        if not isinstance(recorded, dict) or not recorded:
            raise OffsiteError(f"the archive's manifest has no checksums of {item['path']}")
        if dest.exists():
            source, check_path = "the inputs file here", dest
        else:
            check_path = inside(staging, item["path"])
            op = item["operation"]
            inputs_file.write(
                op,
                item["size"],
                item["seed"],
                check_path,
                item["params"],
                operation_file(cfg, op),
                operation_hash(cfg, op),
            )
            source = "the inputs file made here with the same seed"
            made.append((check_path, dest))
        try:
            here = inputs_checksums(check_path)
        except CorruptFile as exc:
            raise OffsiteError(str(exc)) from None
        try:
            problems, ref_notes = compare_inputs(here, recorded)
        except (KeyError, TypeError, AttributeError):
            raise OffsiteError(
                f"the archive's manifest records the arrays of {item['path']} in a form this "
                "numbench does not read"
            ) from None
        if problems:
            raise OffsiteError(
                f"{item['path']}: {source} differs from the one the cells were measured on "
                f"({'; '.join(problems[:3])}). The cells cannot be compared with it"
            )
        notes.extend(f"{item['path']}: {n}" for n in ref_notes)
    return made, notes


def _move(src: Path, dest: Path) -> None:
    """Move a checked file from the staging folder to its place: a rename where both lie on
    one file system, else a copy beside ``dest`` renamed over it (whole or not at all)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    with replacing(dest) as tmp, open(src, "rb") as source, open(tmp, "wb") as out:
        shutil.copyfileobj(source, out, COPY_CHUNK_BYTES)


def _existing_parent(path: Path) -> Path:
    """The folder for the staging area: ``path`` itself when it exists (same file system as
    the destination, so moving is a rename), else its nearest existing parent."""
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def _forget_metadata(root: Path, results: Path, paths: list[str], say) -> bool:
    """Drop what Snakemake recorded about ``paths`` in an earlier run here.

    Snakemake reruns a job whose output has a record (``.snakemake/metadata``) made with
    other params, or a mark that it was left incomplete; an output without a record is judged
    by its modification time alone. So the records of the imported files go, through
    Snakemake's own ``--cleanup-metadata``. Nothing to do where Snakemake never ran."""
    if not (root / ".snakemake").is_dir() or results.resolve() != (root / "results").resolve():
        return False
    cmd = [sys.executable, "-m", "snakemake", "--cleanup-metadata", *paths, "--cores", "1"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        say(
            "warning: could not clear Snakemake's records of the imported files "
            f"({proc.stderr.strip().splitlines()[-1:] or proc.returncode}); run "
            "`snakemake --cleanup-metadata results/cells/... --cores 1` before the next run"
        )
        return False
    return True
