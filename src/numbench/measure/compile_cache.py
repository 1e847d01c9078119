"""A cell's compilations shared between its rounds: ``compile_cache: cell``.

A library that compiles for the cell (JAX's XLA: tracing, lowering and, on a GPU, choosing
kernels by timing them; Numba's njit on the CPU) pays it again in every round, since every round is a process of its
own. On a GPU that is most of a cell's cost (docs/gpu.md, "What a GPU cell costs"). With
``compile_cache: cell`` each cell gets a folder of its own for the library's persistent
compilation cache, for the length of one run: the cell's first process compiles and writes
it (``cold``), and the later ones load what it wrote (``warm``). Each process still traces,
loads and times its first call; the cell's ``first_call_s`` is its cold processes' (what a
user's first call costs), and the report says how many loaded theirs.

What is given up: the later rounds run the kernels the first chose, so the variation of
that choice between processes is no longer sampled. Hence ``none`` is the default.

The folders live in the temporary folder, named by the user, the folder the run works in
and the run's process (``process.run_pid``), so a run never finds another's compilations
(a cell measured again in a later run is cold again). They are removed when the run ends
(``clear``, beside the zygotes' end), and a run's that was killed by the next run there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

#: the worker's variable naming its cell's folder; unset where the cell shares nothing
FOLDER_ENV = "NUMBENCH_COMPILE_CACHE"
#: the two values of ``compile_cache``
CHOICES = ("none", "cell")


def _prefix(cwd: str | None = None) -> str:
    here = os.path.abspath(cwd or os.getcwd())
    return f"numbench-compile-{os.getuid()}-{hashlib.sha256(here.encode()).hexdigest()[:8]}-"


def cell_name(spec) -> str:
    """What tells a cell's processes from another cell's: every field its compiled code can
    depend on (the library, its device, dtype and threads, the operation's code, size,
    parameters, compile options and inputs, the environment)."""
    env = spec.environment.name if spec.environment is not None else None
    parts = [
        spec.library,
        spec.adapter_name,
        spec.device,
        spec.operation,
        spec.operation_hash,
        int(spec.size),
        spec.dtype,
        int(spec.threads),
        spec.params,
        spec.options,
        spec.inputs,
        env,
    ]
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def folder_for(spec, run_pid: int, cwd: str | None = None) -> Path:
    """The cell's folder in the run of ``run_pid``; made later, by the worker."""
    return Path(tempfile.gettempdir(), f"{_prefix(cwd)}{run_pid}", cell_name(spec))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clear(cwd: str | None = None, only_dead: bool = False, root: str | None = None) -> int:
    """Remove the runs' folders of this user and folder ``cwd`` (default: here) in the
    temporary folder ``root`` (default: this process's), or with ``only_dead`` those whose
    run's process is gone; how many were removed."""
    removed = 0
    prefix = _prefix(cwd)
    root = root or tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix) :]
        if only_dead and (not pid.isdigit() or _alive(int(pid))):
            continue
        shutil.rmtree(Path(root, name), ignore_errors=True)
        removed += 1
    return removed


def open_folder(path: str) -> str:
    """Make the worker's cell folder; ``cold`` where it held nothing yet (this process
    compiles for the cell), else ``warm``. The worker's own temporary folder is not the
    run's: the folder's path, made by its supervisor, says where that is."""
    folder = Path(path)
    if not folder.parent.exists():
        # a killed run's compilations, before this run adds its own
        clear(only_dead=True, root=str(folder.parent.parent))
    folder.mkdir(parents=True, exist_ok=True)
    return "warm" if any(folder.iterdir()) else "cold"
