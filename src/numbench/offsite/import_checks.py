"""Step 3's checks, here: an unpacked archive holds exactly its plan's cells, each as its
manifest records it; its plan is the plan of the config here; and the inputs files here (or
made here with the plan's seed) hold the very arrays the cells were measured on.

``numbench.offsite.importer`` runs them all before it moves anything into place; each
refusal is an ``OffsiteError`` that names what differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numbench.offsite.archive import JSON_MEMBERS, StagedMember
from numbench.offsite.common import (
    ARCHIVE_FORMAT,
    FORMAT_VERSION,
    OffsiteError,
    canonical,
    checked_inputs_checksums,
    compare_inputs,
    inside,
    write_inputs_file,
)
from numbench.offsite.plan import check_plan
from numbench.roofline.offsite import ROOFS_MEMBERS


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


def check_contents(
    archive, members: dict[str, StagedMember], partial: bool = False
) -> tuple[dict, dict]:
    """(manifest, plan) of an unpacked archive, once it holds exactly its plan's cells and
    their logs, each cell as its manifest records it. With ``partial``, a part of a run that
    stopped at its time budget (``numbench.offsite.parts``) passes too: it holds some of its
    plan's cells, exactly those its manifest lists, each checked alike."""
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
    strangers = sorted(set(manifest["cells"]) - set(expected_cells))
    if strangers:
        raise OffsiteError(
            f"{archive}: its manifest lists {len(strangers)} cells its plan does not have "
            f"(first: {str(strangers[0])[:200]!r})"
        )
    wanted = set(manifest["cells"]) if partial else set(expected_cells)
    missing = sorted(wanted - set(members))
    if missing:
        raise OffsiteError(
            f"{archive} lacks {len(missing)} of its plan's {len(expected_cells)} cells "
            f"(first: {missing[0]})"
            + (
                ", which its manifest lists: the archive is damaged"
                if partial
                else ": was the run interrupted? Finish it with `offsite run --resume`, or "
                "go on with `offsite run --resume-from` and import every part"
            )
        )
    for name, entry in expected_cells.items():
        if name in members:
            _check_cell_file(name, members[name], entry["spec"], manifest["cells"].get(name))
    return manifest, plan


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
