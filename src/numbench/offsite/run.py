"""Step 2, on the other host: make the inputs, run every cell, pack one archive.

``run_plan`` reads the plan, refuses a work folder of another plan, derives again from the
plan's identities every path it writes, and packs what was measured. The measuring itself
(``make_inputs``, then ``run_early_rounds``, then ``run_cells``) makes the inputs files,
then the early rounds, then the cells, inside the work folder, each with its log where the
workflow keeps it, as the workflow would make them; what each returns becomes the
manifest's ``inputs`` and ``cells``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from numbench.cells import round_sd_place
from numbench.contract import write_bytes_atomic
from numbench.offsite.common import (
    ARCHIVE_FORMAT,
    FORMAT_VERSION,
    ROOFS_LOG,
    ROOFS_MEMBER,
    TRANSFER_LIMIT_BYTES,
    OffsiteError,
    bundled_operation_file,
    cell_of,
    checked_inputs_checksums,
    code_hash,
    inputs_files_of,
    inside,
    measure_there,
    now_iso,
    sha256,
    write_inputs_file,
    write_tar_gz,
)
from numbench.offsite.parts import Budget, batches, checked_batch, read_earlier
from numbench.offsite.plan import checked_data_beside, read_plan


# -- step 2: run (there) -------------------------------------------------------------------------
@contextlib.contextmanager
def _working_in(folder: Path):
    """Work in ``folder``; on the way out, end the zygotes its workers were forked from
    (``worker_start: fork``) and remove the cells' shared compilations (``compile_cache:
    cell``), as the workflow's end does."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        from numbench.measure.compile_cache import clear
        from numbench.measure.zygote import stop_all

        stop_all()
        clear()
        os.chdir(before)


def default_workdir(output: str | os.PathLike) -> Path:
    output = Path(output)
    name = re.sub(r"(\.tar\.gz|\.tgz)$", "", output.name)
    return output.with_name(f"{name}.work")


def run_plan(
    plan_path: str | os.PathLike,
    output: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    resume: bool = False,
    say: Callable[[str], None] = print,
    stop_after_s: float | None = None,
    resume_from: Iterable[str | os.PathLike] = (),
    batch: int | None = None,
) -> dict:
    """Make the inputs, run every cell of the plan and pack them into ``output``; return the
    manifest. With ``resume``, inputs files and cells already in ``workdir`` are kept. The
    user's data files are read from beside the plan, once each hashes as the plan says
    (``checked_data_beside``); the archive does not carry them back.

    ``stop_after_s`` stops it at a time budget and ``resume_from`` goes on from the parts
    earlier runs packed, on another machine (``numbench.offsite.parts``): the archive is
    then a part, holding the cells this run measured, and its manifest's ``part`` says
    whether the plan is complete.

    Every file it writes, but ``output``, lies inside the work folder, at a path derived from
    a cell's (or an inputs file's) identity: ``read_plan`` refuses a plan that names any
    other, and the paths used here are derived again, not read from the plan."""
    budget = Budget(stop_after_s)
    batch = checked_batch(batch, stop_after_s)
    plan = read_plan(plan_path)
    what = f"the plan {plan_path}"
    output = Path(output).resolve()
    work = Path(workdir).resolve() if workdir else default_workdir(output).resolve()
    marker, beside = work / "plan.json", Path(plan_path).resolve().parent
    _check_earlier_run(work, marker, plan, resume)
    operation_files = _operations_beside(plan, beside)
    data = checked_data_beside(plan, beside)  # the user's data files, hashing as planned
    specs = _specs(plan, operation_files)
    cells, inputs, _ = _paths_inside(plan, work, what)
    earlier = read_earlier(resume_from, plan, output, say)
    if plan.get("code_hash") != code_hash():
        say("warning: the numbench sources here differ from the ones the plan was made with")
    work.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(json.dumps(plan, indent=1, sort_keys=True).encode(), marker)

    started, t_start = now_iso(), time.perf_counter()
    todo = [(c, s) for c, s in zip(cells, specs, strict=True) if c.path not in earlier.cells]
    needed = {c.inputs for c, _ in todo}
    inputs = [entry for entry in inputs if entry[1] in needed]
    say(
        f"plan {plan['plan_hash'][:12]}: {len(cells)} cells ({len(todo)} to measure), "
        f"{len(inputs)} inputs files; working in {work}"
    )
    with _working_in(work):
        manifest_inputs = make_inputs(inputs, operation_files, data, work, resume, say)
        earlier.check_inputs(manifest_inputs)
        manifest_cells = _measure_cells(
            todo, len(earlier.cells), len(cells), resume, budget, batch, say
        )
        left = len(todo) - len(manifest_cells)
        # this host's roofs, for the cells' places on its roofline (numbench.offsite.common),
        # unless the config leaves them out (``roofs: false``): the archive then has none;
        # measured once, by the run that measures the plan's last cells
        wants_roofs = plan["config"].get("roofs", True) and not earlier.roofs
        roofs = (
            measure_there(plan, work, resume, say)
            if wants_roofs and left == 0 and budget.allows("roofs")
            else None
        )
        manifest = _manifest(plan, started, t_start, manifest_inputs, manifest_cells, roofs)
        roofs_left = bool(wants_roofs and roofs is None)
        part = manifest["part"] = {"complete": left == 0 and not roofs_left, "cells_left": left}
        part.update(roofs_left=roofs_left, stop_after_s=stop_after_s, earlier=earlier.parts)
        _pack_part(output, plan, manifest, cells, [log for _, _, log in inputs])
    _say_written(output, manifest, len(manifest_cells), say)
    if not part["complete"]:
        say(
            f"stopped at the time budget: {len(cells) - left} of the plan's {len(cells)} cells "
            f"measured ({len(manifest_cells)} in this part), {left} left"
            + (", and the roofs" if part["roofs_left"] else "")
            + "; go on with `offsite run PLAN --resume-from` this part and every earlier one"
        )
    return manifest


def _measure_cells(todo: list, before: int, total: int, resume: bool, budget, batch, say) -> dict:
    """Measure the cells ``todo`` ([(cell, spec)]) in batches of ``batch`` (all at once where
    None): the rounds each batch runs ahead of its cells, then its cells, while ``budget`` allows; the manifest's
    ``cells`` of those measured. ``before``, ``total``: for the lines' ``[n/N]``."""
    measured: dict = {}
    for chunk in batches(todo, batch):
        chunk_cells, chunk_specs = [c for c, _ in chunk], [s for _, s in chunk]
        rounds = run_early_rounds(chunk_cells, chunk_specs, resume, say, budget)
        numbers = (before + len(measured), total)
        measured.update(run_cells(chunk_cells, chunk_specs, rounds, resume, say, budget, numbers))
    return measured


def _check_earlier_run(work: Path, marker: Path, plan: dict, resume: bool) -> None:
    """Refuse a work folder that holds an earlier run unless ``resume`` is asked, and even so
    where its ``marker`` names another plan's hash: the cells kept must be cells of the plan
    being run."""
    if not (work.exists() and any(work.iterdir())):
        return
    if not resume:
        raise OffsiteError(
            f"{work} holds an earlier run: pass --resume to keep its finished cells, or remove it"
        )
    if marker.exists():
        try:
            earlier = json.loads(marker.read_text(encoding="utf-8")).get("plan_hash")
        except (ValueError, AttributeError):
            earlier = None
        if earlier != plan["plan_hash"]:
            raise OffsiteError(
                f"{work} holds a run of another plan ({str(earlier)[:12]}, this one is "
                f"{plan['plan_hash'][:12]}); use another --workdir"
            )


def _specs(plan: dict, operation_files: dict[str, str]) -> list:
    """The plan's cell specs, each naming its operation's file here (beside the plan); a
    spec this numbench cannot read says the plan came from other sources."""
    from numbench.spec import CellSpec

    try:
        return [
            CellSpec.from_dict(c["spec"]).replace(
                operation_file=operation_files.get(c["spec"]["operation"])
            )
            for c in plan["cells"]
        ]
    except (ValueError, TypeError) as exc:
        raise OffsiteError(
            f"the plan's cell specs do not fit this numbench ({exc}); make the plan with the "
            "same numbench sources as the ones here"
        ) from None


def _paths_inside(plan: dict, work: Path, what: str):
    """(cells, [(inputs entry, inputs file, its log)], every log): the paths the run writes,
    derived again from the cells' and inputs files' identities, each checked to lie inside
    the work folder."""
    cells = [cell_of(entry["spec"], what) for entry in plan["cells"]]
    inputs = [(item, *inputs_files_of(item, what)) for item in plan["inputs"]]
    logs = [c.log for c in cells] + [log for _, _, log in inputs]
    for relative in [c.path for c in cells] + [path for _, path, _ in inputs] + logs:
        inside(work, relative)
    return cells, inputs, logs


def _manifest(
    plan: dict, started: str, t_start: float, inputs: dict, cells: dict, roofs: dict | None
) -> dict:
    """The archive's manifest: which plan ran with which code, where and when, what each
    inputs file and cell file holds (checksums ``import`` verifies), and the roofs."""
    return {
        "format": ARCHIVE_FORMAT,
        "version": FORMAT_VERSION,
        "plan_hash": plan["plan_hash"],
        "code_hash": code_hash(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "packages": _package_versions(),
        "started_at": started,
        "finished_at": now_iso(),
        "seconds": round(time.perf_counter() - t_start, 1),
        "statuses": dict(Counter(c["status"] for c in cells.values())),
        "inputs": inputs,
        "cells": cells,
        "roofs": roofs,
    }


def _say_written(output: Path, manifest: dict, n_cells: int, say: Callable[[str], None]) -> None:
    """Say what was packed, and warn where the archive is too large to travel back whole."""
    size = output.stat().st_size
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(manifest["statuses"].items())) or "none"
    say(f"wrote {output} ({size / 2**20:.2f} MiB; {n_cells} cells: {statuses})")
    if size > TRANSFER_LIMIT_BYTES:
        say(
            f"warning: the archive is larger than {TRANSFER_LIMIT_BYTES // 2**20} MiB; "
            "split the grid into several plans (fewer operations or libraries each)"
        )


def _operations_beside(plan: dict, folder: Path) -> dict[str, str]:
    """operation name -> its file here, for every user's operation of the plan: beside the
    plan, where the bundle put it (``bundled_operation_file``; ``check_plan`` refused a plan
    naming any other place). Every operation of the plan, a built-in one too, is loaded and
    its code must hash as the plan says, before any cell runs: a cell is never measured with
    other code than its spec names."""
    from numbench.operations import OperationError, load

    wanted = {
        c["spec"]["operation"]: (
            c["spec"].get("operation_file") is not None,
            c["spec"].get("operation_hash"),
        )
        for c in plan["cells"]
    }
    files = {}
    for name, (from_file, planned) in sorted(wanted.items()):
        file = folder / bundled_operation_file(name) if from_file else None
        try:
            load(name, file, planned)
        except OperationError as exc:
            carried = (
                f"Its files travel in the bundle (offsite plan --bundle), beside the plan: "
                f"{bundled_operation_file(name)}"
                if from_file
                else "Run the plan with the numbench sources of its bundle"
            )
            raise OffsiteError(
                f"the plan's operation {name} cannot be used here: {exc}. {carried}"
            ) from None
        if file is not None:
            files[name] = str(file)
    return files


def _package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("numpy", "pyarrow", "torch", "jax", "jaxlib", "tensorflow", "numba", "cupy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def _pack_part(output: Path, plan: dict, manifest: dict, cells: list, inputs_logs: list) -> None:
    """Pack the cells the manifest lists (this run's), their logs, the logs of the inputs
    files made, and the roofs where the manifest has them."""
    packed = [c for c in cells if c.path in manifest["cells"]]
    roofs = [ROOFS_MEMBER] if manifest["roofs"] else []
    logs = [c.log for c in packed] + inputs_logs + ([ROOFS_LOG] if roofs else [])
    pack(output, plan, manifest, [c.path for c in packed] + roofs, logs)


def pack(output: Path, plan: dict, manifest: dict, cells: list[str], logs: list[str]) -> None:
    """The one archive: manifest.json, plan.json, the cell files and the logs (paths as under
    the workflow's folder), written to a temporary name and renamed into place."""

    def members():
        yield "manifest.json", json.dumps(manifest, indent=1).encode(), None
        yield "plan.json", json.dumps(plan, indent=1, sort_keys=True).encode(), None
        for name in sorted(cells) + sorted(set(logs)):
            path = Path(name)
            if path.exists():
                yield name, path.read_bytes(), path.stat().st_mtime

    write_tar_gz(output, members())


# -- step 2's measuring: the inputs files, the early rounds, the cells ----------------------------
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
    from numbench import inputs_file as inputs
    from numbench.errors import CorruptFile

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
                result = run_cell(spec, path, earlier=earlier, round_sd_at=round_sd_place(path))
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
