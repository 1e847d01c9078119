"""A plan run over several leases of a host: stop at a time budget, go on on a fresh machine.

A host lent for minutes at a time, a fresh machine each time (a GPU host, say), cannot run a
long plan whole, nor keep a work folder from one lease to the next. So:

* ``offsite run --stop-after-s S`` begins no cell (nor a round run ahead of the cells,
  ``replicates``' first rounds) once ``S`` seconds have passed since it started, nor one
  that would end past them if it took as long as the longest of its kind so far
  (``Budget``), nor the roofs; it then packs what it measured into a *part*: an archive like
  any other, whose manifest's ``part`` says whether the plan is complete and how many of its
  cells are left. Under a budget the cells run in batches (``--batch``): the rounds a batch
  runs ahead of its cells, then its cells, so that a stop loses at most those of one batch
  (a round file stays in the work folder, where ``--resume`` on the same machine keeps it,
  and never travels). The rounds of a cell then lie apart by a batch's time, not the whole
  run's.
* ``offsite run --resume-from PART ...`` (every earlier part, copied over) reads the parts as
  ``import`` reads an archive (``read_part``: every member checked from its header before any
  is unpacked, ``numbench.offsite.archive``; each cell as its manifest records it), refuses a
  part of another plan, and measures only the cells no part holds. The inputs files it makes
  must hold the arrays the parts' cells were measured on, or it stops before measuring.
  Its own archive is the next part: the cells it measured, not the earlier ones.
* ``offsite import PART ...`` takes every part (``joined``): one plan, no cell twice with
  other contents, and together every cell of the plan.
"""

from __future__ import annotations

import math
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from numbench.offsite.archive import JSON_MEMBERS, StagedMember, check_contents, unpack_archive
from numbench.offsite.common import (
    ROOFS_MEMBERS,
    OffsiteError,
    compare_inputs,
    describe,
    differences,
    file_sha256,
    fingerprint_here,
    fingerprint_of_cells,
)

#: the cells a batch holds under a time budget, unless ``--batch`` says otherwise
DEFAULT_BATCH = 16


class Budget:
    """The time a run may begin new work in. ``allows(kind)`` is False once ``seconds`` have
    passed since the start, or when the longest piece of that kind so far (``note``) would
    end past them; once it has said False it says so for good, so that a run that stopped
    for a long cell does not go on with short ones. No ``seconds``: no limit.

    Rounds run ahead of their cells ask ``allows_ahead(owed)`` instead: ``owed`` is what the
    cells of the rounds already run will still take, so that a batch's rounds stop while
    there is time left to measure their cells. Rounds stopped so stay stopped (no later batch
    begins), but the cells already begun on may still be measured."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic):
        if seconds is not None and not (
            isinstance(seconds, int | float) and math.isfinite(seconds) and seconds > 0
        ):
            raise OffsiteError(f"--stop-after-s must be a number of seconds above 0, not {seconds}")
        self.seconds, self._clock = seconds, clock
        self._start = clock()
        self._longest: dict[str, float] = {}
        self.stopped = False
        self.rounds_stopped = False

    def elapsed(self) -> float:
        return self._clock() - self._start

    def allows(self, kind: str) -> bool:
        if self.seconds is not None and not self.stopped:
            self.stopped = self.elapsed() + self._longest.get(kind, 0.0) > self.seconds
        return not self.stopped

    def allows_ahead(self, owed: float) -> bool:
        if self.seconds is not None and not (self.stopped or self.rounds_stopped):
            ends = self.elapsed() + self._longest.get("round", 0.0) + owed
            self.rounds_stopped = ends > self.seconds
        return not (self.stopped or self.rounds_stopped)

    def note(self, kind: str, seconds: float) -> None:
        self._longest[kind] = max(self._longest.get(kind, 0.0), seconds)


def checked_batch(batch: int | None, stop_after_s: float | None) -> int | None:
    """The cells a batch holds: ``batch``, or ``DEFAULT_BATCH`` under a time budget, or all
    at once (None) without one."""
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise OffsiteError(f"--batch must be a whole number of cells, at least 1, not {batch}")
    return batch if batch is not None or stop_after_s is None else DEFAULT_BATCH


def batches(items: list, size: int | None) -> list[list]:
    """``items`` in runs of ``size`` (all at once where ``size`` is None)."""
    step = size or max(len(items), 1)
    return [items[start : start + step] for start in range(0, len(items), step)]


@dataclass
class Part:
    """An archive of ``offsite run``, unpacked and checked: a whole run's or a part's."""

    archive: str
    members: dict[str, StagedMember]
    manifest: dict
    plan: dict

    @property
    def cells(self) -> list[str]:
        return sorted(self.manifest["cells"])

    @property
    def host(self):
        return self.manifest.get("host")


def read_part(archive, make_staging: Callable[[], Path]) -> Part:
    """Unpack ``archive`` under ``make_staging()`` (``unpack_archive``: headers first) and
    check it as a part (``check_contents(partial=True)``)."""
    members = unpack_archive(archive, make_staging)
    manifest, plan = check_contents(archive, members, partial=True)
    return Part(str(archive), members, manifest, plan)


def _check_same_plan(part: Part, plan_hash: str, plan_is: str) -> None:
    if part.plan["plan_hash"] != plan_hash:
        raise OffsiteError(
            f"{part.archive} holds cells of another plan ({part.plan['plan_hash'][:12]}; "
            f"{plan_is} {plan_hash[:12]}): only the parts of one plan's runs go together"
        )


def _join_inputs(parts: list[Part]) -> dict:
    """Every inputs file's recorded arrays, once every part that made it agrees on them: the
    cells of all parts must have been measured on the same arrays."""
    joined: dict[str, tuple[str, dict]] = {}
    for part in parts:
        for path, entry in (part.manifest.get("inputs") or {}).items():
            if path not in joined:
                joined[path] = (part.archive, entry)
                continue
            first, earlier = joined[path]
            try:
                problems, _ = compare_inputs(entry["arrays"], earlier["arrays"])
            except (KeyError, TypeError, AttributeError):
                problems = ["its arrays are recorded in a form this numbench does not read"]
            if problems:
                raise OffsiteError(
                    f"{path} differs between {first} and {part.archive} "
                    f"({'; '.join(problems[:2])}): the parts' cells were not measured on the "
                    "same inputs, so they cannot be compared"
                )
    return {path: entry for path, (_, entry) in joined.items()}


def _join_cells(parts: list[Part]) -> tuple[dict, dict]:
    """(manifest entries, staged members) of every cell and log of the parts: a cell two
    parts hold must be the same file; a log, the last part's."""
    entries: dict[str, dict] = {}
    members: dict[str, StagedMember] = {}
    came_from: dict[str, str] = {}
    for part in parts:
        for name in part.cells:
            entry = part.manifest["cells"][name]
            if name in entries and entries[name].get("sha256") != entry.get("sha256"):
                raise OffsiteError(
                    f"{name} was measured twice, in {came_from[name]} and in {part.archive}, "
                    "with other results: import the parts of one chain of runs (each run "
                    "--resume-from the parts before it), not two runs of the plan"
                )
            entries[name], came_from[name] = entry, part.archive
        for name, staged in part.members.items():
            if name not in JSON_MEMBERS and name not in ROOFS_MEMBERS:
                members[name] = staged
    return entries, members


def joined(parts: list[Part]) -> tuple[dict, dict, dict, Part | None]:
    """(plan, manifest, members, the part with the roofs) of the parts together, once they
    are of one plan and hold every cell of it; the manifest is the last part's with the
    cells and inputs of all of them."""
    plan = parts[0].plan
    for part in parts[1:]:
        _check_same_plan(part, plan["plan_hash"], f"{parts[0].archive}'s is")
    cells, members = _join_cells(parts)
    missing = [c["path"] for c in plan["cells"] if c["path"] not in cells]
    if missing:
        which = parts[0].archive if len(parts) == 1 else f"the {len(parts)} archives"
        raise OffsiteError(
            f"{which} hold{'s' if len(parts) == 1 else ''} {len(cells)} of the plan's "
            f"{len(plan['cells'])} cells (first missing: {missing[0]}): its runs stopped "
            "before the end. Go on with `offsite run PLAN --resume-from` every part, then "
            "import every part together"
        )
    roofs_part = next((p for p in reversed(parts) if ROOFS_MEMBERS[0] in p.members), None)
    if roofs_part is not None:
        for name in ROOFS_MEMBERS:
            if name in roofs_part.members:
                members[name] = roofs_part.members[name]
    manifest = {**parts[-1].manifest, "cells": cells, "inputs": _join_inputs(parts)}
    return plan, manifest, members, roofs_part


@dataclass
class Earlier:
    """What the earlier parts of a run bring to the next: their cells, their inputs files'
    arrays, whether they measured the roofs, and a line for the manifest on each."""

    cells: dict[str, dict] = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    roofs: bool = False
    parts: list[dict] = field(default_factory=list)

    def check_inputs(self, made: dict) -> None:
        """Refuse inputs files made here whose arrays differ from the earlier parts'."""
        for path, entry in made.items():
            recorded = self.inputs.get(path)
            if recorded is None:
                continue
            problems, _ = compare_inputs(entry["arrays"], recorded["arrays"])
            if problems:
                raise OffsiteError(
                    f"{path}: the inputs file made on this host differs from the one the "
                    f"earlier parts' cells were measured on ({'; '.join(problems[:2])}); "
                    "nothing was measured. Run the rest where the inputs come out the same "
                    "(the same CPU architecture and NumPy), or give them as data files"
                )


def read_earlier(
    archives: Iterable, plan: dict, output: Path, say: Callable[[str], None]
) -> Earlier:
    """The earlier parts of a run of ``plan``, each checked (``read_part``) in a staging
    folder beside ``output`` (the new part, which none of them may be) removed at once."""
    archives = list(archives)
    if not archives:
        return Earlier()
    if any(Path(part).resolve() == Path(output).resolve() for part in archives):
        raise OffsiteError(f"--output {output} is one of the --resume-from parts: name a new one")
    with tempfile.TemporaryDirectory(prefix=".numbench-resume-", dir=output.parent) as tmp:
        parts = []
        for n, archive in enumerate(archives):
            part = read_part(archive, lambda n=n: Path(tmp, str(n)))
            _check_same_plan(part, plan["plan_hash"], "this plan is")
            parts.append(part)
        cells, _ = _join_cells(parts)
        earlier = Earlier(
            cells=cells,
            inputs=_join_inputs(parts),
            roofs=any(ROOFS_MEMBERS[0] in p.members for p in parts),
            parts=[
                {
                    "archive": Path(p.archive).name,
                    "sha256": file_sha256(p.archive),
                    "cells": len(p.cells),
                    "host": p.host,
                }
                for p in parts
            ],
        )
        _warn_other_machine(parts, say)
    say(
        f"resuming from {len(parts)} earlier part(s): {len(cells)} of the plan's "
        f"{len(plan['cells'])} cells measured there"
    )
    return earlier


def _warn_other_machine(parts: list[Part], say: Callable[[str], None]) -> None:
    """Say where an earlier part was measured on a host of another name, or another machine
    of this name: the tables pair a cell with its baseline on one host name."""

    here = socket.gethostname()
    for part in parts:
        if part.host != here:
            say(
                f"warning: {part.archive} was measured on host {part.host!r}, this one is "
                f"{here!r}: the tables pair a cell with its baseline on one host name only"
            )
            continue
        cells = [part.members[name].path for name in part.cells]
        there = fingerprint_of_cells(cells)
        if differences(there, fingerprint_here()):
            say(
                f"warning: {part.archive} was measured on another machine named {here!r} "
                f"({describe(there)}); the tables will take both as one host"
            )
