"""Running a grid's cells on another host, and bringing them back as one archive.

Three steps, for a host that has the numerical libraries but not the workflow's environment
(no Snakemake, no PyYAML or jsonschema, no network; files travel by copy):

1. ``plan`` (here, in the workflow's environment) validates the config exactly as the
   workflow does and writes one JSON plan: every cell's spec and output path (in a seeded
   random order), the inputs files to make, and the config it came from.
2. ``run`` (there; needs numpy, pyarrow and this package from ``src/``, nothing else) makes
   the inputs files in a scratch folder, runs every cell with ``numbench.cell.run_cell``
   (the host lock, the timeouts and the fault statuses come with it), keeps one log per
   cell as the workflow does, and packs the cell files, the logs and a manifest into one
   ``.tar.gz``.
3. ``import`` (here) checks the archive against its manifest and against the config here,
   makes sure the inputs files exist and hold the very arrays the cells were measured on,
   and moves the cells into ``results/`` so that Snakemake takes them as up to date: the
   next ``snakemake`` runs only the analysis rules.

Every problem is one ``OffsiteError`` whose message names it; nothing is moved into
``results/`` before every check has passed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import math
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

PLAN_FORMAT = "numbench-offsite-plan"
ARCHIVE_FORMAT = "numbench-offsite-archive"
FORMAT_VERSION = 1
#: the largest file the transfer back from a remote host takes
TRANSFER_LIMIT_BYTES = 16 * 1024 * 1024
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
#: a reference array whose CRC differs is still the same reference when its norm agrees to this
#: (the float64 reference of matmul, mlp, ... goes through BLAS, which rounds differently on
#: another CPU; the inputs themselves must match bit for bit)
REFERENCE_NORM_RTOL = 1e-12

CELL_MEMBER = re.compile(r"results/cells/[a-z0-9-]+/(cpu|gpu)/[a-z_]+/[0-9]+\.parquet")


class OffsiteError(Exception):
    """A problem with a plan, a run or an archive; the message is meant to be shown as it is."""


# -- shared helpers ------------------------------------------------------------------------------
def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def code_hash() -> str:
    """SHA-256 of the numbench package's Python sources (which code measured the cells)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def plan_hash(plan: dict) -> str:
    """SHA-256 of what a plan asks for: the config, the cells' specs and the inputs files.

    The cells' order and the plan's time stamps are left out, so the same config gives the
    same hash here and there, and ``import`` can recompute it from the config here."""
    cells = sorted((c["path"], canonical(c["spec"])) for c in plan["cells"])
    inputs = sorted(canonical(i) for i in plan["inputs"])
    return sha256(canonical({"config": plan["config"], "cells": cells, "inputs": inputs}).encode())


def log_path(cell_path: str) -> str:
    """The cell's log, where the workflow keeps it (``logs/cells/...``)."""
    return "logs/" + cell_path.removeprefix("results/").removesuffix(".parquet") + ".log"


def inputs_checksums(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Per array of an inputs file: the CRC-32 numpy's zip stores for it and its size, and for
    the reference outputs (``ref_*``) their float64 norm as well.

    The arrays' CRCs, unlike the file's own hash, do not depend on when the file was written
    (a zip member records its time). Raises CorruptFile when a member fails its CRC check."""
    import numpy as np

    from numbench import inputs

    inputs.check(path)
    arrays: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            arrays[info.filename.removesuffix(".npy")] = {
                "crc32": info.CRC,
                "bytes": info.file_size,
            }
    with np.load(path) as data:
        for name, entry in arrays.items():
            if name.startswith("ref_"):
                entry["norm"] = float(np.linalg.norm(np.asarray(data[name]).ravel()))
    return arrays


def compare_inputs(
    here: dict[str, dict[str, Any]], there: dict[str, dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """(problems, notes) of an inputs file here against the checksums recorded there."""
    problems, notes = [], []
    for name in sorted(set(here) | set(there)):
        a, b = here.get(name), there.get(name)
        if a is None or b is None:
            where = "in the archive's manifest" if a is None else "here"
            problems.append(f"array {name} is only {where}")
        elif a["crc32"] == b["crc32"] and a["bytes"] == b["bytes"]:
            continue
        elif (
            name.startswith("ref_")
            and a["bytes"] == b["bytes"]
            and a.get("norm") is not None
            and b.get("norm") is not None
            and math.isclose(a["norm"], b["norm"], rel_tol=REFERENCE_NORM_RTOL, abs_tol=0.0)
        ):
            notes.append(
                f"reference {name} differs in its last bits (norms {a['norm']!r} here, "
                f"{b['norm']!r} there): rounding of another CPU or BLAS"
            )
        else:
            problems.append(
                f"array {name}: CRC {a['crc32']:08x} ({a['bytes']} bytes) here, "
                f"{b['crc32']:08x} ({b['bytes']} bytes) on the host that ran the cells"
            )
    return problems, notes


def _readable_by_all(path: str | os.PathLike) -> None:
    """Give a file made by ``mkstemp`` (mode 0600) the mode a plain ``open`` would."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _write_bytes_atomic(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _readable_by_all(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


# -- step 2: run (there) -------------------------------------------------------------------------
@contextlib.contextmanager
def _output_to(path: Path):
    """Send this process's stdout and stderr, and so the cell worker's, to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "w", encoding="utf-8") as fh:
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


def run_plan(
    plan_path: str | os.PathLike,
    output: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    resume: bool = False,
    say: Callable[[str], None] = print,
) -> dict:
    """Make the inputs, run every cell of the plan and pack them into ``output``; return the
    manifest. With ``resume``, inputs files and cells already in ``workdir`` are kept."""
    from numbench import inputs as inputs_file
    from numbench.cell import run_cell
    from numbench.errors import CorruptFile
    from numbench.spec import CellSpec

    plan = read_plan(plan_path)
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
            earlier = json.loads(marker.read_text(encoding="utf-8")).get("plan_hash")
            if earlier != plan["plan_hash"]:
                raise OffsiteError(
                    f"{work} holds a run of another plan ({str(earlier)[:12]}, this one is "
                    f"{plan['plan_hash'][:12]}); use another --workdir"
                )
    try:
        specs = [CellSpec.from_dict(c["spec"]) for c in plan["cells"]]
    except (ValueError, TypeError) as exc:
        raise OffsiteError(
            f"the plan's cell specs do not fit this numbench ({exc}); make the plan with the "
            "same numbench sources as the ones here"
        ) from None
    if plan.get("code_hash") != code_hash():
        say("warning: the numbench sources here differ from the ones the plan was made with")
    work.mkdir(parents=True, exist_ok=True)
    _write_bytes_atomic(json.dumps(plan, indent=1, sort_keys=True).encode(), marker)

    started, t_start = now_iso(), time.perf_counter()
    n_cells, n_inputs = len(plan["cells"]), len(plan["inputs"])
    say(
        f"plan {plan['plan_hash'][:12]}: {n_cells} cells, {n_inputs} inputs files; "
        f"working in {work}"
    )
    manifest_inputs: dict[str, Any] = {}
    manifest_cells: dict[str, Any] = {}
    with _working_in(work):
        for i, item in enumerate(plan["inputs"], 1):
            path = Path(item["path"])
            t0 = time.perf_counter()
            state = "kept"
            if not (resume and path.exists() and _intact(inputs_file, path, CorruptFile)):
                state = "made"
                try:
                    with _output_to(Path(item["log"])):
                        inputs_file.write(
                            item["operation"], item["size"], item["seed"], path, item["params"]
                        )
                        print(f"inputs: {item['operation']} n={item['size']} seed={item['seed']}")
                except Exception as exc:  # noqa: BLE001 - named, with the log to read
                    raise OffsiteError(
                        f"cannot make {item['path']}: {type(exc).__name__}: {exc} "
                        f"(log: {work / item['log']})"
                    ) from None
            try:
                checks = inputs_checksums(path)
            except CorruptFile as exc:
                raise OffsiteError(str(exc)) from None
            manifest_inputs[item["path"]] = {"bytes": path.stat().st_size, "arrays": checks}
            say(
                f"inputs [{i}/{n_inputs}] {item['path']}  {state}  {time.perf_counter() - t0:.1f} s"
            )
        width = len(str(n_cells))
        for i, (entry, spec) in enumerate(zip(plan["cells"], specs), 1):
            path = Path(entry["path"])
            t0 = time.perf_counter()
            kept = _cell_status(path) if resume and path.exists() else None
            if kept is not None:
                (status, error), state = kept, "kept"
            else:
                with _output_to(Path(entry["log"])):
                    result = run_cell(spec, path)
                    print(f"cell: {result.status}" + (f": {result.error}" if result.error else ""))
                status, state, error = result.status, "", result.error
            seconds = time.perf_counter() - t0
            data = path.read_bytes()
            manifest_cells[entry["path"]] = {
                "status": status,
                "error": error,
                "seconds": round(seconds, 3),
                "bytes": len(data),
                "sha256": sha256(data),
            }
            say(
                f"[{i:>{width}}/{n_cells}] {entry['path']}  {status}"
                + (f" ({state})" if state else "")
                + f"  {seconds:.1f} s"
            )
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
        }
        logs = [c["log"] for c in plan["cells"]] + [i["log"] for i in plan["inputs"]]
        pack(output, plan, manifest, [c["path"] for c in plan["cells"]], logs)
    size = output.stat().st_size
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(manifest["statuses"].items()))
    say(f"wrote {output} ({size / 2**20:.2f} MiB; {n_cells} cells: {statuses})")
    if size > TRANSFER_LIMIT_BYTES:
        say(
            f"warning: the archive is larger than {TRANSFER_LIMIT_BYTES // 2**20} MiB; "
            "split the grid into several plans (fewer operations or libraries each)"
        )
    return manifest


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


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: float | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time() if mtime is None else mtime)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def pack(output: Path, plan: dict, manifest: dict, cells: list[str], logs: list[str]) -> None:
    """The one archive: manifest.json, plan.json, the cell files and the logs (paths as under
    the workflow's folder), written to a temporary name and renamed into place."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, mode="w:gz", compresslevel=9) as tar:
            _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
            _add_bytes(tar, "plan.json", json.dumps(plan, indent=1, sort_keys=True).encode())
            for name in sorted(cells) + sorted(set(logs)):
                path = Path(name)
                if path.exists():
                    _add_bytes(tar, name, path.read_bytes(), path.stat().st_mtime)
        _readable_by_all(tmp)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- step 3: import (here) -----------------------------------------------------------------------
def read_archive(path: str | os.PathLike) -> dict[str, bytes]:
    """Every regular file of the archive, by name; an unreadable archive is an OffsiteError."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                if info.isdir():
                    continue
                if not info.isfile():
                    raise OffsiteError(f"{path}: member {info.name} is not a regular file")
                fh = tar.extractfile(info)
                members[info.name] = fh.read() if fh is not None else b""
    except OffsiteError:
        raise
    except FileNotFoundError:
        raise OffsiteError(f"no archive at {path}") from None
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise OffsiteError(
            f"{path} is not a readable archive (corrupt or truncated?): {type(exc).__name__}: {exc}"
        ) from None
    return members


def _json_member(members: dict[str, bytes], name: str, archive) -> Any:
    if name not in members:
        raise OffsiteError(f"{archive} lacks {name}: it is not an archive made by `offsite run`")
    try:
        return json.loads(members[name])
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


def _check_cell_bytes(name: str, data: bytes, spec: dict, recorded: dict | None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if recorded is None:
        raise OffsiteError(f"the archive's manifest does not list {name}")
    if sha256(data) != recorded.get("sha256"):
        raise OffsiteError(
            f"{name} in the archive does not match its checksum in the manifest: the archive "
            "is corrupt"
        )
    try:
        table = pq.read_table(pa.BufferReader(data))
        row = {k: table.column(k)[0].as_py() for k in ("library", "device", "operation", "size")}
        status = table.column("status")[0].as_py()
    except Exception as exc:  # noqa: BLE001 - any reader error means the cell is unusable
        raise OffsiteError(f"{name} in the archive is not a readable cell file: {exc}") from None
    want = {k: spec[k] for k in row}
    if row != want:
        raise OffsiteError(f"{name} in the archive holds the cell {row}, not {want}")
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
    summary. Nothing under ``results`` changes unless every check passes."""
    from numbench import inputs as inputs_file
    from numbench.errors import CorruptFile

    root = Path(root)
    results = Path(results) if results is not None else root / "results"
    logs_dir = results.parent / "logs"

    def local_path(name: str) -> Path:
        top, _, rest = name.partition("/")
        return (results if top == "results" else logs_dir) / rest

    members = read_archive(archive)
    manifest = _json_member(members, "manifest.json", archive)
    plan = check_plan(_json_member(members, "plan.json", archive), f"the plan in {archive}")
    if manifest.get("format") != ARCHIVE_FORMAT or manifest.get("version") != FORMAT_VERSION:
        raise OffsiteError(f"{archive}: manifest.json is not a numbench offsite manifest")
    if manifest.get("plan_hash") != plan["plan_hash"]:
        raise OffsiteError(
            f"{archive}: the manifest's plan_hash {str(manifest.get('plan_hash'))[:12]} is not "
            f"the plan's {plan['plan_hash'][:12]}: the manifest belongs to another plan"
        )

    # the archive itself: exactly the plan's cells (and their logs), each as recorded
    expected_cells = {c["path"]: c for c in plan["cells"]}
    allowed_logs = {c["log"] for c in plan["cells"]} | {i["log"] for i in plan["inputs"]}
    for name in members:
        if name in ("manifest.json", "plan.json") or name in allowed_logs:
            continue
        if name not in expected_cells or not CELL_MEMBER.fullmatch(name):
            raise OffsiteError(f"{archive}: unexpected member {name!r} (not a cell of its plan)")
    missing = sorted(set(expected_cells) - set(members))
    if missing:
        raise OffsiteError(
            f"{archive} lacks {len(missing)} of its plan's {len(expected_cells)} cells "
            f"(first: {missing[0]}): was the run interrupted? Finish it with `offsite run "
            "--resume`"
        )
    recorded_cells = manifest.get("cells") or {}
    for name, entry in expected_cells.items():
        _check_cell_bytes(name, members[name], entry["spec"], recorded_cells.get(name))

    # the config here must plan the same grid
    local = make_plan(load_config(root, configfiles, config_args))
    check_against_config(plan, local)

    # cells here that differ from the archive's are not overwritten without --force
    conflicts = []
    for name in expected_cells:
        dest = local_path(name)
        if dest.exists() and sha256(dest.read_bytes()) != recorded_cells[name]["sha256"]:
            conflicts.append(name)
    if conflicts and not force:
        raise OffsiteError(
            f"{len(conflicts)} cell files here differ from the archive's (first: "
            f"{conflicts[0]}); refusing to overwrite them: pass --force to replace them"
        )

    # the inputs: present here, or made here with the same seed, and the same arrays
    recorded_inputs = manifest.get("inputs") or {}
    staging = Path(tempfile.mkdtemp(prefix=".offsite-import-", dir=_existing_parent(results)))
    made: list[tuple[Path, Path]] = []
    notes: list[str] = []
    try:
        for item in plan["inputs"]:
            dest = local_path(item["path"])
            recorded = (recorded_inputs.get(item["path"]) or {}).get("arrays")
            if not recorded:
                raise OffsiteError(f"the archive's manifest has no checksums of {item['path']}")
            if dest.exists():
                source, check_path = "the inputs file here", dest
            else:
                check_path = staging / item["path"]
                inputs_file.write(
                    item["operation"], item["size"], item["seed"], check_path, item["params"]
                )
                source = "the inputs file made here with the same seed"
                made.append((check_path, dest))
            try:
                here = inputs_checksums(check_path)
            except CorruptFile as exc:
                raise OffsiteError(str(exc)) from None
            problems, ref_notes = compare_inputs(here, recorded)
            if problems:
                raise OffsiteError(
                    f"{item['path']}: {source} differs from the one the cells were measured on "
                    f"({'; '.join(problems[:3])}). The cells cannot be compared with it"
                )
            notes.extend(f"{item['path']}: {n}" for n in ref_notes)

        # every check passed: move into place
        for src, dest in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    newest_input = max(
        (local_path(i["path"]).stat().st_mtime_ns for i in plan["inputs"]), default=0
    )
    for name, data in members.items():
        if name in expected_cells or name in allowed_logs:
            dest = local_path(name)
            if not (dest.exists() and dest.read_bytes() == data):
                _write_bytes_atomic(data, dest)
    # Snakemake reruns an output older than its inputs: the cells are made newer than every
    # inputs file, as they would be had they been made here.
    stamp = max(time.time_ns(), newest_input + 1_000_000)
    for name in expected_cells:
        os.utime(local_path(name), ns=(stamp, stamp))
    forgotten = _forget_metadata(
        root, results, [i["path"] for i in plan["inputs"]] + sorted(expected_cells), say
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
