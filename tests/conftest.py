"""Shared fixtures. The package is imported from ./src (pytest's pythonpath setting)."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parent.parent

# The test-only settings are honoured only where this is set (here and in every process the
# tests start: Snakemake, cell supervisors, workers) ...
os.environ["NUMBENCH_TEST_ADAPTERS"] = "1"
# ... and the suite's adapters (tests/adapters/: the fault adapters, the slowdown) are registered
# where this names them (numbench.libraries.EXTRA_ADAPTERS_ENV), from their files.
os.environ["NUMBENCH_ADAPTERS"] = os.pathsep.join(
    str(REPO / "tests" / "adapters" / name) for name in ("faults.py", "slowed.py")
)
# The roofs a test's run measures are planned from caches of these sizes, not the host's
# (numbench.roofline.measure.TEST_CACHES_ENV): a host that names a large L3 would otherwise
# spend minutes a setting on its DRAM triad. A test of the real plan unsets it.
os.environ.setdefault("NUMBENCH_TEST_CACHES_MIB", "l2=1,l3=4")
# ... and their compute roof from GEMMs of these sizes n (numbench.roofline.measure.TEST_GEMM_ENV),
# not 512 to 2048: seconds of CPU a library and setting, in every test run that measures roofs.
os.environ.setdefault("NUMBENCH_TEST_GEMM_SIZES", "128,256")
# ... and the sentinel each cell's job times sorts this many values, not 2^20
# (numbench.measure.activity.TEST_SENTINEL_ENV): four sorts of 8 MiB in every cell job the
# suite runs, and no test reads the machine's speed from them.
os.environ.setdefault("NUMBENCH_TEST_SENTINEL_SIZE", "4096")
# The cells a test measures queue on the suite's own timing lock, not on the host's
# (numbench.measure.host_lock.LOCK_ENV): beside a real run on this host the suite's cells would
# otherwise wait for each of the run's cells in turn. The suite's processes (pytest-xdist's
# too) share it, so the suite's own cells still take turns; a test of the host's lock path
# unsets it.
os.environ.setdefault(
    "NUMBENCH_TIMING_LOCK", str(Path(tempfile.gettempdir()) / f"numbench-tests-{os.getuid()}.lock")
)
# The charts' JavaScript bundle is kept between runs (numbench.report.drawing.CACHE_ENV): in a
# folder of the suite's own, not the user's cache.
os.environ.setdefault(
    "NUMBENCH_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"numbench-tests-cache-{os.getuid()}")
)


def make_spec(
    library: str,
    device: str,
    operation: str,
    size: int,
    inputs: str,
    timing: dict,
    *,
    dtype: str = "float64",
    threads: int = 1,
    timeout_s: float = 120.0,
    memory_limit_mb: float | None = None,
    params: dict | None = None,
    replicates: tuple[int, int] = (1, 1),
    paired_with: str | None = None,
    allocator: str = "steady",
    lockstep: bool = False,
    operation_file: str | None = None,
):
    """A CellSpec for a test (the workflow builds them from the config instead): one
    process, unpaired, unless asked. ``operation_file``: a user's file of the operation."""
    from numbench import operations
    from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
    from numbench.timing import TimingSettings

    return CellSpec(
        library=library,
        device=device,
        operation=operation,
        operation_file=None if operation_file is None else str(operation_file),
        operation_hash=operations.load(operation, operation_file).sha256,
        size=size,
        dtype=dtype,
        threads=threads,
        inputs=str(inputs),
        params=params or {},
        timing=TimingSettings(**timing),
        timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb,
        allocator=allocator,
        replicates=ReplicateSettings(
            min=replicates[0],
            max=replicates[1],
            target_ci=0.03,
            stop_margin=1.1,
            early_rounds=0,
            round_sd=0.03,
            max_cpu_taken=0.1,
            lockstep=lockstep,
            max_cell_s=None,
        ),
        paired_with=paired_with,
        contract=CELL_CONTRACT,
    )


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    """scripts/``script`` with ``args`` as its command line, as ``python scripts/<script>``
    runs it (``runpy``, as ``__main__``, its folder first on ``sys.path``) but in this
    process: its exit status (0 when it ends without ``sys.exit``) and what it printed. A
    fresh interpreter would import pandas, pyarrow and altair again, a second or more of CPU
    a call; each script's start as a process of its own, as its rule starts it, is checked
    end to end (the tiny run's Snakemake runs every analysis script)."""
    import contextlib
    import io
    import runpy

    path = REPO / "scripts" / script
    argv, syspath = sys.argv, list(sys.path)
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.parent))
    status = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        status = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):  # as the interpreter would: the message on stderr
            err.write(exc.code + "\n")
    finally:
        sys.argv, sys.path[:] = argv, syspath
    return subprocess.CompletedProcess([str(path), *args], status, out.getvalue(), err.getvalue())


def copy_workflow(dst: Path) -> Path:
    """Copy the workflow (no results, no logs) into ``dst``, to run Snakemake in."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in (
        "Snakefile",
        "config",
        "workflow",
        "scripts",
        "src",
        "profiles",
        "envs",
        "tests",
        "examples",
    ):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dst / name)
    history_off(dst / "config" / "config.yaml")
    roofs_once(dst / "config" / "config.yaml")
    return dst


#: the default config's history switch, and what a test's copy of the workflow has instead:
#: a test's run adds itself to no history unless the test asks (``history: {add: true}``)
HISTORY_ON = "history:\n  folder: history\n  add: true\n"
HISTORY_OFF = "history:\n  folder: history\n  add: false\n"


def switch_in_config(config_file: Path, on: str, off: str) -> None:
    """Replace the default config's text ``on`` by ``off`` in a test's copy; the default
    config must still hold ``on`` word for word."""
    text = config_file.read_text(encoding="utf-8")
    assert on in text, f"{config_file} no longer holds {on!r}"
    config_file.write_text(text.replace(on, off), encoding="utf-8")


def history_off(config_file: Path) -> None:
    switch_in_config(config_file, HISTORY_ON, HISTORY_OFF)


#: the default config's second roofs measurement, and what a test's copy has instead: a
#: test's run measures its roofs once, before the cells (no job more), unless it asks
ROOFS_AT_END_ON = "roofs_at_end: true\n"
ROOFS_AT_END_OFF = "roofs_at_end: false\n"


def roofs_once(config_file: Path) -> None:
    switch_in_config(config_file, ROOFS_AT_END_ON, ROOFS_AT_END_OFF)


#: Fixtures that run the workflow (through Snakemake, or offsite's run on the "other host" in
#: tests/test_offsite*.py): a test that uses one is end to end (``e2e``) whatever its file
#: says, so the unit tier (``make test-fast``: ``-m "not e2e and not slurm"``) leaves it out.
WORKFLOW_FIXTURES = frozenset({"tiny_run", "dims_run", "cpu_roofs", "remote"})


#: The end-to-end tests that take longest apart from the shared runs (minutes each, most of it
#: their own workflow run), started before the others: with the tests in two processes the
#: suite lasts as long as the busier one, and a long test left to the end runs alone.
SLOW_FIRST = (
    "tests/test_environments_e2e.py::test_two_numpy_versions_side_by_side_and_a_slowed_twin",
    "tests/test_slurm.py::",
    "tests/test_gpu_fallback.py::test_device_gpu_without_a_gpu_exits_0_and_says_so",
)
#: The shared runs whose first reader makes them (``made_once``) and the others wait for,
#: longest first. With ``--maxschedchunk 1`` (``make test``) each process is handed two tests
#: to start with, then one as it finishes one: the first process gets the tiny run and the
#: offsite run, the second the dimensions run and the first of SLOW_FIRST.
SHARED_RUNS = ("tiny_run", "remote", "dims_run")


def start_order(items) -> list:
    """The order to run the tests in (pytest-xdist hands them out in this order): first one
    reader of each shared run, which makes it; then the slowest tests of their own (SLOW_FIRST)
    and the other end-to-end tests; then the unit tests; then the other readers of the
    shared runs, which by then read a finished run instead of waiting idle in the second
    process while the first makes it; and last the Slurm tests not in SLOW_FIRST, which would
    wait idle for test_slurm's hold on the host. Otherwise in collection order."""
    makers: dict[int, int] = {}
    for n, name in enumerate(SHARED_RUNS):
        first = next((i for i, it in enumerate(items) if name in _fixtures(it)), None)
        if first is not None:
            makers.setdefault(first, n)

    def rank(index_item):
        index, item = index_item
        if index in makers:
            return (0, makers[index])
        if set(SHARED_RUNS) & _fixtures(item):
            return (4, 0)
        slow = [n for n, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)]
        if slow:
            return (1, slow[0])
        if item.get_closest_marker("slurm"):
            return (5, 0)  # the Slurm tests take turns on the host (test_slurm.HOST_LOCK)
        if item.get_closest_marker("e2e"):
            return (2, 0)
        return (3, 0)

    return [item for _, item in sorted(enumerate(items), key=rank)]


def _fixtures(item) -> set[str]:
    """The fixtures ``item`` uses (a parameter of the same name, as ``remote`` in
    test_config_errors' parametrize, is not the fixture)."""
    callspec = getattr(item, "callspec", None)
    params = set(callspec.params) if callspec is not None else set()
    return set(getattr(item, "fixturenames", ())) - params


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests that use a workflow run ``e2e`` (before ``-m`` selects), and put the
    tests in ``start_order``. Leave the ``cuda_env`` tests (pip resolves of the CUDA sets,
    minutes and GBs) out of a plain ``pytest``; they run when ``-m`` names them (``make
    check-cuda-env``)."""
    for item in items:
        if WORKFLOW_FIXTURES & _fixtures(item):
            item.add_marker(pytest.mark.e2e)
    items[:] = start_order(items)
    if "cuda_env" in (config.getoption("markexpr") or ""):
        return
    left_out = [item for item in items if item.get_closest_marker("cuda_env") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item.get_closest_marker("cuda_env") is None]


#: the test being set up or run (pytest_runtest_setup): ``snakemake`` checks its marks
_RUNNING: list = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _RUNNING[0] = item


@pytest.fixture(autouse=True)
def keep_cpu_affinity():
    """A test that measures a cell in this process (``worker.measure``) pins it to the cell's
    threads (``libraries.pin_cpus``); without this, every later test and the subprocesses it
    starts would inherit that mask and see fewer CPUs than the host has."""
    if not hasattr(os, "sched_getaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, allowed)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


def snakemake(workdir: Path, *args: str, timeout: float = 1800, env: dict | None = None):
    """Run Snakemake of this interpreter's environment in ``workdir``; return the process.
    Only for a test marked ``e2e`` or ``slurm`` (or using a workflow fixture): the unit tier
    (``make test-fast``) runs no Snakemake, and a test that does fails here saying so."""
    item = _RUNNING[0]
    if item is not None and not (
        item.get_closest_marker("e2e") or item.get_closest_marker("slurm")
    ):
        pytest.fail(f"{item.nodeid} runs Snakemake: mark it e2e (the unit tier runs none)")
    full_env = dict(os.environ)
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    # Cells of a test queue on their own lock, not on a concurrent real run's.
    full_env["NUMBENCH_TIMING_LOCK"] = str(workdir / ".timing.lock")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- the shared workflow runs: each made once a session, read by every test that asks ---------------
#: The tiny grid the end-to-end tests read: every library, every built-in operation at one
#: size, and a user's own operation (the example of examples/stencil); one round a cell, its
#: library's process beside a paired baseline process, so pairing and pipelined samples are
#: there to check; run with --cores 2 in a folder whose path holds a space. One round, not two:
#: every round of a cell starts a fresh process of its library (TensorFlow's import alone is
#: seconds), and what a second round adds (early rounds, the order of rounds, several
#: processes pooled) is checked on the dimensions run (``DIMS_RUN_CONFIG``: two rounds a cell,
#: the first an early round) and unit-tested. ``max_cpu_taken: null`` measures each round
#: once whatever else the machine runs (measuring again is test_replicates' to check). The
#: finished run adds itself to a history store (test_history_e2e reads it, and reruns a step
#: and builds the site on a copy), in a folder whose name holds a space too.
TINY_RUN_REPLICATES = "replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}"
TINY_RUN_CONFIG = f"""
libraries: [numpy, jax, torch, tensorflow, numba]
operations:
  elementwise: {{sizes: [2000]}}
  matmul: {{sizes: [48]}}
  grad: {{sizes: [64]}}
  fft: {{sizes: [1024]}}
  sort: {{sizes: [2000]}}
  stencil:
    module: examples/stencil/stencil.py
    sizes: [32]
    params: {{spacing: 0.5}}
timing: {{min_sample_time_s: 0.002, min_samples: 3, max_samples: 4, budget_s: 0.02}}
{TINY_RUN_REPLICATES}
cell_timeout_s: 300
history: {{add: true, folder: "kept runs", site: "the site"}}
"""
TINY_RUN_LIBRARIES = ("numpy", "jax", "torch", "tensorflow", "numba")
TINY_RUN_OPERATIONS = ("elementwise", "matmul", "grad", "fft", "sort", "stencil")

#: The grid of the dimensions: NumPy and PyTorch, float32 beside float64 and 1 thread beside
#: every CPU, at one size (test_dimensions_e2e; the roofs of each (dtype, threads) are measured
#: too, and test_roofs_e2e reads them). Its readers compare cells across dtype and threads,
#: never across sizes (crossovers between sizes are unit-tested on constructed results). Two
#: rounds a cell, the first an early round of its own job (test_workflow reads their order).
DIMS_RUN_CONFIG = """
libraries: [numpy, torch]
operations:
  elementwise: {sizes: [1000]}
dtype: [float64, float32]
threads: [1, all]
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 4, budget_s: 0.02}
replicates: {min: 2, max: 2, early_rounds: 1, max_cpu_taken: null}
cell_timeout_s: 300
"""


def made_once(tmp_path_factory, name: str, make):
    """``make()``'s value, made once a session even when the tests run in several processes
    (``make test``: pytest-xdist): the first process to ask makes it, under a lock in the
    session's shared temporary folder, and leaves it there (pickled) for the others, which
    wait for it. ``make()``'s folders come from ``tmp_path_factory`` and outlive the test.
    In one process (no xdist) it is ``make()``. Why not xdist's ``--dist loadgroup``: on
    pytest 9 its group marks no longer reach the scheduler, and a run was made in both."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return make()
    shared = tmp_path_factory.getbasetemp().parent  # one folder per session, above each worker's
    made = shared / f"{name}.pickle"
    with open(shared / f"{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if made.exists():
            return pickle.loads(made.read_bytes())
        value = make()
        made.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture(scope="session")
def cpu_roofs(tmp_path_factory) -> Path:
    """results/roofs.parquet of this host's CPU (float64, 1 thread; the compute roof NumPy's),
    measured once a session by the workflow's roofs rule alone."""

    def make() -> Path:
        wd = copy_workflow(tmp_path_factory.mktemp("roofs") / "wf")
        (wd / "roofs.yaml").write_text("libraries: [numpy]\nreplicates: {max_cpu_taken: null}\n")
        proc = snakemake(wd, "results/roofs.parquet", "--cores", "1", "--configfile", "roofs.yaml")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return wd / "results" / "roofs.parquet"

    return made_once(tmp_path_factory, "cpu_roofs", make)


def seed_roofs(workdir: Path, roofs: Path) -> None:
    """Put ``cpu_roofs`` into a workflow copy whose grid is on the CPU at float64 and 1 thread:
    Snakemake takes the file as made and runs no roofs job (a run is a minute shorter). For
    the tests whose subject is not the roofs (the rule runs in cpu_roofs and dims_run)."""
    (workdir / "results").mkdir(exist_ok=True)
    shutil.copy2(roofs, workdir / "results" / "roofs.parquet")


def _finished_run(folder: Path, name: str, config: str, roofs: Path | None = None) -> Path:
    wd = copy_workflow(folder)
    (wd / name).write_text(config)
    if roofs is not None:
        seed_roofs(wd, roofs)
    proc = snakemake(wd, "--cores", "2", "--configfile", name)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return wd


@pytest.fixture(scope="session")
def remote(tmp_path_factory) -> dict:
    """An offsite run of a tiny grid (test_offsite.make_remote), made once a session for
    test_offsite and test_offsite_security."""
    from test_offsite import make_remote

    return made_once(tmp_path_factory, "remote", lambda: make_remote(tmp_path_factory))


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, cpu_roofs) -> Path:
    """The workflow run on ``TINY_RUN_CONFIG`` (its config file: e2e.yaml), once a session,
    on the session's ``cpu_roofs`` (the roofs rule runs in ``cpu_roofs`` and ``dims_run``).
    Read it, never change it: a test that reruns part of it works on ``copy_run``."""

    def make() -> Path:
        folder = tmp_path_factory.mktemp("tiny") / "a b"
        return _finished_run(folder, "e2e.yaml", TINY_RUN_CONFIG, roofs=cpu_roofs)

    return made_once(tmp_path_factory, "tiny_run", make)


@pytest.fixture(scope="session")
def dims_run(tmp_path_factory) -> Path:
    """The workflow run on ``DIMS_RUN_CONFIG`` (dims.yaml), once a session; read only."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("threads: [1, all] needs at least 2 CPUs to be two thread counts")
    return made_once(
        tmp_path_factory,
        "dims_run",
        lambda: _finished_run(tmp_path_factory.mktemp("dims") / "wf", "dims.yaml", DIMS_RUN_CONFIG),
    )


def copy_run(run: Path, dst: Path) -> Path:
    """A copy of a finished run (its files' times and Snakemake's records kept), for a test
    that reruns part of it without changing what the others read."""
    shutil.copytree(run, dst, symlinks=True)
    return dst


def not_ok_cells(workdir: Path, bench: pd.DataFrame, expected=()) -> str:
    """Cells of ``bench`` that did not end ``ok`` (less the ``expected`` (library, operation)
    pairs), each with its error and the tail of its logs (the cell's and its early rounds'):
    an end-to-end test's assertion message, so a failure in CI says what the worker saw."""
    parts = []
    for r in bench[bench["status"] != "ok"].itertuples():
        if (r.library, r.operation) in expected:
            continue
        parts.append(f"{r.library}/{r.device} {r.dtype} t{r.threads} {r.operation} {r.size}: ")
        parts[-1] += f"{r.status}: {r.error}"
        from numbench.cells import Cell

        cell = Cell.from_fields(r._asdict())
        logs = [workdir / cell.log]
        logs += sorted((workdir / cell.round_log(0)).parent.glob("r*.log"))
        for log in logs:
            if log.exists():
                tail = log.read_text(errors="replace")[-3000:]
                parts.append(f"--- {log.relative_to(workdir)}\n{tail}")
    return "\n".join(parts)


# -- a constructed machine: the readings CpuTaken takes, moved by the test ---------------------
class Machine:
    """For ``numbench.measure.cpu_taken.CpuTaken``: constructed readings: wall time, this process's CPU time, and the busy time of its
    CPUs (None: the OS does not tell). ``run`` moves them as a stretch of work would."""

    def __init__(self, cpus: int = 1, tick_s: float = 0.0) -> None:
        #: the busy time's resolution the readings are taken to have (0: exact)
        self.tick_s = tick_s
        self.wall = self.own = 0.0
        self.busy: float | None = 0.0
        self.cpus = list(range(cpus))
        self.asked: list[list[int]] = []

    def run(self, wall_s: float, own_s: float, others_s: float) -> None:
        """``wall_s`` pass; this process runs ``own_s`` CPU seconds and others ``others_s``."""
        self.wall += wall_s
        self.own += own_s
        if self.busy is not None:
            self.busy += own_s + others_s

    def busy_of(self, cpus: list[int]) -> float | None:
        self.asked.append(list(cpus))
        return self.busy

    def taken(self):
        from numbench.measure.cpu_taken import CpuTaken

        return CpuTaken(
            clock=lambda: self.wall,
            own_s=lambda: self.own,
            busy=self.busy_of,
            cpus=self.cpus,
            tick_s=self.tick_s,
        )


# -- constructed results: benchmarks, speedups and crossovers without running a cell --------------
def samples_frame(samples: dict, paired: dict | None = None) -> pd.DataFrame:
    """The long table aggregate writes (results/samples.parquet) from key -> samples; a
    value that is a list of arrays is one array per replicate process. ``paired`` maps a
    cell key to its paired baseline processes (role "baseline")."""
    rows = []

    def add(key, role, value):
        groups = value if isinstance(value, list) else [value]
        for rep, g in enumerate(groups):
            for s in g:
                rows.append(
                    dict(zip(["library", "device", "operation", "size", "dtype", "host"], key))
                    | {"threads": 1, "role": role, "replicate": rep, "seconds": float(s)}
                )

    for key, value in samples.items():
        add(key, "measured", value)
    for key, value in (paired or {}).items():
        add(key, "baseline", value)
    return pd.DataFrame(rows)


def noisy(median: float, n: int, seed: int) -> np.ndarray:
    """Timing-like samples: a median with 3% log-normal noise."""
    return median * np.exp(np.random.default_rng(seed).normal(0.0, 0.03, n))


def _cell_row(library, device, operation, size, status="ok", samples=None, error=None):
    from numbench.contract import STAT_FIELDS
    from numbench.stats import summarize

    row = {
        "library": library,
        "device": device,
        "operation": operation,
        "size": size,
        "dtype": "float64",
        "status": status,
        "error": error,
        "first_call_s": None,
        "import_s": 0.5,
        "rel_error": None,
        "tolerance": 1e-10,
        "library_version": {"numpy": "2.4.6", "torch": "2.13.0", "jax": "0.10.2"}.get(
            library, "1.0"
        ),
        "device_name": "Test CPU 9000" if device == "cpu" else "",
        "device_details": "",
        "host": "testhost",
        "cpu_model": "Test CPU 9000",
        "threads": 1,
        "blas": "openblas" if library == "numpy" else "",
        "python_version": "3.11.2",
        "platform": "Linux-6.1-x86_64-with-glibc2.36",
        "peak_rss_mb": 100.0,
        "device_peak_mb": None,
        "flops": 5.0 * size * np.log2(size),
        "bytes": 16.0 * size,
        "gflop_per_s": None,
        "gb_per_s": None,
        "wall_s": 1.0,
        "started_at": "2026-01-01T00:00:00+00:00",
        "cpu_count": 16,
        "ram_gb": 135.1,
    }
    if samples is None:
        row.update({f.name: None for f in STAT_FIELDS})
        row["n_samples"] = 0
    else:
        row.update(summarize(samples).as_dict())
        row["first_call_s"] = float(np.median(samples)) * (50 if library == "jax" else 1.5)
        row["rel_error"] = 1e-15
        row["gflop_per_s"] = row["flops"] / row["median_s"] / 1e9
        row["gb_per_s"] = row["bytes"] / row["median_s"] / 1e9
    return row


# Speedup of each library over NumPy, by operation, at SIZES (the constructed truth).
CONSTRUCTED_SIZES = (1000, 10_000, 100_000)
CONSTRUCTED_SPEEDUPS = {
    ("torch", "fft"): (0.5, 2.0, 4.0),  # crosses between 10^3 and 10^4, at 10^3.5
    ("jax", "fft"): (1.5, 1.5, 1.5),  # always faster
    ("torch", "sort"): (0.5, 0.4, 0.3),  # never faster
}


MARGIN = 1.1


def constructed_results(gpu: str | None = None):
    """(benchmarks, speedups, crossovers) frames built from constructed samples.

    ``gpu``: None (no GPU cells), "unavailable" (every GPU cell unavailable) or "ok" (one
    GPU cell measured, the rest unavailable)."""

    from numbench.analyse.speedups import compute_speedups, find_crossovers
    from numbench.contract import BENCHMARKS_SCHEMA

    rng = np.random.default_rng(1)
    rows, samples = [], {}

    def add(library, device, op, size, median, noise=0.01):
        x = median * np.exp(rng.normal(0.0, noise, 25))
        samples[(library, device, op, size, "float64", "testhost")] = x
        rows.append(_cell_row(library, device, op, size, samples=x))

    for op in ("fft", "sort"):
        for i, size in enumerate(CONSTRUCTED_SIZES):
            base = 1e-9 * size * np.log2(size)
            # the NumPy sort at 10^5 is noisy: IQR far above 10% of the median
            add(
                "numpy",
                "cpu",
                op,
                size,
                base,
                noise=0.3 if (op, size) == ("sort", 100_000) else 0.01,
            )
            for (lib, o), speedups in CONSTRUCTED_SPEEDUPS.items():
                if o == op:
                    add(lib, "cpu", op, size, base / speedups[i])
    rows.append(
        _cell_row(
            "jax", "cpu", "sort", 1000, status="unsupported", error="jax has no stable sort here"
        )
    )
    rows.append(
        _cell_row("jax", "cpu", "sort", 10_000, status="mismatch", error="rel_error 1e-3 > 1e-10")
    )
    if gpu is not None:
        for op in ("fft", "sort"):
            for size in CONSTRUCTED_SIZES:
                rows.append(
                    _cell_row(
                        "torch", "gpu", op, size, status="unavailable", error="no CUDA device found"
                    )
                )
        if gpu == "ok":
            rows.pop()
            add("torch", "gpu", "sort", CONSTRUCTED_SIZES[-1], 1e-5)
            rows[-1]["device_name"] = "Test GPU 80GB"
    bench = pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA).to_pandas()
    speedups = compute_speedups(bench, samples_frame(samples), "numpy", "cpu", MARGIN)
    crossovers = find_crossovers(speedups)
    return bench, speedups, crossovers


@pytest.fixture
def zygote_folder(tmp_path, monkeypatch):
    """A folder of its own (zygotes are per folder) with an elementwise 1000 input in
    ``in.npz``, zygotes that end soon after their last worker or job, and none left behind."""
    from numbench import inputs_file as inputs
    from numbench.measure import zygote

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(zygote.IDLE_ENV, "30")
    inputs.write("elementwise", 1000, 1, tmp_path / "in.npz")
    yield tmp_path
    zygote.stop_all(str(tmp_path.resolve()))


@pytest.fixture
def results():
    return constructed_results()
