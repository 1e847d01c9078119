"""Step 2, on the other host: make the inputs, run every cell, pack one archive."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import socket
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numbench.contract import replacing, write_bytes_atomic
from numbench.offsite.common import (
    ARCHIVE_FORMAT,
    FORMAT_VERSION,
    TRANSFER_LIMIT_BYTES,
    OffsiteError,
    _add_bytes,
    bundled_operation_file,
    cell_of,
    code_hash,
    inputs_checksums,
    inputs_files_of,
    inside,
    now_iso,
    sha256,
)
from numbench.offsite.plan import (
    read_plan,
)
from numbench.offsite.roofs import ROOFS_LOG, ROOFS_MEMBER, measure_there


# -- step 2: run (there) -------------------------------------------------------------------------
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


@contextlib.contextmanager
def _working_in(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def default_workdir(output: str | os.PathLike) -> Path:
    output = Path(output)
    name = re.sub(r"(\.tar\.gz|\.tgz)$", "", output.name)
    return output.with_name(f"{name}.work")


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


def run_plan(
    plan_path: str | os.PathLike,
    output: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    resume: bool = False,
    say: Callable[[str], None] = print,
) -> dict:
    """Make the inputs, run every cell of the plan and pack them into ``output``; return the
    manifest. With ``resume``, inputs files and cells already in ``workdir`` are kept.

    Every file it writes, but ``output``, lies inside the work folder, at a path derived from
    a cell's (or an inputs file's) identity: ``read_plan`` refuses a plan that names any
    other, and the paths used here are derived again, not read from the plan."""
    from numbench.errors import CorruptFile, MachineryFault
    from numbench.measure import inputs as inputs_file
    from numbench.measure.supervisor import run_cell, run_round
    from numbench.spec import CellSpec

    plan = read_plan(plan_path)
    what = f"the plan {plan_path}"
    output = Path(output).resolve()
    work = Path(workdir).resolve() if workdir else default_workdir(output).resolve()
    marker = work / "plan.json"
    if work.exists() and any(work.iterdir()):
        if not resume:
            raise OffsiteError(
                f"{work} holds an earlier run: pass --resume to keep its finished cells, "
                "or remove it"
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
    operation_files = _operations_beside(plan, Path(plan_path).resolve().parent)
    try:
        specs = [
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
    # the paths written, derived from the identities (and each inside the work folder)
    cells = [cell_of(entry["spec"], what) for entry in plan["cells"]]
    inputs = [(item, *inputs_files_of(item, what)) for item in plan["inputs"]]
    logs = [c.log for c in cells] + [log for _, _, log in inputs]
    for relative in [c.path for c in cells] + [path for _, path, _ in inputs] + logs:
        inside(work, relative)
    if plan.get("code_hash") != code_hash():
        say("warning: the numbench sources here differ from the ones the plan was made with")
    work.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(json.dumps(plan, indent=1, sort_keys=True).encode(), marker)

    started, t_start = now_iso(), time.perf_counter()
    n_cells, n_inputs = len(plan["cells"]), len(plan["inputs"])
    say(
        f"plan {plan['plan_hash'][:12]}: {n_cells} cells, {n_inputs} inputs files; "
        f"working in {work}"
    )
    manifest_inputs: dict[str, Any] = {}
    manifest_cells: dict[str, Any] = {}
    with _working_in(work):
        for i, (item, inputs_path, inputs_log) in enumerate(inputs, 1):
            path = Path(inputs_path)
            t0 = time.perf_counter()
            state = "kept"
            if not (resume and path.exists() and _intact(inputs_file, path, CorruptFile)):
                state = "made"
                try:
                    with _output_to(Path(inputs_log)):
                        inputs_file.write(
                            item["operation"],
                            item["size"],
                            item["seed"],
                            path,
                            item["params"],
                            operation_files.get(item["operation"]),
                            item.get("operation_hash"),
                        )
                        print(f"inputs: {item['operation']} n={item['size']} seed={item['seed']}")
                except Exception as exc:  # noqa: BLE001 - named, with the log to read
                    raise OffsiteError(
                        f"cannot make {inputs_path}: {type(exc).__name__}: {exc} "
                        f"(log: {work / inputs_log})"
                    ) from None
            try:
                checks = inputs_checksums(path)
            except CorruptFile as exc:
                raise OffsiteError(str(exc)) from None
            manifest_inputs[inputs_path] = {"bytes": path.stat().st_size, "arrays": checks}
            say(f"inputs [{i}/{n_inputs}] {inputs_path}  {state}  {time.perf_counter() - t0:.1f} s")
        width = len(str(n_cells))
        # The spread rounds first, round 0 of every cell, then round 1 ..., as the workflow's
        # priorities order them: a cell's rounds lie apart in time (numbench.measure.replicates).
        todo = [
            (cell, spec)
            for cell, spec in zip(cells, specs, strict=True)
            if not (resume and Path(cell.path).exists() and _cell_status(Path(cell.path)))
        ]
        rounds: dict[str, list[Path]] = {}
        for k in range(max((spec.replicates.spread for _, spec in todo), default=0)):
            for cell, spec in todo:
                if k >= spec.replicates.spread:
                    continue
                path = Path(cell.round_path(k))  # the workflow's own name
                rounds.setdefault(cell.path, []).append(path)
                if resume and path.exists():
                    continue  # measured before the run was stopped
                path.parent.mkdir(parents=True, exist_ok=True)
                t0 = time.perf_counter()
                with _output_to(Path(cell.log), append=k > 0), _fault_of(cell, MachineryFault):
                    runs = run_round(spec, k, path)
                    print(f"round {k}: " + ", ".join(f"{r.role} {r.report.status}" for r in runs))
                say(f"round {k} {cell.path}  {time.perf_counter() - t0:.1f} s")
        for i, (cell, spec) in enumerate(zip(cells, specs, strict=True), 1):
            path = Path(cell.path)
            t0 = time.perf_counter()
            kept = _cell_status(path) if resume and path.exists() else None
            if kept is not None:
                (status, error), state = kept, "kept"
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
            data = path.read_bytes()
            manifest_cells[cell.path] = {
                "status": status,
                "error": error,
                "seconds": round(seconds, 3),
                "bytes": len(data),
                "sha256": sha256(data),
            }
            say(
                f"[{i:>{width}}/{n_cells}] {cell.path}  {status}"
                + (f" ({state})" if state else "")
                + f"  {seconds:.1f} s"
            )
        # this host's roofs, for the cells' places on its roofline (numbench.offsite.roofs)
        roofs = measure_there(plan, work, resume, say)
        manifest = {
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
            "statuses": dict(Counter(c["status"] for c in manifest_cells.values())),
            "inputs": manifest_inputs,
            "cells": manifest_cells,
            "roofs": roofs,
        }
        pack(output, plan, manifest, [c.path for c in cells] + [ROOFS_MEMBER], logs + [ROOFS_LOG])
    size = output.stat().st_size
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(manifest["statuses"].items()))
    say(f"wrote {output} ({size / 2**20:.2f} MiB; {n_cells} cells: {statuses})")
    if size > TRANSFER_LIMIT_BYTES:
        say(
            f"warning: the archive is larger than {TRANSFER_LIMIT_BYTES // 2**20} MiB; "
            "split the grid into several plans (fewer operations or libraries each)"
        )
    return manifest


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


def _intact(inputs_file, path: Path, corrupt_error) -> bool:
    try:
        inputs_file.check(path)
    except corrupt_error:
        return False
    return True


def _package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("numpy", "pyarrow", "torch", "jax", "jaxlib", "tensorflow", "numba", "cupy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def pack(output: Path, plan: dict, manifest: dict, cells: list[str], logs: list[str]) -> None:
    """The one archive: manifest.json, plan.json, the cell files and the logs (paths as under
    the workflow's folder), written to a temporary name and renamed into place."""
    with replacing(output) as tmp, tarfile.open(tmp, mode="w:gz", compresslevel=9) as tar:
        _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
        _add_bytes(tar, "plan.json", json.dumps(plan, indent=1, sort_keys=True).encode())
        for name in sorted(cells) + sorted(set(logs)):
            path = Path(name)
            if path.exists():
                _add_bytes(tar, name, path.read_bytes(), path.stat().st_mtime)
