"""The roofs of the host where an offsite plan runs: measured there, carried in the archive,
and merged here into results/roofs.parquet, so that the cells measured there are placed on
that host's roofline (a GPU's among them: its device memory, FMA peak and transfers).

* ``offsite run`` measures the roofs of every (device, dtype, threads) of its plan's cells,
  under the host's timing lock like the cells, with the plan's libraries, allocator and
  ``replicates.max_cpu_taken``, once, after the cells (its rows' ``round`` is ``end``): an
  offsite run does not measure them before its cells too, whatever ``roofs_at_end`` says,
  so its roofs have no spread across the run; with ``--resume`` a readable roofs file of
  the same plan is kept.
* The archive carries them as ``ROOFS_MEMBER`` (and their log as ``ROOFS_LOG``), with their
  size and checksum in the manifest.
* ``offsite import`` reads them as a roofs table (``numbench.roofline.contract.read_roofs``
  refuses anything else), checks that every row is of the archive's host and of a
  (device, dtype, threads) of the plan, and merges them into results/roofs.parquet: the
  rows of that host are replaced, every other host's kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from numbench.offsite.common import OffsiteError, cell_of, file_sha256

ROOFS_MEMBER = "results/roofs.parquet"
#: where the workflow's rule roofs writes the start's rows when the config measures the roofs
#: again at the end (``roofs_at_end``; workflow/rules/common.smk): an import merges the
#: archive's roofs there too and dates both files after the cells
#: (``numbench.offsite.importer``), so the next run here finds them newer than the cells and
#: measures no roofs of its own over the imported ones
ROOFS_START_FILE = "results/roofs_start.parquet"
ROOFS_LOG = "logs/roofs.log"
ROOFS_MEMBERS = (ROOFS_MEMBER, ROOFS_LOG)


def plan_dims(plan: dict, what: str) -> list[tuple[str, str, int]]:
    """The (device, dtype, threads) of the plan's cells, each once."""
    from numbench.cells import roof_dims

    return roof_dims(cell_of(entry["spec"], what) for entry in plan["cells"])


def measure_there(plan: dict, work: Path, resume: bool, say: Callable[[str], None]) -> dict:
    """Measure the plan's roofs into ``work``/``ROOFS_MEMBER`` (its output in ``ROOFS_LOG``)
    and return the manifest's entry for them."""
    import contextlib

    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs
    from numbench.roofline.measure import measure_roofs

    path, log = work / ROOFS_MEMBER, work / ROOFS_LOG
    kept = False
    if resume and path.exists():
        with contextlib.suppress(CorruptFile):
            read_roofs(path)
            kept = True
    if not kept:
        config = plan["config"]
        path.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as out:

            def tell(line: str) -> None:
                print(line, file=out, flush=True)

            measure_roofs(
                plan_dims(plan, "the plan"),
                list(config["libraries"]),
                config["allocator"],
                path,
                say=tell,
                max_cpu_taken=config["replicates"].get("max_cpu_taken"),
                round_name="end",
            )
    say(f"roofs {ROOFS_MEMBER}  {'kept' if kept else 'measured'}")
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def staged_roofs(members: dict, manifest: dict, plan: dict, archive) -> pa.Table | None:
    """The archive's roofs, checked (``check_staged``), or None where it has none (an
    archive of an older numbench: its cells get no place on a roofline)."""
    if ROOFS_MEMBER not in members:
        return None
    recorded, host = manifest.get("roofs"), manifest.get("host")
    return check_staged(members[ROOFS_MEMBER].path, recorded, plan, host, archive)


def check_staged(staged_path: Path, recorded: dict | None, plan: dict, host, archive) -> pa.Table:
    """The archive's roofs, once they are a roofs table of the archive's host and of the
    plan's (device, dtype, threads), as the manifest records them."""
    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs

    if not isinstance(recorded, dict) or recorded.get("sha256") != file_sha256(staged_path):
        raise OffsiteError(f"{archive}: {ROOFS_MEMBER} is not the file its manifest records")
    try:
        table = read_roofs(staged_path)
    except CorruptFile:
        raise OffsiteError(f"{archive}: {ROOFS_MEMBER} is not a readable roofs table") from None
    hosts = set(table.column("host").to_pylist())
    if hosts - {host}:
        raise OffsiteError(
            f"{archive}: {ROOFS_MEMBER} holds roofs of hosts other than the archive's "
            f"({sorted(map(str, hosts - {host}))[:3]})"
        )
    dims = set(plan_dims(plan, f"the plan in {archive}"))
    rows = zip(*(table.column(c).to_pylist() for c in ("device", "dtype", "threads")), strict=True)
    strangers = {(d, t, int(n)) for d, t, n in rows} - dims
    if strangers:
        raise OffsiteError(
            f"{archive}: {ROOFS_MEMBER} holds roofs its plan does not ask for: {sorted(strangers)}"
        )
    return table


def destinations_here(cfg: dict) -> list[str]:
    """The roofs files of the workflow here that an import merges into: the start's first
    (where the config measures the roofs again at the end), then results/roofs.parquet, so
    that the latter is the newest."""
    at_end = cfg.get("roofs", True) and cfg.get("roofs_at_end", True)
    return [ROOFS_START_FILE, ROOFS_MEMBER] if at_end else [ROOFS_MEMBER]


def merge_into(table: pa.Table, host, destination: str | os.PathLike) -> None:
    """Write ``table`` (one host's roofs) into ``destination``: that host's rows replaced,
    every other host's kept (a roofs file here that cannot be read is replaced whole)."""
    from numbench.contract import write_atomic
    from numbench.errors import CorruptFile
    from numbench.roofline.contract import read_roofs

    destination = Path(destination)
    parts = [table]
    if destination.exists():
        try:
            here = read_roofs(destination)
        except CorruptFile:
            here = None
        if here is not None:
            import pyarrow.compute as pc

            others = here.filter(pc.invert(pc.equal(here.column("host"), host)))
            parts.insert(0, others)
    write_atomic(pa.concat_tables(parts), destination)
