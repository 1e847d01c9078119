"""The cell supervisor: a light process (no numerical library imported) that runs the
measuring worker as a child and writes the cell's Parquet with a status.

It sets the same thread limits for every library before the worker imports anything, holds
a host-wide lock so that timing cells never overlap on one host whatever Snakemake's
``--cores`` says (``timing_lock``), and turns every way the worker can end into a status:
its own report, a timeout past ``cell_timeout_s`` (``timeout``), memory beyond
``cell_memory_limit_mb`` (``crashed``, said as out of memory), death by a signal
(``crashed``, the signal named), or an exit without a report (``failed``). Each of those is
the library's outcome: the cell's Parquet is written and the supervisor exits 0, so the
workflow goes on.

A fault of numbench's own machinery or of the host is no outcome of the library, and is
never stored as one: the lock cannot be taken, the cell's file or a round's cannot be
written (a full disk, a folder that is not writable), the worker cannot start or cannot
write its report, numbench itself raises. Each raises ``MachineryFault`` (or the error
itself, for a bug): no cell file is written and the job fails with the reason, so
Snakemake's ``--retries`` and the next run measure the cell again (``scripts/run_cell.py``).

The memory limit is enforced by watching the resident memory (RSS, from ``/proc``) of the
worker and its children every ``POLL_S`` seconds, not by ``RLIMIT_AS``: JAX, TensorFlow and
CUDA reserve far more address space than they touch, so an address-space limit would fail
them at import while they use little memory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import importlib.abc
import json
import os
import platform
import random
import select
import signal
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from numbench import libraries, operations
from numbench.replicates import (
    BASELINE,
    MEASURED,
    ProcessRun,
    RoundFileError,
    measure_replicates,
    measure_round,
    read_rounds,
    write_round,
)
from numbench.spec import CellMeta, CellSpec, ProcessReport
from numbench.tables import STATUSES, cell_table, write_atomic
from numbench.turns import ENOUGH, GO, MORE, READY, SAMPLE, TURNS_ENV, LineChannel
from numbench.worker import MACHINERY_FAULT_EXIT, SUPERVISOR_ENV


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


POLL_S = 0.05


class MachineryFault(RuntimeError):
    """A fault of numbench's machinery or of the host, not of the library measured: the
    cell's job fails with this message and writes no cell file (the module's docstring)."""


def _why(exc: OSError) -> str:
    """An OSError in words: its reason and the file it names (pyarrow's carry neither)."""
    if exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def machinery(what: str):
    """Raise an OSError of the block as a ``MachineryFault`` saying ``what`` failed."""
    try:
        yield
    except OSError as exc:
        raise MachineryFault(f"{what}: {_why(exc)}") from exc


# -- the host's timing lock ---------------------------------------------------------------

LOCK_ENV = "NUMBENCH_TIMING_LOCK"
#: the lock file's name in the per-user lock folder (``default_lock_path``)
LOCK_NAME = "timing.lock"
#: a cell waiting for the lock says who holds it this often (seconds), in its log
LOCK_REPORT_S = 60.0
#: the most of the holder's note a waiting cell reads (the holder writes a few hundred bytes)
HOLDER_NOTE_MAX_BYTES = 4096
#: the longest text taken from one field of the holder's note
HOLDER_FIELD_MAX_CHARS = 200


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
            raise LockError(f"cannot make the timing lock's folder {folder}: {_why(exc)}") from exc
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if checked else 0)
    try:
        fd = os.open(folder, flags)
    except OSError as exc:
        if checked and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LockError(
                f"refusing the timing lock's folder {folder}: it is a link or not a folder; " + fix
            ) from None
        raise LockError(f"cannot open the timing lock's folder {folder}: {_why(exc)}") from exc
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
        raise LockError(f"cannot open the timing lock {path}: {_why(exc)}") from exc
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
) -> None:
    """Take the lock on ``fd``, saying who holds it every ``LOCK_REPORT_S`` while waiting,
    and giving up after ``timeout_s`` (None: never).

    The wait blocks in ``flock`` on a helper thread while this one sleeps until the next
    report: nothing wakes in between, so a waiting cell costs the cell that measures no CPU
    (polling would wake it several times a second). A thread given up on is left blocked:
    once the descriptor is closed, the lock it may still get is dropped as it returns.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    except OSError as exc:
        raise LockError(f"cannot take the timing lock {path}: {_why(exc)}") from exc
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
    t0 = time.monotonic()
    waiter = threading.Thread(target=block, name="numbench-timing-lock", daemon=True)
    waiter.start()
    while True:
        left = None if timeout_s is None else timeout_s - (time.monotonic() - t0)
        if taken.wait(LOCK_REPORT_S if left is None else max(0.0, min(LOCK_REPORT_S, left))):
            break
        waited = time.monotonic() - t0
        if timeout_s is not None and waited >= timeout_s:
            raise LockError(
                f"gave up waiting for the host's timing lock {path} after {waited:.0f} s "
                f"(lock_timeout_s = {timeout_s:g}): it is held by {holder_of(fd)}"
            )
        say(f"still waiting for the timing lock ({waited:.0f} s), held by {holder_of(fd)}")
    waiter.join()  # ended with the flock: no thread outlives the wait to see the workers' fork
    if failed:
        raise LockError(f"cannot take the timing lock {path}: {_why(failed[0])}")
    say(f"took the timing lock after {time.monotonic() - t0:.0f} s")


@contextlib.contextmanager
def timing_lock(
    path: str | os.PathLike | None = None,
    *,
    holder: str = "",
    timeout_s: float | None = None,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
):
    """Hold the host's timing lock (an exclusive ``flock``) for the block.

    ``path``, else ``NUMBENCH_TIMING_LOCK``, else ``default_lock_path()``, whose folder is
    checked (``_open_folder``). The file is opened with ``O_NOFOLLOW`` and must be this
    user's regular file. Once taken, the holder writes its note (pid, ``holder``: the cell,
    since when) into the file for the cells that wait (``_take``). Every failure is a
    ``LockError``: the cell's job fails, the library is not blamed.
    """
    chosen = path or os.environ.get(LOCK_ENV)
    lock = Path(chosen) if chosen else default_lock_path()
    folder_fd = _open_folder(lock.parent, checked=not chosen)
    try:
        while True:
            fd = _open_lock_file(folder_fd, lock.name, lock)
            try:
                _take(fd, lock, timeout_s, say)
                if _same_file(fd, folder_fd, lock.name):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed or replaced while we waited: queue on the file there now
        try:
            _write_note(fd, holder)
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # drops the lock
    finally:
        os.close(folder_fd)


def cell_label(spec: CellSpec, replicate: int | None = None) -> str:
    """The cell, in words, for the lock's note and messages: "numpy/cpu sort 1000 float64
    t1" (and ", round 0" for a spread round)."""
    label = (
        f"{spec.library}/{spec.device} {spec.operation} {spec.size} {spec.dtype} t{spec.threads}"
    )
    return label if replicate is None else f"{label}, round {replicate}"


def worker_environment(spec: CellSpec) -> dict[str, str]:
    adapter = libraries.get(spec.library)(spec.device, spec.dtype, spec.threads)
    env = dict(os.environ)
    env.update(libraries.thread_environment(spec.threads))
    env.update(libraries.allocator_environment(spec.allocator))
    env.update(adapter.environment())
    env["PYTHONUNBUFFERED"] = "1"
    env[SUPERVISOR_ENV] = str(os.getpid())
    # The worker imports numbench too, installed or not.
    src = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def host_metadata(spec: CellSpec) -> CellMeta:
    op = operations.get(spec.operation)
    itemsize = 4 if spec.dtype == "float32" else 8
    params = op.resolve_params(spec.params)
    flops, bytes_moved = op.cost(spec.size, itemsize, params)
    return CellMeta(
        host=socket.gethostname(),
        cpu_model=libraries.cpu_model(),
        threads=spec.threads,
        allocator=spec.allocator,
        timing_settings=json.dumps(asdict(spec.timing), sort_keys=True),
        replicate_settings=json.dumps(asdict(spec.replicates), sort_keys=True),
        python_version=platform.python_version(),
        python_executable=sys.executable,
        platform=platform.platform(),
        params=operations.params_json(params),
        flops=flops,
        bytes=bytes_moved,
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        cpu_count=os.cpu_count(),
        ram_gb=ram_gb(),
    )


def ram_gb() -> float | None:
    """Physical memory of the host in GB (10^9 bytes), where the OS tells."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/children", encoding="ascii") as fh:
                kids.extend(int(k) for k in fh.read().split())
    except OSError:
        pass
    return kids


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError):
        pass
    return 0.0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (0 where /proc lacks it)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _rss_mb(p)
        todo.extend(_children(p))
    return total


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_over_memory(proc: subprocess.Popen, memory_limit_mb: float | None) -> ProcessReport | None:
    """Kill the worker's whole session if its tree's resident memory is over the limit, and
    return the status of the kill; None while it is within (or there is no limit)."""
    if not memory_limit_mb:
        return None
    rss = tree_rss_mb(proc.pid)
    if rss <= memory_limit_mb:
        return None
    _kill_group(proc)
    return ProcessReport(
        status="crashed",
        error=f"out of memory: the worker used {rss:.0f} MB, over "
        f"cell_memory_limit_mb = {memory_limit_mb:g}; worker killed",
        peak_rss_mb=rss,
    )


def supervise(
    proc: subprocess.Popen, timeout_s: float, memory_limit_mb: float | None
) -> ProcessReport | None:
    """Wait for the worker; kill its whole session past the time or memory limit.

    Returns the status of a kill, or None when the worker ended by itself.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            return None
        except subprocess.TimeoutExpired:
            pass
        killed = kill_over_memory(proc, memory_limit_mb)
        if killed is not None:
            return killed
        if time.monotonic() >= deadline:
            _kill_group(proc)
            return ProcessReport(
                status="timeout",
                error=f"no result within cell_timeout_s = {timeout_s:g} s; worker killed",
            )


def _prepare(spec: CellSpec, tmp: str) -> tuple[list[str], dict[str, str], Path]:
    """The worker's command, environment and result file, in the temporary folder ``tmp``.

    The worker is the ``python`` of the environment the rule runs in (the one first on
    ``PATH``, as a venv or Snakemake's ``--sdm conda`` arranges): the supervisor's own
    interpreter, which the rule started the same way.
    """
    spec_path, result_path = Path(tmp, "spec.json"), Path(tmp, "result.json")
    spec_path.write_text(spec.to_json(), encoding="utf-8")
    cmd = [sys.executable, "-m", "numbench.worker", str(spec_path), str(result_path)]
    # The worker's own temporary folder, removed with this one: a worker leaves without
    # the interpreter's teardown (worker.leave), so the temporary files libraries delete
    # at exit (TensorFlow's autograph modules, one per tf.function) would stay in /tmp,
    # and compiler caches there (torch.compile's) would carry over from other processes.
    env = worker_environment(spec)
    env["TMPDIR"] = str(Path(tmp, "tmp"))
    Path(env["TMPDIR"]).mkdir()
    sys.stdout.flush()
    sys.stderr.flush()
    return cmd, env, result_path


def _scratch(stack: contextlib.ExitStack) -> str:
    """A temporary folder for one worker, removed when ``stack`` closes."""
    with machinery("the worker cannot start: no temporary folder"):
        return stack.enter_context(tempfile.TemporaryDirectory(prefix="numbench-cell-"))


def run_worker(spec: CellSpec) -> ProcessReport:
    """Run one worker in its own session; return its report or a status for how it ended.
    A worker that cannot start is a ``MachineryFault``."""
    with contextlib.ExitStack() as stack:
        tmp = _scratch(stack)
        with machinery("the worker cannot start"):
            cmd, env, result_path = _prepare(spec, tmp)
            proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            killed = supervise(proc, spec.timeout_s, spec.memory_limit_mb)
        except BaseException:
            _kill_group(proc)  # the supervisor itself is stopped: take the worker along
            raise
        if killed is not None:
            return killed
        return ended_report(proc.returncode, result_path)


def ended_report(returncode: int, result_path: Path) -> ProcessReport:
    """The report of a worker that ended by itself: the one it wrote or, without one, a
    status for how it ended. A report that cannot be read, or a worker that says it could
    not read its spec or write its report (``MACHINERY_FAULT_EXIT``), is a
    ``MachineryFault``: numbench's fault, or the host's, never the library's."""
    if result_path.exists():
        try:
            report = ProcessReport.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            raise MachineryFault(f"the worker's report {result_path} is unreadable: {exc}") from exc
        if report.status not in STATUSES:
            raise MachineryFault(f"the worker reported an unknown status {report.status!r}")
        return report
    if returncode == MACHINERY_FAULT_EXIT:
        raise MachineryFault(
            f"the worker could not read its spec or write its report (exit {returncode}); "
            "its reason is in the cell log"
        )
    if returncode < 0:
        name = _signal_name(returncode)
        hint = ""
        if -returncode == signal.SIGKILL:
            hint = "; a SIGKILL nobody sent by hand is usually the kernel's out-of-memory killer"
        return ProcessReport(
            status="crashed", error=f"worker died by {name} (exit {returncode}){hint}"
        )
    return ProcessReport(
        status="failed",
        error=f"worker exited with status {returncode} without a result; see the cell log",
    )


@dataclass
class _Partner:
    """One live worker of a lockstep round, as the supervisor sees it."""

    spec: CellSpec
    proc: subprocess.Popen
    channel: LineChannel
    result_path: Path
    started_unix: float
    #: seconds the supervisor has waited on it while it ran (its time limit counts these)
    active_s: float = 0.0
    #: the last word it said (``ready``, ``more``, ``enough``); None once it has ended
    said: str | None = None
    report: ProcessReport | None = None


def _start_partner(spec: CellSpec, tmp: str) -> _Partner:
    with machinery("the worker cannot start"):
        cmd, env, result_path = _prepare(spec, tmp)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
    env[TURNS_ENV] = f"{to_worker_r},{from_worker_w}"
    started = time.time()
    try:
        with machinery("the worker cannot start"):
            proc = subprocess.Popen(
                cmd, env=env, start_new_session=True, pass_fds=(to_worker_r, from_worker_w)
            )
    except BaseException:
        for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
            os.close(fd)
        raise
    os.close(to_worker_r)
    os.close(from_worker_w)
    return _Partner(spec, proc, LineChannel(from_worker_r, to_worker_w), result_path, started)


def _hear(partner: _Partner) -> str | None:
    """Wait for the partner's next word while it runs, its memory watched and its time
    counted against its limit; None once it has ended (its report is then set)."""
    spec, proc = partner.spec, partner.proc
    t0 = time.monotonic()
    try:
        while True:
            if partner.channel.has_line():
                return partner.channel.take_line()
            remaining = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
            readable, _, _ = select.select(
                [partner.channel.read_fd], [], [], max(0.0, min(POLL_S, remaining))
            )
            if readable and partner.channel.read_some():
                continue
            if readable or proc.poll() is not None:
                # the pipe closed or the worker exited: it is ending, under its limits
                left = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
                killed = supervise(proc, max(0.0, left), spec.memory_limit_mb)
                partner.report = killed or ended_report(proc.returncode, partner.result_path)
                return None
            partner.report = kill_over_memory(proc, spec.memory_limit_mb)
            if partner.report is not None:
                return None
            if remaining <= 0:
                _kill_group(proc)
                partner.report = ProcessReport(
                    status="timeout",
                    error=f"no result within cell_timeout_s = {spec.timeout_s:g} s of its "
                    "own (its partner's turns not counted); worker killed",
                )
                return None
    finally:
        partner.active_s += time.monotonic() - t0


def run_lockstep(specs: list[CellSpec], seed: int) -> list[tuple[float, ProcessReport]]:
    """Run the processes of a lockstep round (``numbench.turns``): started in this order,
    each one prepared while the other waits, their samples taken in turns in an order seeded
    by ``seed``, then each finished in turn. Returns each one's start (Unix seconds) and its
    report, in the order given.

    Every way a worker can end is its own status, as with ``run_worker``; its time limit
    counts only the time it runs, not its partner's turns. A partner that ends, however it
    ends, frees the other, which takes the samples it still needs alone.
    """
    rng = random.Random(seed)
    partners: list[_Partner] = []
    with contextlib.ExitStack() as stack:
        try:
            for spec in specs:
                partner = _start_partner(spec, _scratch(stack))
                partners.append(partner)
                partner.said = _hear(partner)  # ready, or ended before its samples
            while all(p.said in (READY, MORE) for p in partners):
                for partner in rng.sample(partners, len(partners)):
                    partner.channel.say(SAMPLE)  # a gone worker is seen by _hear
                    partner.said = _hear(partner)
            # those still sampling finish first, so their samples stay close to the others'
            for partner in sorted(partners, key=lambda p: p.said == ENOUGH):
                if partner.report is None:
                    partner.channel.say(GO)
                while partner.report is None:
                    _hear(partner)
        except BaseException:
            for partner in partners:
                if partner.proc.poll() is None:
                    _kill_group(partner.proc)  # the supervisor is stopped: take them along
            raise
        finally:
            for partner in partners:
                partner.channel.close()
    return [(p.started_unix, p.report) for p in partners]


@dataclass
class CellResult:
    """What a cell produced: the host's metadata (with the cell's status) and its processes."""

    meta: CellMeta
    runs: list[ProcessRun]

    @property
    def status(self) -> str:
        return self.meta.status

    @property
    def error(self) -> str | None:
        return self.meta.error


def cell_status(runs: list[ProcessRun]) -> tuple[str, str | None]:
    """The first process of the cell's own library that was not ``ok`` decides the status."""
    for run in runs:
        if run.role == MEASURED and run.report.status != "ok":
            return run.report.status, run.report.error
    return "ok", None


def check_writable(output: str | os.PathLike) -> None:
    """Fail before measuring when the cell's (or round's) file could not be written: its
    folder cannot be made, or a file cannot be created in it. Minutes of measuring would
    otherwise be lost at the end."""
    output = Path(output)
    with machinery(f"cannot write {output}"):
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
        os.close(fd)
        os.unlink(probe)


def run_round(
    spec: CellSpec,
    replicate: int,
    output: str | os.PathLike,
    lock: str | None = None,
    lock_timeout_s: float | None = None,
) -> list[ProcessRun]:
    """Measure one spread round of a cell (its own process and, paired, a baseline process)
    under the host lock, and write it for the cell's job (``replicates.write_round``).

    A process's fault is written like any other outcome: the cell's job reads it and ends
    the cell. A fault of the machinery raises (``MachineryFault``) and writes nothing.
    """
    t0 = time.perf_counter()
    check_writable(output)
    label = cell_label(spec, replicate)
    with timing_lock(lock, holder=label, timeout_s=lock_timeout_s):
        runs = measure_round(spec, replicate, run_worker, spec.paired_spec(), run_lockstep)
    with machinery(f"cannot write the round's file {output}"):
        write_round(output, spec, runs, time.perf_counter() - t0)
    return runs


def _read_earlier(paths: list[str | os.PathLike], spec: CellSpec) -> tuple[list[ProcessRun], float]:
    """The cell's spread rounds (``replicates.read_rounds``). One that cannot be used is
    removed, so that the next run measures that round again, and the job fails naming it."""
    try:
        return read_rounds(paths, spec)
    except RoundFileError as exc:
        with contextlib.suppress(OSError):
            Path(exc.path).unlink(missing_ok=True)
        raise MachineryFault(
            f"{exc}; removed it, so that the next run measures that round again"
        ) from None


def run_cell(
    spec: CellSpec,
    output: str | os.PathLike,
    lock: str | None = None,
    earlier: list[str | os.PathLike] = (),
    lock_timeout_s: float | None = None,
) -> CellResult:
    """Measure one cell (its replicate processes) under the host lock and write its Parquet.

    ``earlier``: the files of the cell's spread rounds, measured by jobs of their own; the
    cell continues from them. ``lock_timeout_s``: how long to wait for the host's timing
    lock (the config's ``lock_timeout_s``; None waits without a limit). Every outcome of the library writes the Parquet; a fault of
    numbench's machinery or of the host (the lock, an unusable round file, a worker that
    cannot start, a file that cannot be written) raises ``MachineryFault`` and writes none.
    """
    t0 = time.perf_counter()
    check_writable(output)
    meta = host_metadata(spec)
    before, earlier_wall = _read_earlier(list(earlier), spec)
    with timing_lock(lock, holder=cell_label(spec), timeout_s=lock_timeout_s):
        meta.locked_from_unix = time.time()
        runs, pairing_error = measure_replicates(spec, run_worker, before, run_lockstep)
        meta.locked_until_unix = time.time()
    meta.wall_s = time.perf_counter() - t0 + earlier_wall
    meta.status, meta.error = cell_status(runs)
    if meta.status == "ok" and pairing_error:
        meta.error = pairing_error
    own = [r for r in runs if r.role == MEASURED]
    meta.replicates = len(own)
    meta.paired_with = spec.paired_with if any(r.role == BASELINE for r in runs) else None
    meta.lockstep = spec.replicates.lockstep if meta.paired_with else None
    samples = [s for r in own for s in r.report.samples_s]
    if meta.status == "ok" and samples:
        median = statistics.median(samples)
        if median > 0 and meta.flops is not None:
            meta.gflop_per_s = meta.flops / median / 1e9
            meta.gb_per_s = meta.bytes / median / 1e9
    with machinery(f"cannot write the cell's file {output}"):
        write_atomic(cell_table(spec.key, meta, runs), output)
    return CellResult(meta, runs)
