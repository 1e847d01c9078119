"""The host's timing lock: timing cells never overlap on one host, whatever Snakemake's
``--cores`` says, whichever run or Slurm job of the user they belong to.

The lock is a file in a folder only its user can write (``/tmp/numbench-<uid>``, mode 0700,
owner and mode checked, opened without following links), so another user can neither plant
nor swap it. The holder writes a note into it (pid, host, cell, since when, the run's folder);
a cell waiting for it repeats that note in its log every ``LOCK_REPORT_S`` and gives up after
its ``lock_timeout_s`` with an error naming the holder (``LockError``, a ``MachineryFault``:
the job fails and writes no cell file).

**A timing job's start** (``keep_pandas_out``, ``exit_on_sigterm``): what a timing job's
entry point does first (``scripts/run_cell.py``), before it holds the host's timing lock:
nothing that takes CPU time.

With ``--cores`` above 1, Snakemake may start the next timing job while a cell measures; its
process then waits for the host's timing lock beside the cell. Whatever it does before it
holds the lock runs beside the cell being timed: importing NumPy, pyarrow or a library,
loading an operation or reading files would take CPU time there, on any CPU, the worker's
too. So the entry point imports only this module and the spec (the standard library and
numbench's own light modules), takes the lock, and only then imports the supervisor and what
it needs. The lock is waited for asleep: a blocking ``flock`` (``host_lock._take``), no
polling.

This module imports nothing beyond the standard library and numbench's light modules.

**A killed run's Snakemake lock** (``unlock_if_stale``): resuming a killed run: remove
Snakemake's lock only when it is stale.

A Snakemake process killed with SIGKILL (or a lost node) leaves ``.snakemake/locks`` behind,
and the next run refuses to start until ``snakemake --unlock``. ``make run`` calls
``unlock_if_stale`` first: when no live Snakemake process on this host works in the
directory, the lock is stale and is removed with ``snakemake --unlock``; the run then picks
up where it stopped (``rerun-incomplete`` in the default profile remakes the cells that were
being written). The check sees this host only: do not start a second run from another host
on a shared file system while one runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import importlib.abc
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from numbench.errors import MachineryFault, os_error_reason
from numbench.machine.system import PPID, pid_stat, process_ids, read_argv, read_cwd
from numbench.spec import CellSpec

LOCK_ENV = "NUMBENCH_TIMING_LOCK"
#: the lock file's name in the per-user lock folder (``default_lock_path``)
LOCK_NAME = "timing.lock"
#: a cell waiting for the lock says who holds it this often (seconds), in its log
LOCK_REPORT_S = 60.0
#: the most of the holder's note a waiting cell reads (the holder writes a few hundred bytes)
HOLDER_NOTE_MAX_BYTES = 4096
#: the longest text taken from one field of the holder's note
HOLDER_FIELD_MAX_CHARS = 200

#: the locks this process's threads hold (absolute path, thread), each with how many
#: ``timing_lock`` blocks of that thread hold it: a block inside another takes nothing again
_HELD: dict[tuple[str, int], int] = {}


class LockError(MachineryFault):
    """The host's timing lock cannot be used: a folder or file that is not safe, or an
    error of the system; or a cell waited ``lock_timeout_s`` for it in vain."""


def lock_root() -> Path:
    """The folder under which the per-user lock folder lives: /tmp where it is writable.

    /tmp rather than $TMPDIR or $XDG_RUNTIME_DIR: batch systems often give each job its own
    TMPDIR, and a job may have no XDG_RUNTIME_DIR or another one than an interactive login
    on the same node (systemd removes it when the user's last login ends, lock included).
    Cells of every run and every Slurm job of one user on one node must find the same path.
    """
    return Path("/tmp") if os.access("/tmp", os.W_OK) else Path(tempfile.gettempdir())


def default_lock_path(root: str | os.PathLike | None = None) -> Path:
    """One lock per host and user, ``<root>/numbench-<uid>/timing.lock``: cells of every run
    on this host queue on it. The folder is made 0700 and checked before each use
    (``timing_lock``); ``NUMBENCH_TIMING_LOCK`` names another file instead."""
    return Path(root or lock_root()) / f"numbench-{os.getuid()}" / LOCK_NAME


def _open_folder(folder: Path, checked: bool) -> int:
    """A descriptor of the lock's folder. ``checked`` (numbench's own folder): made 0700 if
    absent, and refused unless it is a real folder that this user owns and nobody else may
    write in, so no other user can plant or swap the lock file."""
    fix = (
        f"remove it (numbench makes it again, mode 0700), or name another lock file with {LOCK_ENV}"
    )
    if checked:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise LockError(
                f"cannot make the timing lock's folder {folder}: {os_error_reason(exc)}"
            ) from exc
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if checked else 0)
    try:
        fd = os.open(folder, flags)
    except OSError as exc:
        if checked and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LockError(
                f"refusing the timing lock's folder {folder}: it is a link or not a folder; " + fix
            ) from None
        raise LockError(
            f"cannot open the timing lock's folder {folder}: {os_error_reason(exc)}"
        ) from exc
    if checked:
        st, uid = os.fstat(fd), os.getuid()
        problem = None
        if st.st_uid != uid:
            problem = f"it belongs to uid {st.st_uid}, not to this user (uid {uid})"
        elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            problem = f"its mode {stat.S_IMODE(st.st_mode):04o} lets others write in it"
        if problem:
            os.close(fd)
            raise LockError(f"refusing the timing lock's folder {folder}: {problem}; {fix}")
    return fd


def _open_lock_file(folder_fd: int, name: str, path: Path) -> int:
    """Open (creating, 0600) the lock file without following a link, and refuse anything
    but a regular file of this user's."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, 0o600, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockError(
                f"refusing the timing lock {path}: it is a symbolic link; remove it"
            ) from None
        raise LockError(f"cannot open the timing lock {path}: {os_error_reason(exc)}") from exc
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "it is not a regular file"
    elif st.st_uid != os.getuid():
        problem = f"it belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if problem:
        os.close(fd)
        raise LockError(f"refusing the timing lock {path}: {problem}; remove it")
    return fd


def _same_file(fd: int, folder_fd: int, name: str) -> bool:
    """True while the name still leads to the open file (a cleaner of /tmp may have removed
    it, and a new file under the name would be a second lock)."""
    try:
        there = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def _printable(value, limit: int = HOLDER_FIELD_MAX_CHARS) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(value)[:limit])


def holder_of(fd: int) -> str:
    """Who holds the lock, in words, from the note its holder wrote into it
    (``_write_note``): pid, cell, since when, and the run's folder."""
    try:
        note = json.loads(os.pread(fd, HOLDER_NOTE_MAX_BYTES, 0).decode("utf-8"))
        pid, what, since = note["pid"], note["cell"], float(note["since_unix"])
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is (yet)"
    held_s = max(0.0, time.time() - since)
    when = dt.datetime.fromtimestamp(since, dt.UTC).isoformat(timespec="seconds")
    return (
        f"pid {_printable(pid)} on {_printable(note.get('host', '?'))} ({_printable(what)}, "
        f"run in {_printable(note.get('cwd', '?'))}) since {when} ({held_s / 60:.0f} min)"
    )


def _write_note(fd: int, what: str) -> None:
    """Say in the lock file who holds it, for the cells that wait; a note that cannot be
    written (a full /tmp) only leaves them without it."""
    note = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "cell": what,
        "since_unix": time.time(),
        "cwd": os.getcwd(),
    }
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(note).encode("utf-8"), 0)


def _take(
    fd: int,
    path: Path,
    timeout_s: float | None,
    say: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Take the lock on ``fd``, saying who holds it every ``LOCK_REPORT_S`` while waiting,
    and giving up after ``timeout_s`` (None: never).

    The wait blocks in ``flock`` on a helper thread while this one sleeps until the next
    report: nothing wakes in between, so a waiting cell costs the cell that measures no CPU
    (polling would wake it several times a second). A thread given up on is left blocked:
    once the descriptor is closed, the lock it may still get is dropped as it returns.
    ``clock`` reads the seconds waited (tests hand in a constructed one).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    except OSError as exc:
        raise LockError(f"cannot take the timing lock {path}: {os_error_reason(exc)}") from exc
    taken, failed = threading.Event(), []

    def block() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            failed.append(exc)
        finally:
            taken.set()

    limit = "no limit" if timeout_s is None else f"lock_timeout_s = {timeout_s:g} s"
    say(f"waiting for the host's timing lock {path}, held by {holder_of(fd)} ({limit})")
    t0 = clock()
    waiter = threading.Thread(target=block, name="numbench-timing-lock", daemon=True)
    waiter.start()
    while True:
        left = None if timeout_s is None else timeout_s - (clock() - t0)
        if taken.wait(LOCK_REPORT_S if left is None else max(0.0, min(LOCK_REPORT_S, left))):
            break
        waited = clock() - t0
        if timeout_s is not None and waited >= timeout_s:
            raise LockError(
                f"gave up waiting for the host's timing lock {path} after {waited:.0f} s "
                f"(lock_timeout_s = {timeout_s:g}): it is held by {holder_of(fd)}"
            )
        say(f"still waiting for the timing lock ({waited:.0f} s), held by {holder_of(fd)}")
    waiter.join()  # ended with the flock: no thread outlives the wait to see the workers' fork
    if failed:
        raise LockError(f"cannot take the timing lock {path}: {os_error_reason(failed[0])}")
    say(f"took the timing lock after {clock() - t0:.0f} s")


@contextlib.contextmanager
def timing_lock(
    path: str | os.PathLike | None = None,
    *,
    holder: str = "",
    timeout_s: float | None = None,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
    clock: Callable[[], float] = time.monotonic,
):
    """Hold the host's timing lock (an exclusive ``flock``) for the block.

    ``path``, else ``NUMBENCH_TIMING_LOCK``, else ``default_lock_path()``, whose folder is
    checked (``_open_folder``). The file is opened with ``O_NOFOLLOW`` and must be this
    user's regular file. Once taken, the holder writes its note (pid, ``holder``: the cell,
    since when) into the file for the cells that wait (``_take``). Every failure is a
    ``LockError``: the cell's job fails, the library is not blamed. ``clock``: the seconds
    waited are read on it (``_take``).

    A block inside another of the same thread that holds the same lock holds it already: it
    takes nothing and lets go of nothing (a second ``flock`` of the file would wait for the
    first forever); another thread still waits, as another process does. A timing job's entry point takes the lock before it imports anything
    heavy (``keep_pandas_out``), and the supervisor's own block enters within it.
    """
    chosen = path or os.environ.get(LOCK_ENV)
    lock = Path(chosen) if chosen else default_lock_path()
    key = (os.path.abspath(lock), threading.get_ident())
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    folder_fd = _open_folder(lock.parent, checked=not chosen)
    try:
        while True:
            fd = _open_lock_file(folder_fd, lock.name, lock)
            try:
                _take(fd, lock, timeout_s, say, clock)
                if _same_file(fd, folder_fd, lock.name):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed or replaced while we waited: queue on the file there now
        try:
            _write_note(fd, holder)
            _HELD[key] = 1
            yield
        finally:
            _HELD.pop(key, None)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # drops the lock
    finally:
        os.close(folder_fd)


def cell_label(spec: CellSpec, replicate: int | None = None) -> str:
    """The cell, in words, for the lock's note and messages: "numpy/cpu sort 1000 float64
    t1" (and ", round 0" for an early round)."""
    label = (
        f"{spec.library}/{spec.device} {spec.operation} {spec.size} {spec.dtype} t{spec.threads}"
    )
    return label if replicate is None else f"{label}, round {replicate}"


# -- a timing job's start: nothing that takes CPU time before the lock ---------------------
#: the exit status of a job stopped by SIGTERM (128 + 15, as a shell reports one killed by it)
TERMINATED_EXIT = 143


class _NoPandas(importlib.abc.MetaPathFinder):
    """Makes ``import pandas`` fail in the supervisor, as if pandas were not installed.

    The supervisor never uses pandas, but pyarrow imports it lazily the first time it builds
    an array (to check whether the input is a DataFrame): a quarter of a second per cell spent
    on nothing. pyarrow treats a failed import as "no pandas" and carries on.
    """

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"the cell supervisor does not load {name}", name=name)
        return None


def keep_pandas_out() -> None:
    """Install ``_NoPandas`` (in the supervisor's own process only: the entry point calls it)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def _terminated(signum, frame) -> None:
    raise SystemExit(TERMINATED_EXIT)


def exit_on_sigterm() -> None:
    """Make SIGTERM end the job as ``SystemExit(TERMINATED_EXIT)`` (the entry point calls
    it): the default ends the process at once, so the workflow's processes would keep the
    narrowed CPUs (``numbench.measure.apart``); raised, it unwinds the job's context
    managers, which give them back and let go of the timing lock (or stop waiting for it).
    SIGKILL cannot be caught."""
    signal.signal(signal.SIGTERM, _terminated)


# -- a killed run's stale Snakemake lock, removed before the next run ---------------------
def lock_files(workdir: str | os.PathLike) -> list[Path]:
    locks = Path(workdir, ".snakemake", "locks")
    return sorted(locks.iterdir()) if locks.is_dir() else []


def snakemake_running_in(workdir: str | os.PathLike) -> list[int]:
    """Pids of live Snakemake processes on this host whose working directory is ``workdir``
    (this process and its ancestors excepted)."""
    target = Path(workdir).resolve()
    mine = {os.getpid()}
    pid = os.getpid()
    while pid > 1:  # ancestors: make, a shell
        stat = pid_stat(pid)
        if stat is None:
            break
        try:
            pid = int(stat[1][PPID])
        except (ValueError, IndexError):
            break
        mine.add(pid)
    found = []
    for pid in process_ids():
        if pid in mine or not any("snakemake" in arg for arg in read_argv(pid)):
            continue
        if read_cwd(pid) == target:
            found.append(pid)
    return found


def unlock_if_stale(workdir: str | os.PathLike = ".", python: str = sys.executable) -> str:
    """Remove a stale Snakemake lock; return what was done, in one line."""
    if not lock_files(workdir):
        return "no lock"
    running = snakemake_running_in(workdir)
    if running:
        return f"locked by a running Snakemake (pid {', '.join(map(str, running))}); left alone"
    subprocess.run(
        [python, "-m", "snakemake", "--unlock", "--cores", "1"],
        cwd=workdir,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return "stale lock of a killed run removed (snakemake --unlock)"
