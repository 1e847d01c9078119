"""Workers forked from a process that has imported their library: ``worker_start: fork``
(config/README.md; the method, and what a fork shares, in docs/method.md, "Workers forked
from a zygote"), where ``exec`` starts a fresh interpreter for every worker.

A zygote has imported one library with the environment its workers get, and then numbench's
own modules that every worker imports (``WORKER_MODULES``, only where the library's import
brought NumPy in, so that ``import_s`` stays the library's alone); it asks for no device,
makes no thread pool and compiles no kernel. Everything after the import happens in each
forked worker, as in a fresh one, and each draws its own address-space layout first
(``vary_layout``). A library whose import leaves a thread running (but jemalloc's, which is
fork-safe) is refused: its workers start fresh, and their reports say why.

One zygote serves one key (``socket_name``): the interpreter, the library, the environment's
variables but those that differ per worker (``VOLATILE``), the folder, and a digest of the
code it imported (``worker_code``: numbench's files and the adapter files
``NUMBENCH_ADAPTERS`` names), so an edit made during a run reaches the next worker. It
listens on an abstract Unix socket (Linux only), answers only its own user, is started by
the first worker that needs it (``launch``) and serves until idle for ``IDLE_S``, told to
stop (``stop_all``) or its run ends. Each worker is the zygote's child: the zygote relays
its pid, its exit status and its CPU time, which the supervisor counts as its own
(``ForkedWorker``, ``relayed_cpu_s``). A worker whose supervisor goes is killed by the
zygote; one whose zygote dies, by the kernel (``PR_SET_PDEATHSIG``).

**A job's zygote** (key ``JOB``) has imported numbench's supervisor instead, and forks each
timing job's process (``numbench.measure.job``); its children draw no layout (they measure
nothing), and NumPy is imported in it with one BLAS thread (``JOB_IMPORT_THREADS``).
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: a zygote ends after this many seconds with no worker and no request
IDLE_S = 60.0
#: the environment variable that sets ``IDLE_S`` (tests shorten it)
IDLE_ENV = "NUMBENCH_ZYGOTE_IDLE_S"
#: how the abstract socket's name begins
PREFIX = "numbench-zygote"
#: variables that differ from worker to worker and are set in each child, not in the key
VOLATILE = frozenset(
    "NUMBENCH_SUPERVISOR_PID NUMBENCH_TURNS NUMBENCH_COMPILE_CACHE TMPDIR _ NUMBENCH_JOB_PID"
    " NUMBENCH_JOB_PARENT OLDPWD PWD SHLVL".split()
)
#: threads a library may leave running at import that are safe across a fork
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})
#: a job's zygote's key, where a worker's names its library, and the module its children run
JOB, JOB_MODULE = "numbench-job", "numbench.measure.job"
#: set in a job's forked process: the pid of the job's own process (waiting) and its parent's
JOB_PID_ENV, JOB_PARENT_ENV = "NUMBENCH_JOB_PID", "NUMBENCH_JOB_PARENT"
#: what ``fork_worker`` says where no zygote serves and it was told not to start one
NOT_SERVING = "exec: no zygote serves"
#: a job's zygote imports NumPy with these set to 1 (and unsets them after): a BLAS thread
#: pool cannot cross a fork; the supervisor computes nothing, a worker's env sets its own
JOB_IMPORT_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: the modules imported in a zygote, per library adapter (its ``module`` where not listed)
PRELOAD = {
    "jax": ("jax", "jax.numpy"),
    "numba": ("numpy", "numba"),
    "numpy": ("numpy",),
    "torch": ("numpy", "torch"),
    "tensorflow": ("numpy", "tensorflow"),
    "cupy": ("numpy", "cupy"),
    # the job's module and what it imports: each child calls its entry (``job.forked``)
    JOB: ("numbench.measure.supervisor", "numbench.measure.quiet", "numbench.measure.job"),
}
#: numbench's modules a worker's zygote imports after its library, the worker's own last
WORKER_MODULES = tuple(
    "numbench.spec numbench.timing numbench.inputs_file numbench.measure.cpu_taken"
    " numbench.measure.lockstep numbench.measure.compile_cache numbench.operations"
    " numbench.operations.kernels numbench.operations.check numbench.libraries"
    " numbench.measure.worker".split()
)
#: the exit status of a child whose set-up failed before the worker ran
SETUP_FAULT_EXIT = 70
#: the module a forked child runs, as a fresh worker does with ``python -m``
WORKER_MODULE = "numbench.measure.worker"
#: how a forked worker learns what its zygote did for it (``worker.Forked``, as JSON)
FORKED_ENV = "NUMBENCH_FORKED"
#: the layout a forked child drew (``vary_layout``), kept for its life
_layout = None
MAX_FDS = 16
PAGE = 4096

_relayed_cpu_s = 0.0
#: per socket name: why this process starts that key's workers fresh (learnt once)
_refused: dict[str, str] = {}


def relayed_cpu_s() -> float:
    """CPU seconds of the workers this process had forked by zygotes (and of the zygotes'
    own work for them and their imports), counted as this process's own."""
    return _relayed_cpu_s


def _relay(seconds: float) -> None:
    global _relayed_cpu_s
    _relayed_cpu_s += max(0.0, float(seconds))


def supported() -> bool:
    """Whether workers can be forked here: Linux (abstract sockets, ``PR_SET_PDEATHSIG``)."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def socket_name(
    library: str, python: str, env: dict[str, str], cwd: str | None = None, code: str = ""
) -> str:
    """The zygote's address for a worker of ``library`` run by ``python`` with ``env``: the
    user, the folder, and a digest of everything a worker's import depends on (``code``:
    the digest of numbench's files it imported, ``worker_code`` or ``package_digest``)."""
    stable = sorted((k, v) for k, v in env.items() if k not in VOLATILE)
    # the interpreter as named, not resolved: a venv's python links to its base's
    key = json.dumps([os.path.abspath(python), library, stable, code], separators=(",", ":"))
    return _names_begin(cwd) + hashlib.sha256(key.encode()).hexdigest()[:20]


def package_root() -> Path:
    """The folder of the numbench package this process runs."""
    return Path(__file__).resolve().parents[1]


def package_digest(root: Path | None = None, also: tuple[str, ...] = ()) -> str:
    """A digest of numbench's own files as they are now (those under ``root``, by default
    the package's), and of the files ``also`` names: each one's path, size and time of
    change."""
    root = package_root() if root is None else root
    seen = []
    for path in [*sorted(root.rglob("*.py")), *map(Path, also)]:
        with contextlib.suppress(OSError):
            info = path.stat()
            name = path.relative_to(root) if path.is_relative_to(root) else path.resolve()
            seen.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(seen).encode()).hexdigest()[:20]


def worker_code(env: dict[str, str]) -> str:
    """A worker's zygote's ``code``: numbench's files and the adapter files that ``env``'s
    ``NUMBENCH_ADAPTERS`` names (a module named by import path is the user's to keep still)."""
    from numbench.libraries import EXTRA_ADAPTERS_ENV

    named = env.get(EXTRA_ADAPTERS_ENV, "").split(os.pathsep)
    return package_digest(also=tuple(e.strip() for e in named if e.strip().endswith(".py")))


def with_first(folder: str, pythonpath: str | None) -> str:
    """``PYTHONPATH`` with ``folder`` first, and once."""
    rest = [p for p in (pythonpath or "").split(os.pathsep) if p and p != folder]
    return os.pathsep.join([folder, *rest])


def _names_begin(cwd: str | None = None) -> str:
    """How the names of this user's zygotes serving ``cwd`` (default: here) begin."""
    cwd = os.getcwd() if cwd is None else cwd
    return f"{PREFIX}-{os.getuid()}-{hashlib.sha256(cwd.encode()).hexdigest()[:8]}-"


def serving(cwd: str | None = None) -> list[str]:
    """The names of this user's zygotes serving ``cwd`` (default: here) that listen now,
    sorted (``/proc/net/unix``, where an abstract name is written with ``@``)."""
    begins = "@" + _names_begin(cwd)
    try:
        lines = Path("/proc/net/unix").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    return sorted(
        {line.split()[-1][1:] for line in lines[1:] if line.split()[-1].startswith(begins)}
    )


def _address(name: str) -> bytes:
    return b"\0" + name.encode()


# -- the supervisor's side ---------------------------------------------------------------
class ForkedWorker:
    """A worker a zygote forked, seen as ``subprocess.Popen`` sees a child: ``pid`` (its
    process group's too), ``poll()``, ``wait(timeout)``, ``returncode``."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str]):
        self.conn, self.pid, self.args = conn, pid, args
        self.returncode: int | None = None
        self._buffer = b""

    def _read(self, timeout: float | None) -> None:
        readable, _, _ = select.select([self.conn], [], [], timeout)
        if not readable:
            return
        data = self.conn.recv(65536)
        if not data:
            self.conn.close()
            # its worker went with it (``PR_SET_PDEATHSIG``): later looks answer as killed
            self.returncode = -signal.SIGKILL
            from numbench.errors import MachineryFault

            raise MachineryFault(f"the zygote of worker {self.pid} ended before it")
        self._buffer += data
        if b"\n" in self._buffer:
            message = json.loads(self._buffer.split(b"\n", 1)[0])
            _relay(message.get("cpu_s", 0.0))
            self.returncode = int(message["exit"])
            self.conn.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read(left)
        return self.returncode


def _connect(name: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(_address(name))
    except OSError:
        sock.close()
        return None
    return sock


def _read_line(stream, timeout_s: float) -> bytes:
    """One line from a pipe or socket (bytes up to and without the newline), or what came
    before its end or ``timeout_s``."""
    fd = stream.fileno()
    data, deadline = b"", time.monotonic() + timeout_s
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536) if not isinstance(stream, socket.socket) else stream.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def log_path(library: str, name: str) -> Path:
    """Where a zygote writes what it says: ``logs/zygotes/`` of the folder it serves."""
    return Path("logs", "zygotes", f"{library}-{name.rsplit('-', 1)[-1]}.log")


def launch(
    library: str,
    python: str,
    env: dict[str, str],
    name: str,
    timeout_s: float,
    watch: int | None = None,
) -> str | None:
    """Start the zygote ``name`` and wait until it serves; None once it does (or another
    one took the name first), else why not. It ends when the process ``watch`` ends (the
    run it serves; default: this one)."""
    log = log_path(library, name)
    log.parent.mkdir(parents=True, exist_ok=True)
    zygote_env = {k: v for k, v in env.items() if k not in VOLATILE or k == "PWD"}
    idle = os.environ.get(IDLE_ENV, str(IDLE_S))
    watch = os.getpid() if watch is None else watch
    cmd = [python, "-m", __name__, "serve", name, library, idle, str(watch)]
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            cmd,
            env=zygote_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    try:
        line = _read_line(proc.stdout, timeout_s)
    finally:
        proc.stdout.close()
    proc.wait()  # the launcher leaves at once; the zygote is its child, detached
    if not line:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return f"its zygote did not start within {timeout_s:g} s (see {log})"
    said = json.loads(line)
    _relay(said.get("cpu_s", 0.0))
    return said.get("refused")


def _send_request(sock: socket.socket, request: dict, fds: list[int]) -> None:
    payload = json.dumps(request).encode() + b"\n"
    fd_array = array.array("i", fds)
    sent = sock.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd_array)])
    if sent < len(payload):
        sock.sendall(payload[sent:])


def fork_worker(
    library: str,
    cmd: list[str],
    env: dict[str, str],
    pass_fds: tuple[int, ...] = (),
    timeout_s: float = 600.0,
    watch: int | None = None,
    launch_one: bool = True,
    code: str = "",
) -> tuple[ForkedWorker | None, str]:
    """Have a zygote fork the worker that ``cmd`` (``python -m numbench.measure.worker SPEC
    RESULT``) would start, with ``env``, this process's stdout and stderr, and ``pass_fds``
    at their numbers. (the worker, "fork"), or (None, "exec: why") where it must start fresh.
    ``timeout_s`` bounds the wait for a zygote that is starting; a zygote started here ends
    with the process ``watch`` (the run; default: this process). ``launch_one`` False: where
    none serves, none is started (``NOT_SERVING``). ``code``: ``socket_name``'s."""
    if not supported():
        return None, "exec: forking workers needs Linux"
    if len(pass_fds) + 2 > MAX_FDS:
        return None, f"exec: more than {MAX_FDS} descriptors to pass"
    python, argv = cmd[0], cmd[3:]
    name = socket_name(library, python, env, code=code)
    if name in _refused:
        return None, _refused[name]
    sock = _connect(name)
    if sock is None and not launch_one:
        return None, NOT_SERVING
    if sock is None:
        refused = launch(library, python, env, name, timeout_s, watch)
        if refused:
            _refused[name] = f"exec: {refused}"
            return None, _refused[name]
        sock = _connect(name)
        if sock is None:
            return None, "exec: its zygote could not be reached"
    sys.stdout.flush()
    sys.stderr.flush()
    targets = [1, 2, *pass_fds]
    request = {"argv": argv, "env": env, "cwd": os.getcwd(), "fds": targets}
    sent: OSError | None = None
    try:
        _send_request(sock, request, [1, 2, *pass_fds])
    except OSError as exc:  # a refusing zygote answers before it reads: its answer waits
        sent = exc
    try:
        reply = _read_line(sock, timeout_s)
    except OSError:
        reply = b""
    if not reply and sent is not None:
        sock.close()
        return None, f"exec: its zygote could not be asked ({sent})"
    said = json.loads(reply) if reply else {"refused": "its zygote did not answer"}
    if "pid" not in said:
        sock.close()
        why = f"exec: {said.get('refused')}"
        _refused[name] = why
        return None, why
    return ForkedWorker(sock, int(said["pid"]), cmd), "fork"


def stop_all(cwd: str | None = None) -> int:
    """Tell every zygote of this user serving ``cwd`` (default: here) to end; how many were
    told (``serving``)."""
    told = 0
    for name in serving(cwd):
        sock = _connect(name)
        if sock is None:
            continue
        with sock:
            with contextlib.suppress(OSError):
                _send_request(sock, {"stop": True}, [])
                told += 1
    return told


# -- the zygote's side -------------------------------------------------------------------
def thread_names() -> list[str]:
    """The names of this process's threads but the calling one's (``/proc/self/task``)."""
    names = []
    me = str(threading_native_id())
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            names.append(Path("/proc/self/task", tid, "comm").read_text().strip())
        except OSError:
            continue
    return names


def threading_native_id() -> int:
    import threading

    return threading.get_native_id()


def _imported(modules) -> str | None:
    """Import ``modules``; None, or why one cannot be (a fresh worker reports it as it should)."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001
            return f"{module} cannot be imported in a zygote ({type(exc).__name__}: {exc})"
    return None


def preload(library: str) -> tuple[str | None, float]:
    """Import the library's modules, then (a worker's zygote, where the library brought
    NumPy in) numbench's (``WORKER_MODULES``): (None, or why its workers must start fresh;
    the seconds the library's import took)."""
    unset = [v for v in JOB_IMPORT_THREADS if v not in os.environ] if library == JOB else []
    os.environ.update({variable: "1" for variable in unset})
    t0 = time.perf_counter()
    try:
        why = _imported(PRELOAD.get(library, (library,)))
    finally:
        for variable in unset:
            os.environ.pop(variable, None)
    import_s = time.perf_counter() - t0
    if why is None and library != JOB and "numpy" in sys.modules:
        why = _imported(WORKER_MODULES)
    running = [n for n in thread_names() if n not in FORK_SAFE_THREADS]
    if why is None and running:
        why = f"its import leaves {len(running)} thread(s) running ({', '.join(sorted(running))})"
    return why, import_s


def vary_layout(seed: bytes | None = None) -> tuple:
    """Draw this child's own address-space layout: pages mapped and small blocks allocated
    in random numbers and sizes, kept for the process's life (returned; the caller keeps
    them), so that what it allocates next lands where its siblings' does not."""
    import mmap
    import random

    rng = random.Random(seed if seed is not None else os.urandom(16))
    pages = mmap.mmap(-1, PAGE * rng.randint(1, 512))
    blocks = [bytearray(rng.randint(16, 4096)) for _ in range(rng.randint(0, 256))]
    return pages, blocks


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float | None:
    """A process's resident memory (this one's by default), in MB: now (``VmRSS``), or
    another of its ``/proc`` status fields in kB (``VmHWM``, its peak); None where unknown
    (ended, or no ``/proc``)."""
    try:
        for line in Path("/proc", str(pid), "status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def _set_pdeathsig() -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


class Watch:
    """Whether the process a zygote serves (its run) still runs: a pidfd that becomes
    readable when it ends, or, where there is none, a look every second."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def files(self) -> list[int]:
        return [] if self.fd is None else [self.fd]

    def timeout(self, timeout: float | None) -> float | None:
        return timeout if self.fd is not None else min(1.0, 1.0 if timeout is None else timeout)

    def gone(self) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class Zygote:
    """The serving loop: requests in, workers forked, their ends sent back."""

    def __init__(self, listener, idle_s: float, import_s: float, watch: Watch, module: str):
        self.listener, self.idle_s, self.import_s, self.watch = listener, idle_s, import_s, watch
        self.module = module  # what each child runs: a worker, or a job (``JOB_MODULE``)
        self.import_rss = rss_mb()
        self.forks = 0
        self.conns: dict[socket.socket, dict] = {}  # buffer, fds, child pid, cpu at start
        self.children: dict[int, socket.socket] = {}
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.stopping = False

    def serve(self) -> None:
        last = time.monotonic()
        while not (self.stopping and not self.children):
            busy = self.children or self.conns
            timeout = None if busy else self.idle_s - (time.monotonic() - last)
            if timeout is not None and timeout <= 0:
                break
            if self.stopping:
                timeout = 0.1
            files = [self.listener, self.wake_r, *self.conns, *self.watch.files()]
            ready, _, _ = select.select(files, [], [], self.watch.timeout(timeout))
            if self.watch.gone():  # its run ended (or was killed): so do its workers
                for pid in list(self.children):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
                return
            for sock in ready:
                if isinstance(sock, int) and sock != self.wake_r:
                    continue  # the watch, looked at above
                if sock is self.listener:
                    self._accept()
                elif sock == self.wake_r:
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        os.read(self.wake_r, 4096)
                else:
                    self._receive(sock)
            self._reap()
            last = time.monotonic() if self.children or self.conns else last

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        uid = array.array("i", creds)[1]
        if uid != os.getuid():
            conn.close()
            return
        self.conns[conn] = {"buffer": b"", "fds": [], "pid": None, "cpu": 0.0}

    def _receive(self, conn: socket.socket) -> None:
        state = self.conns[conn]
        size = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
        try:
            data, ancillary, _, _ = conn.recvmsg(65536, size)
        except OSError:
            data, ancillary = b"", []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                state["fds"].extend(fds)
        if not data:  # its supervisor is gone: so goes its worker
            self._drop(conn, kill=True)
            return
        state["buffer"] += data
        if b"\n" in state["buffer"] and state["pid"] is None:
            request = json.loads(state["buffer"].split(b"\n", 1)[0])
            if request.get("stop"):
                self.stopping = True
                self._drop(conn, kill=False)
                return
            self._fork(conn, state, request)

    def _drop(self, conn: socket.socket, kill: bool) -> None:
        state = self.conns.pop(conn)
        for fd in state["fds"]:
            with contextlib.suppress(OSError):
                os.close(fd)
        state["fds"] = []
        if kill and state["pid"] is not None and state["pid"] in self.children:
            for kill_it in (os.killpg, os.kill):  # its group, and it, whatever became of it
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill_it(state["pid"], signal.SIGKILL)
        conn.close()

    def _fork(self, conn: socket.socket, state: dict, request: dict) -> None:
        received, targets = state["fds"], request["fds"]
        if len(received) != len(targets):
            conn.sendall(json.dumps({"refused": "descriptors lost on the way"}).encode() + b"\n")
            self._drop(conn, kill=False)
            return
        state["cpu"] = time.process_time()
        first = self.forks == 0
        self.forks += 1
        # the pid is told once the child leads its group (setsid): a kill must find it
        led_r, led_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(led_r)
            self._child(request, received, targets, first, led_w)  # never returns
        os.close(led_w)
        with contextlib.suppress(OSError):
            os.read(led_r, 1)  # the child's word, or its end
        os.close(led_r)
        for fd in received:
            os.close(fd)
        state["fds"], state["pid"] = [], pid
        self.children[pid] = conn
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")

    def _child(
        self, request: dict, received: list[int], targets: list[int], first: bool, led: int
    ) -> None:
        code = SETUP_FAULT_EXIT
        try:
            os.setsid()
            os.write(led, b"1")
            os.close(led)
            _set_pdeathsig()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for sock in (self.listener, *self.conns):
                sock.close()
            for fd in (self.wake_r, self.wake_w, *self.watch.files()):
                os.close(fd)
            import fcntl

            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in received]
            for fd in received:
                os.close(fd)
            for fd, target in zip(high, targets):
                os.dup2(fd, target)
                os.close(fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            os.chdir(request["cwd"])
            # the rest of its environment is the zygote's own: the same, by its key
            for variable in VOLATILE:
                if variable in request["env"]:
                    os.environ[variable] = request["env"][variable]
                else:
                    os.environ.pop(variable, None)
            import tempfile

            tempfile.tempdir = None
            sys.argv = [self.module, *request["argv"]]
            if self.module == WORKER_MODULE:  # a job's process measures nothing itself
                start_rss = rss_mb()
                global _layout
                _layout = vary_layout()  # kept for the worker's life
                told = {
                    "import_s": self.import_s,
                    "first": first,
                    "import_rss_mb": self.import_rss,
                    "start_rss_mb": start_rss,
                }
                os.environ[FORKED_ENV] = json.dumps(told)
            else:
                os.environ.pop(FORKED_ENV, None)
            # its entry, the module imported once (not run again); it leaves by itself
            import importlib

            importlib.import_module(self.module).forked(request["argv"])
        except BaseException:  # noqa: BLE001 - the set-up failed: say why, and go
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None or conn not in self.conns:
                continue
            state = self.conns[conn]
            message = {
                "exit": os.waitstatus_to_exitcode(status),
                "cpu_s": usage.ru_utime + usage.ru_stime + time.process_time() - state["cpu"],
            }
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(message).encode() + b"\n")
            self._drop(conn, kill=False)


def _say(message: dict) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def serve(name: str, library: str, idle_s: float, watch_pid: int) -> int:
    """The zygote: detach from its launcher, import, bind its name, say it serves (or why it
    refuses), then serve until idle, told to stop, or the process ``watch_pid`` (its run)
    has ended."""
    if os.fork() != 0:
        os._exit(0)  # the launcher waits for this one; the zygote goes on detached
    watch = Watch(watch_pid)
    refused, import_s = preload(library)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(_address(name))
    except OSError:
        _say({"cpu_s": time.process_time()})  # another zygote took the name first
        return 0
    listener.listen(64)
    print(f"zygote {name}: {library} imported in {import_s:.2f} s", file=sys.stderr, flush=True)
    if refused:
        print(f"zygote {name}: refuses to fork: {refused}", file=sys.stderr, flush=True)
    _say({"cpu_s": time.process_time(), "import_s": import_s, "refused": refused})
    if refused:
        _refuse(listener, refused, idle_s, watch)
        return 0
    module = JOB_MODULE if library == JOB else WORKER_MODULE
    Zygote(listener, idle_s, import_s, watch, module).serve()
    return 0


def _refuse(listener: socket.socket, why: str, idle_s: float, watch: Watch) -> None:
    """Answer every request with the refusal until idle or its run's end, so later jobs
    learn it at once."""
    while True:
        files = [listener, *watch.files()]
        ready = select.select(files, [], [], watch.timeout(idle_s))[0]
        if not ready or watch.gone():
            return
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        with conn:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"refused": why}).encode() + b"\n")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])))
    print(f"usage: python -m {__name__} serve NAME LIBRARY IDLE_S WATCH_PID", file=sys.stderr)
    sys.exit(2)
