"""A cell's compilations shared between its rounds: ``compile_cache: cell``.

A library that compiles for the cell (JAX's XLA: tracing, lowering and, on a GPU, choosing
kernels by timing them; Numba's njit on the CPU) pays it again in every round, since every
round is a process of its own. On a GPU that is most of a cell's cost (docs/gpu.md, "What a
GPU cell costs"). With ``compile_cache: cell`` each cell gets a folder of its own for the
library's persistent compilation cache, for the length of one run: the cell's first process
compiles and writes it (``cold``), and the later ones load what it wrote (``warm``), each as
its library counted (``label``). Each process still traces, loads and times its first call;
the cell's ``first_call_s`` is its cold processes' (what a user's first call costs), and the
report says how many loaded theirs.

What is given up: the later rounds run the kernels the first chose, so the variation of
that choice between processes is no longer sampled. That variation exists where a compiler
times candidates (XLA on a GPU), not for Numba's LLVM or XLA on a CPU, so ``cell`` is the
default and ``none`` the choice of who wants it sampled.

The folders live in the temporary folder, named by the user, the folder the run works in
and the run's process (``process.run_pid``: its host, pid and start time), so a run never
finds another's compilations (a cell measured again in a later run is cold again). Each is
made 0700 and refused unless it is this user's alone. A cell's folder goes when its last
round ends, the run's when the run ends (``clear``, beside the zygotes' end), and a run's
that was killed when the next run on that host starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
from pathlib import Path

from numbench.machine.system import START_TIME, pid_stat

#: the worker's variable naming its cell's folder; unset where the cell shares nothing
FOLDER_ENV = "NUMBENCH_COMPILE_CACHE"


def _prefix(cwd: str | None = None) -> str:
    here = os.path.abspath(cwd or os.getcwd())
    return f"numbench-compile-{os.getuid()}-{hashlib.sha256(here.encode()).hexdigest()[:8]}-"


def _started(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s 22nd
    field): with the host and the pid, it names a run that a reused pid cannot take for its
    own; None where it cannot be read (the process is gone)."""
    read = pid_stat(pid)
    return read[1][START_TIME] if read is not None and len(read[1]) > START_TIME else None


def _host() -> str:
    """This host's name as a run's folder writes it (no ``-``, which separates its parts)."""
    return socket.gethostname().replace("-", "_").replace("/", "_") or "host"


def run_tag(pid: int) -> str:
    """The run of process ``pid``, as its folder names it: host, pid and start time."""
    return f"{_host()}-{pid}-{_started(pid) or 0}"


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
    return Path(tempfile.gettempdir(), _prefix(cwd) + run_tag(run_pid), cell_name(spec))


def _dead(tag: str) -> bool:
    """Whether the run a folder names has ended: a run of this host whose process is gone,
    or whose pid now belongs to a process started later. Another host's runs (a shared
    temporary folder under Slurm) are left to that host."""
    try:
        host, pid, started = tag.rsplit("-", 2)
    except ValueError:
        return False
    if host != _host() or not pid.isdigit():
        return False
    return _started(int(pid)) != started


def clear(cwd: str | None = None, only_dead: bool = False, root: str | None = None) -> int:
    """Remove the runs' folders of this user and folder ``cwd`` (default: here) in the
    temporary folder ``root`` (default: this process's), or with ``only_dead`` those whose
    run has ended (``_dead``); how many were removed."""
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
        if only_dead and not _dead(name[len(prefix) :]):
            continue
        shutil.rmtree(Path(root, name), ignore_errors=True)
        removed += 1
    return removed


def _ours(path: Path) -> str | None:
    """Why ``path`` is not a folder only this user may write in, or None where it is: a
    folder another user made first under a name anyone can work out could hand this
    worker compiled code (a pickled index, an executable) to load."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot read it: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return "it is a link or not a folder"
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"its mode {stat.S_IMODE(st.st_mode):04o} lets others write in it"
    return None


def open_folder(path: str) -> str | None:
    """Make the worker's cell folder (mode 0700, in a run folder of mode 0700); ``cold``
    where it held nothing yet (this process will compile for the cell), ``warm`` where an
    earlier process wrote it (both until the library's own count, ``label``, says), or
    None where it is refused (not this user's alone): the process then compiles afresh and
    says so on its error stream. The worker's own temporary folder is not the run's: the
    folder's path, made by its supervisor, says where that is."""
    folder = Path(path)
    if not folder.parent.exists():
        # a killed run's compilations, before this run adds its own
        clear(only_dead=True, root=str(folder.parent.parent))
    for level in (folder.parent, folder):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level, 0o700)
        problem = _ours(level)
        if problem:
            print(f"compile_cache: not sharing {level}: {problem}", file=sys.stderr, flush=True)
            return None
    return "warm" if any(folder.iterdir()) else "cold"


def label(seen: tuple[int, int] | None) -> str | None:
    """What a process did with its cell's folder, as its library counted it after its first
    call and samples (``seen``: compilations loaded, compilations made and written):
    ``cold`` where it compiled any, ``warm`` where it loaded all it ran, None where the
    library counted neither (it kept nothing there)."""
    if seen is None or seen == (0, 0):
        return None
    return "cold" if seen[1] > 0 else "warm"


def forget(path: str | None) -> None:
    """Remove a cell's folder: its rounds are over, or the one that compiled was set aside."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
