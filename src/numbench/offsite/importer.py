"""Step 3, here: check an archive and move its cells into ``results/`` as up to date.

``import_archive`` orders the checks, stages the archive, moves what passed into place, and
makes Snakemake take it as made here. The archive is read back as ``run --resume-from``
reads a part (``numbench.offsite.parts.read_part``: its members, then its contents against
its manifest and plan, ``numbench.offsite.archive``); the checks against this host are here:
its plan is the plan of the config here, with the same operations' code and data files
(``check_against_config``), and the inputs files here (or made here with the plan's seed)
hold the very arrays the cells were measured on (``check_inputs``). Each refusal is an
``OffsiteError`` that names what differs; nothing moves into place before every check has
passed.
Where the archive's host has this machine's name but not its fingerprint, the import warns
(``numbench.offsite.common.warn_if_same_name``).
"""

from __future__ import annotations

import errno
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
from numbench.offsite.archive import JSON_MEMBERS, StagedMember
from numbench.offsite.common import (
    COPY_CHUNK_BYTES,
    ROOFS_MEMBER,
    OffsiteError,
    canonical,
    checked_inputs_checksums,
    code_hash,
    compare_inputs,
    destinations_here,
    file_sha256,
    inside,
    merge_into,
    staged_roofs,
    warn_if_same_name,
    write_inputs_file,
)
from numbench.offsite.parts import joined, read_part
from numbench.offsite.plan import check_data_here, check_operation_code, load_config, make_plan
from numbench.spec import STORED_NAMES


def import_archive(
    archive: str | os.PathLike | Iterable[str | os.PathLike],
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
    and every destination is derived from a cell's identity (``inside`` guards it again).

    ``archive`` may be several: the parts of one plan's run over several leases
    (``numbench.offsite.parts``), each checked alike, together holding every cell."""
    archives = [archive] if isinstance(archive, str | os.PathLike) else list(archive)
    root = Path(root)
    results = Path(results) if results is not None else root / "results"
    local_path = _destinations(results)
    staging: list[Path] = []

    def make_staging() -> Path:
        """Made only once every member's header has passed; removed whatever happens."""
        staging.append(
            Path(tempfile.mkdtemp(prefix=".offsite-import-", dir=_existing_parent(results)))
        )
        return staging[-1] / "archive"

    try:
        parts = [read_part(a, make_staging) for a in archives]
        plan, manifest, members, roofs_part = joined(parts)
        cfg = _check_same_grid(plan, root, configfiles, config_args)
        conflicts = _conflicts(plan, manifest, local_path, force)
        made, notes = check_inputs(plan, manifest, local_path, staging[0] / "inputs", cfg)
        roofs = (  # the host's that measured them
            None
            if roofs_part is None
            else staged_roofs(roofs_part.members, roofs_part.manifest, plan, roofs_part.archive)
        )
        # every check passed: move into place
        newest_input = _move_into_place(made, members, plan, local_path)
        roof_files = destinations_here(cfg) if roofs is not None else []
        for name in roof_files:
            merge_into(roofs, roofs_part.host, local_path(name))
    finally:
        for folder in staging:
            shutil.rmtree(folder, ignore_errors=True)
    _stamp_imported(plan, local_path, newest_input, roof_files)
    for part in parts:
        warn_if_same_name(part.host, (local_path(c) for c in part.cells), say)
    forgotten = _forget_metadata(root, results, _imported_paths(plan, roof_files), say)
    for note in notes:
        say(f"note: {note}")
    if any(p.manifest.get("code_hash") != code_hash() for p in parts):
        say("note: the cells were measured with numbench sources that differ from the ones here")
    hosts = sorted({str(p.host) for p in parts})
    if len(hosts) > 1:
        say(
            f"warning: the parts were measured on hosts named {', '.join(hosts)}: the tables "
            "pair a cell with its baseline on one host name only"
        )
    return _summary(plan, {**manifest, "host": ", ".join(hosts)}, made, conflicts, forgotten, say)


def _destinations(results: Path) -> Callable[[str], Path]:
    """The place here of an archive's member: ``results/...`` under ``results``, ``logs/...``
    under the logs folder beside it (``inside`` guards each)."""
    logs_dir = results.parent / "logs"

    def local_path(name: str) -> Path:
        top, _, rest = name.partition("/")
        return inside(results if top == "results" else logs_dir, rest)

    return local_path


def _check_same_grid(plan: dict, root: Path, configfiles, config_args) -> dict:
    """The config here, once it plans the same grid as the archive's plan, with the same
    operations' code and data files (``check_operation_code``, ``check_data_here``,
    ``check_against_config``)."""
    cfg = load_config(root, configfiles, config_args)
    local = make_plan(cfg)
    check_operation_code(plan, local)
    check_data_here(plan, local, cfg)
    check_against_config(plan, local)
    return cfg


def _conflicts(
    plan: dict, manifest: dict, local_path: Callable[[str], Path], force: bool
) -> list[str]:
    """The cell files here that differ from the archive's: refused unless ``force`` says to
    replace them (then returned, to be said in the summary)."""
    conflicts = []
    for entry in plan["cells"]:
        name = entry["path"]
        dest = local_path(name)
        if dest.exists() and file_sha256(dest) != manifest["cells"][name]["sha256"]:
            conflicts.append(name)
    if conflicts and not force:
        raise OffsiteError(
            f"{len(conflicts)} cell files here differ from the archive's (first: "
            f"{conflicts[0]}); refusing to overwrite them: pass --force to replace them"
        )
    return conflicts


def _move_into_place(
    made: list[tuple[Path, Path]],
    members: dict[str, StagedMember],
    plan: dict,
    local_path: Callable[[str], Path],
) -> int:
    """Move the inputs files made here, then every checked member (but the manifest, the
    plan and the roofs, which are merged instead) that is not already here as it is, into
    place. Returns the newest modification time of the plan's inputs files (ns)."""
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
    return newest_input


#: between the stamps of the inputs, the cells and each roofs file (ns)
STAMP_STEP_NS = 1_000_000


def _stamp_imported(
    plan: dict, local_path: Callable[[str], Path], newest_input: int, roof_files: list[str]
) -> None:
    """Date the imported files as they would be had they been made here, since Snakemake
    reruns an output older than its inputs: the cells after every inputs file, then the
    roofs files merged here after the cells, in ``roof_files``' order (the start's file,
    then results/roofs.parquet, whose rule ``roofs_at_end`` reads it and the cells). Roofs
    older than the cells would make the next run measure this host's roofs and merge them
    over the imported host's."""
    stamp = max(time.time_ns(), newest_input + STAMP_STEP_NS)
    for entry in plan["cells"]:
        os.utime(local_path(entry["path"]), ns=(stamp, stamp))
    for n, name in enumerate(roof_files, start=1):
        later = stamp + n * STAMP_STEP_NS
        os.utime(local_path(name), ns=(later, later))


def _imported_paths(plan: dict, roof_files: list[str]) -> list[str]:
    """Every file the import stands for, whose records Snakemake must forget: the inputs
    files, the cells, the roofs, and the records of the cells' early rounds (temporary
    files, gone, whose records would still name an earlier run's params and make Snakemake
    remeasure the cell)."""
    cells = {c["path"]: c for c in plan["cells"]}
    rounds = [
        Cell.from_path(name).round_path(k)
        for name, cell in cells.items()
        for k in range(int(cell["spec"]["replicates"].get(STORED_NAMES["early_rounds"], 0)))
    ]
    return [i["path"] for i in plan["inputs"]] + sorted(cells) + rounds + roof_files


def _summary(
    plan: dict,
    manifest: dict,
    made: list[tuple[Path, Path]],
    conflicts: list[str],
    forgotten: bool,
    say: Callable[[str], None],
) -> dict:
    """What the import did, returned and said in one line."""
    names = [c["path"] for c in plan["cells"]]
    statuses = Counter(manifest["cells"][n].get("status") for n in names)
    summary = {
        "cells": len(names),
        "statuses": dict(statuses),
        "inputs_made": [str(d) for _, d in made],
        "replaced": conflicts,
        "host": manifest.get("host"),
        "snakemake_records_cleared": forgotten,
    }
    say(
        f"imported {len(names)} cells from {manifest.get('host')} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}); "
        f"{len(made)} inputs files made here, {len(plan['inputs']) - len(made)} already here"
        + (f"; {len(conflicts)} cell files replaced" if conflicts else "")
    )
    return summary


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


# -- the checks against this host: the config, the inputs files -----------------------------------
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


def _refusal_hint(item: dict, made_here: bool) -> str:
    """What to do where an inputs file differs from the one the cells ran on: a file already
    here may be an older one; one made here from a data file has no maker to blame; one
    drawn here with the plan's seed points at its operation's make_inputs."""
    if not made_here:
        return (
            ". It may have been made by an older numbench or operation: move it away and "
            "import again, and the inputs are made anew"
        )
    return "" if item.get("data") else _maker_hint(item["operation"])


def _maker_hint(operation: str) -> str:
    """The likely cause where drawn inputs differ between two hosts, and the two remedies."""
    return (
        f". Likely cause, where it was drawn with the plan's seed: {operation}'s make_inputs "
        "computes with arithmetic whose rounding differs across CPUs, BLAS libraries or "
        "NumPy versions (a matrix product, a reduction such as a sum), so the same seed "
        "gives other bits on another host (or on another CPU architecture: NumPy's Arm builds "
        "fuse a multiply-add in its uniform and normal draws). "
        "Remedies: compute the inputs with fixed-order elementwise arithmetic (each step one "
        "array operation, as x[:, j] * w[j] added column by column), or give them as data "
        f"files (operations.{operation}.inputs, carried in the bundle)"
    )


def check_inputs(
    plan: dict, manifest: dict, local_path: Callable[[str], Path], staging: Path, cfg: dict
) -> tuple[list[tuple[Path, Path]], list[str]]:
    """The inputs: present here, or made (in ``staging``) with the plan's seed and the
    operation as the config here names it (read from the config's data file where the plan
    has ``data``, a file ``check_data_here`` found to hash as planned), and the very arrays
    the cells were measured on. Returns ([(made, destination)], notes)."""
    from numbench.config import operation_file, operation_hash, operation_inputs_from

    recorded_inputs = manifest.get("inputs") or {}
    made: list[tuple[Path, Path]] = []
    notes: list[str] = []
    for item in plan["inputs"]:
        dest = local_path(item["path"])
        entry = recorded_inputs.get(item["path"])
        recorded = entry.get("arrays") if isinstance(entry, dict) else None
        if not isinstance(recorded, dict) or not recorded:
            raise OffsiteError(f"the archive's manifest has no checksums of {item['path']}")
        dest_existed = dest.exists()
        if dest_existed:
            source, check_path = "the inputs file here", dest
        else:
            check_path = inside(staging, item["path"])
            op = item["operation"]
            write_inputs_file(
                item,
                check_path,
                operation_file(cfg, op),
                operation_hash(cfg, op),
                operation_inputs_from(cfg, op),
            )
            source = "the inputs file made here " + (
                "from the config's data file" if item.get("data") else "with the same seed"
            )
            made.append((check_path, dest))
        here = checked_inputs_checksums(check_path)
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
                + _refusal_hint(item, made_here=not dest_existed)
            )
        notes.extend(f"{item['path']}: {n}" for n in ref_notes)
    return made, notes
