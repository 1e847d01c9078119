"""Step 2's measuring, on the other host: the inputs files made, then the early rounds, then
the cells, each with its log where the workflow keeps it, as the workflow would make them.

``numbench.offsite.run`` calls these inside the work folder, with the paths it derived from
the plan's identities; what each returns becomes the manifest's ``inputs`` and ``cells``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numbench.offsite.common import (
    OffsiteError,
    checked_inputs_checksums,
    sha256,
    write_inputs_file,
)


@contextlib.contextmanager
def _output_to(path: Path, append: bool = False):
    """Send this process's stdout and stderr, and so the cell worker's, to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def _cell_status(path: Path) -> tuple[str, str | None] | None:
    """(status, error) of a cell file an earlier run left; None when it cannot be read."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["status", "error"])
        return str(table.column("status")[0]), table.column("error")[0].as_py()
    except Exception:  # noqa: BLE001 - unreadable: the cell is measured again
        return None


@contextlib.contextmanager
def _fault_of(cell, fault: type[Exception]):
    """A fault of numbench's machinery or of this host while measuring ``cell`` (the timing
    lock, a full disk, a worker that cannot start) stops the run with the cell named: it is
    no outcome of the library, so it is written nowhere, and ``--resume`` measures it again."""
    try:
        yield
    except fault as exc:
        raise OffsiteError(
            f"{cell.path}: {exc} (log: {cell.log}); this is a fault of numbench or of this "
            "host, not of the library: fix it and run again with --resume"
        ) from None


def _intact(path: Path) -> bool:
    """Whether an inputs file an earlier run left passes its check, to be kept."""
    from numbench.errors import CorruptFile
    from numbench.measure import inputs

    try:
        inputs.check(path)
    except CorruptFile:
        return False
    return True


def make_inputs(
    inputs: list[tuple[dict, str, str]],
    operation_files: dict[str, str],
    data: dict[str, str],
    work: Path,
    resume: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Make every inputs file of the plan (``inputs``: [(entry, file, log)]), each with its
    log, its inputs read from its data file where ``data`` names one (by inputs file: the
    bundle's copy, checked); with ``resume``, one already made and intact is kept. Returns
    the manifest's ``inputs``: per file, its size and its arrays' checksums, which ``import``
    compares with the inputs files here."""
    made: dict[str, Any] = {}
    for i, (item, inputs_path, inputs_log) in enumerate(inputs, 1):
        path = Path(inputs_path)
        t0 = time.perf_counter()
        state = "kept"
        if not (resume and path.exists() and _intact(path)):
            state = "made"
            try:
                with _output_to(Path(inputs_log)):
                    write_inputs_file(
                        item,
                        path,
                        operation_files.get(item["operation"]),
                        item.get("operation_hash"),
                        data.get(inputs_path),
                    )
                    read = f" from {data[inputs_path]}" if inputs_path in data else ""
                    print(f"inputs: {item['operation']} n={item['size']} seed={item['seed']}{read}")
            except Exception as exc:  # noqa: BLE001 - named, with the log to read
                raise OffsiteError(
                    f"cannot make {inputs_path}: {type(exc).__name__}: {exc} "
                    f"(log: {work / inputs_log})"
                ) from None
        checks = checked_inputs_checksums(path)
        made[inputs_path] = {"bytes": path.stat().st_size, "arrays": checks}
        say(f"inputs [{i}/{len(inputs)}] {inputs_path}  {state}  {time.perf_counter() - t0:.1f} s")
    return made


def run_early_rounds(
    cells: list, specs: list, resume: bool, say: Callable[[str], None], budget=None
):
    """Measure the early rounds of every cell still to run: round 0 of every cell, then
    round 1 ..., as the workflow's priorities order them, so that a cell's rounds lie apart
    in time (``numbench.measure.replicates``). With ``resume``, a round already measured is
    kept. Returns each cell's round files by its path, for ``run_cells`` to read. A round
    ``budget`` (``numbench.offsite.parts.Budget``) no longer allows, counting what the cells
    of the rounds run so far will still take, is not begun."""
    from numbench.errors import MachineryFault
    from numbench.measure.supervisor import run_round

    todo = [
        (cell, spec)
        for cell, spec in zip(cells, specs, strict=True)
        if not (resume and Path(cell.path).exists() and _cell_status(Path(cell.path)))
    ]
    rounds: dict[str, list[Path]] = {}
    owed = 0.0  # what the cells of the rounds run so far will still take, about
    for k in range(max((spec.replicates.early_rounds for _, spec in todo), default=0)):
        for cell, spec in todo:
            if k >= spec.replicates.early_rounds:
                continue
            path = Path(cell.round_path(k))  # the workflow's own name
            if resume and path.exists():
                rounds.setdefault(cell.path, []).append(path)
                continue  # measured before the run was stopped
            if budget is not None and not budget.allows_ahead(owed):
                return rounds
            rounds.setdefault(cell.path, []).append(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            with _output_to(Path(cell.log), append=k > 0), _fault_of(cell, MachineryFault):
                runs = run_round(spec, k, path)
                print(f"round {k}: " + ", ".join(f"{r.role} {r.report.status}" for r in runs))
            seconds = time.perf_counter() - t0
            if budget is not None:
                budget.note("round", seconds)
                # a cell takes its rounds beyond the early ones, each about as long
                owed += seconds * max(spec.replicates.min - spec.replicates.early_rounds, 1)
            say(f"round {k} {cell.path}  {seconds:.1f} s")
    return rounds


def run_cells(
    cells: list,
    specs: list,
    rounds: dict[str, list[Path]],
    resume: bool,
    say: Callable[[str], None],
    budget=None,
    numbers: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Run every cell, from its early rounds (``rounds``, removed once read into the cell
    file) on; with ``resume``, a readable cell file already there is kept. Returns the
    manifest's ``cells``: per cell file, its status, error, seconds, size and checksum. A
    cell ``budget`` no longer allows is not begun (one kept still counts). ``numbers``: (the
    cells before these, the cells in all), for the lines' ``[n/N]``."""
    from numbench.errors import MachineryFault
    from numbench.measure.supervisor import run_cell

    recorded: dict[str, Any] = {}
    before, total = numbers or (0, len(cells))
    width = len(str(total))
    for i, (cell, spec) in enumerate(zip(cells, specs, strict=True), before + 1):
        path = Path(cell.path)
        t0 = time.perf_counter()
        kept = _cell_status(path) if resume and path.exists() else None
        if kept is not None:
            (status, error), state = kept, "kept"
        elif budget is not None and (
            (budget.rounds_stopped and spec.replicates.early_rounds and cell.path not in rounds)
            or not budget.allows("cell")
        ):
            continue  # not begun on before the stop; a kept cell further on still counts
        else:
            earlier = rounds.pop(cell.path, [])
            with (
                _output_to(Path(cell.log), append=bool(earlier)),
                _fault_of(cell, MachineryFault),
            ):
                result = run_cell(spec, path, earlier=earlier)
                print(f"cell: {result.status}" + (f": {result.error}" if result.error else ""))
            for done in earlier:  # read into the cell file: no longer needed
                done.unlink(missing_ok=True)
            status, state, error = result.status, "", result.error
        seconds = time.perf_counter() - t0
        if budget is not None and state != "kept":
            budget.note("cell", seconds)
        data = path.read_bytes()
        recorded[cell.path] = {
            "status": status,
            "error": error,
            "seconds": round(seconds, 3),
            "bytes": len(data),
            "sha256": sha256(data),
        }
        say(
            f"[{i:>{width}}/{total}] {cell.path}  {status}"
            + (f" ({state})" if state else "")
            + f"  {seconds:.1f} s"
        )
    return recorded
