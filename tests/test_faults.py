"""Faults cost exactly their cell: every fault adapter's status through the supervisor, a
grid of NumPy and all fault adapters through Snakemake, a killed and resumed run, and
corrupt cell and inputs files named with the command that remakes them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, make_spec, seed_roofs, snakemake

from numbench import inputs_file as inputs
from numbench.analyse.aggregate import aggregate
from numbench.contract import read_cell
from numbench.errors import CorruptFile
from numbench.measure.host_lock import snakemake_running_in, unlock_if_stale
from numbench.measure.supervisor import CellResult, run_cell

FAST = {"min_sample_time_s": 0.002, "min_samples": 3, "max_samples": 5, "budget_s": 0.05}
GRID = """
libraries: [numpy, fault-raise, fault-crash, fault-hang, fault-oom, fault-wrong, fault-import]
operations:
  matmul:
    sizes: [16]
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 5, budget_s: 0.05}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 6
cell_memory_limit_mb: 300
"""
EXPECTED = {
    "numpy": "ok",
    "fault-raise": "failed",
    "fault-crash": "crashed",
    "fault-hang": "timeout",
    "fault-oom": "crashed",
    "fault-wrong": "mismatch",
    "fault-import": "unavailable",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results/ folder with the inputs of elementwise n=1000."""
    root = tmp_path_factory.mktemp("faults") / "results"
    inputs.write("elementwise", 1000, 1, root / "inputs" / "elementwise" / "1000.npz")
    return root


def cell(results: Path, library: str, **kw) -> tuple[CellResult, Path]:
    spec = make_spec(
        library,
        "cpu",
        "elementwise",
        1000,
        kw.pop("inputs", str(results / "inputs" / "elementwise" / "1000.npz")),
        FAST,
        timeout_s=kw.pop("timeout_s", 10),
        memory_limit_mb=kw.pop("memory_limit_mb", None),
    )
    out = results / "cells" / library / "cpu" / "elementwise" / kw.pop("name", "1000.parquet")
    meta = run_cell(spec, out, lock=str(results / ".lock"))
    return meta, out


@pytest.mark.parametrize(
    "library,kw,status,words",
    [
        ("fault-raise", {}, "failed", ["RuntimeError: fault-raise: injected failure"]),
        ("fault-crash", {}, "crashed", ["worker died by SIGSEGV"]),
        ("fault-hang", {"timeout_s": 3}, "timeout", ["cell_timeout_s = 3 s", "killed"]),
        (
            "fault-oom",
            {"memory_limit_mb": 150},
            "crashed",
            ["out of memory", "over cell_memory_limit_mb = 150"],
        ),
        ("fault-wrong", {}, "mismatch", ["relative error", "exceeds the float64 tolerance"]),
        ("fault-import", {}, "unavailable", ["cannot be imported", "No module named"]),
    ],
    ids=["raise", "crash", "hang", "oom-limit", "wrong", "import"],
)
def test_fault_status(results: Path, library: str, kw: dict, status: str, words: list[str]):
    meta, out = cell(results, library, **kw)
    table = read_cell(out)  # the cell's Parquet is always written, and readable
    assert table.column("status").to_pylist() == [status] * table.num_rows
    error = table.column("error")[0].as_py()
    for word in words:
        assert word in error, error
    assert meta.status == status
    if status == "mismatch":
        assert table.column("rel_error")[0].as_py() > table.column("tolerance")[0].as_py()
        assert table.num_rows >= FAST["min_samples"]  # the samples are kept
    else:
        assert table.num_rows == 1 and table.column("seconds")[0].as_py() is None


def test_memory_error_without_limit_reads_as_out_of_memory(results: Path, monkeypatch):
    monkeypatch.setenv("NUMBENCH_FAULT_OOM_CAP_MB", "128")  # the adapter's own safety cap
    meta, out = cell(results, "fault-oom", name="nolimit.parquet")
    assert meta.status == "failed"
    assert meta.error.startswith("out of memory: MemoryError")
    assert read_cell(out).column("status")[0].as_py() == "failed"


def test_corrupt_inputs_fail_the_cell_with_the_remake_command(results: Path):
    bad = results / "inputs" / "elementwise" / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 this is not a zip archive")
    meta, _ = cell(results, "numpy", inputs=str(bad), name="badinputs.parquet")
    assert meta.status == "failed"
    assert f"cannot read inputs file {bad}" in meta.error
    assert f"Remake it with: snakemake --cores 1 --forcerun {bad}" in meta.error


def test_worker_dies_with_its_supervisor(results: Path, tmp_path: Path):
    """A supervisor killed by SIGKILL takes its worker along (no orphan measuring on)."""
    spec = (
        "import sys; sys.path[:0] = [{!r}, {!r}]\n"
        "from conftest import make_spec\n"
        "from numbench.measure.supervisor import run_cell\n"
        "run_cell(make_spec('fault-hang', 'cpu', 'elementwise', 1000, {!r},"
        " {!r}, timeout_s=60), {!r}, lock={!r})\n"
    ).format(
        str(REPO / "src"),
        str(REPO / "tests"),
        str(results / "inputs" / "elementwise" / "1000.npz"),
        FAST,
        str(tmp_path / "out.parquet"),
        str(tmp_path / ".lock"),
    )
    sup = subprocess.Popen([sys.executable, "-c", spec])
    worker = None
    for _ in range(200):
        kids = Path(f"/proc/{sup.pid}/task/{sup.pid}/children").read_text().split()
        if kids:
            worker = int(kids[0])
            break
        time.sleep(0.05)
    assert worker is not None
    time.sleep(1.0)  # past the worker's start, where it asks to die with its parent
    sup.kill()
    sup.wait()
    for _ in range(100):
        if not Path(f"/proc/{worker}").exists() or "Z" in _state(worker):
            break
        time.sleep(0.05)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its supervisor")
    assert not (tmp_path / "out.parquet").exists()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# -- corrupt files ------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_cell(results: Path) -> Path:
    meta, out = cell(results, "numpy")
    assert meta.status == "ok"
    return out


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_cell_stops_aggregate(good_cell: Path, tmp_path: Path, damage: str):
    bad = good_cell.with_name("999.parquet")
    data = good_cell.read_bytes()
    bad.write_bytes(
        {"garbage": b"not parquet at all", "truncated": data[: len(data) // 2], "empty": b""}[
            damage
        ]
    )
    try:
        with pytest.raises(CorruptFile) as err:
            aggregate([good_cell, bad], tmp_path / "benchmarks.parquet")
        assert f"cannot read cell file {bad}" in str(err.value)
        assert f"Remake it with: snakemake --cores 1 --forcerun {bad}" in str(err.value)
        assert not (tmp_path / "benchmarks.parquet").exists()
    finally:
        bad.unlink()


def test_corrupt_inputs_stop_the_aggregate_script(good_cell: Path, tmp_path: Path):
    """scripts/aggregate.py checks the cells' inputs files too, and exits 1 naming them."""
    root = tmp_path / "results"
    cell_file = root / "cells" / "numpy" / "cpu" / "float64" / "t1" / "elementwise" / "1000.parquet"
    cell_file.parent.mkdir(parents=True)
    cell_file.write_bytes(good_cell.read_bytes())
    npz = root / "inputs" / "elementwise" / "1000.npz"
    cmd = [sys.executable, str(REPO / "scripts" / "aggregate.py"), "--output"]
    cmd += ["results/benchmarks.parquet", "--samples", "results/samples.parquet"]
    cmd += ["--inputs", "results/inputs/elementwise/1000.npz"]
    cmd += ["--cells", "results/cells/numpy/cpu/float64/t1/elementwise/1000.parquet"]

    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "cannot read inputs file results/inputs/elementwise/1000.npz: it is missing" in (
        proc.stderr
    )

    inputs.write("elementwise", 1000, 1, npz)
    data = bytearray(npz.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped byte inside an array: the CRC catches it
    npz.write_bytes(bytes(data))
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout
    assert "cannot read inputs file results/inputs/elementwise/1000.npz" in proc.stderr
    assert "Remake it with: snakemake --cores 1 --forcerun results/inputs/elementwise/1000.npz" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr

    inputs.write("elementwise", 1000, 1, npz)
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert pq.read_table(root / "benchmarks.parquet").num_rows == 1


# -- through Snakemake --------------------------------------------------------------


def statuses(workdir: Path) -> dict[tuple[str, str], str]:
    table = pq.read_table(workdir / "results" / "benchmarks.parquet").to_pylist()
    return {(r["library"], r["operation"]): r["status"] for r in table}


@pytest.mark.e2e
def test_grid_of_numpy_and_every_fault_completes(workdir: Path, cpu_roofs: Path):
    seed_roofs(workdir, cpu_roofs)
    (workdir / "faults.yaml").write_text(GRID, encoding="utf-8")
    # The cells and their table first: the analysis runs once, at the end, over every status
    # (the remake command below runs the whole workflow).
    table = "results/benchmarks.parquet"
    proc = snakemake(workdir, table, "--cores", "1", "--configfile", "faults.yaml", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = statuses(workdir)
    want = {(lib, "matmul"): s for lib, s in EXPECTED.items()}
    assert got == want
    assert not (workdir / "results" / "summary.md").exists()

    # A corrupted cell file stops aggregate, naming the file and the remake command ...
    rel = "results/cells/numpy/cpu/float64/t1/matmul/16.parquet"
    (workdir / rel).write_bytes(b"corrupted")
    proc = snakemake(workdir, "--cores", "1", "--configfile", "faults.yaml", timeout=600)
    assert proc.returncode != 0
    log = (workdir / "logs" / "aggregate.log").read_text(encoding="utf-8")
    assert f"cannot read cell file {rel}" in log
    assert f"snakemake --cores 1 --forcerun {rel}" in log
    # ... and that command remakes it and completes the run.
    proc = snakemake(
        workdir, "--cores", "1", "--configfile", "faults.yaml", "--forcerun", rel, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert statuses(workdir) == want
    # ... up to the summary: the faults cost their cells, not the run
    assert (workdir / "results" / "summary.md").exists()


INTERRUPTED = """
libraries: [numpy, fault-hang]
operations:
  elementwise:
    sizes: [1000, 2000]
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 5, budget_s: 0.05}
replicates: {min: 1, max: 2, max_cpu_taken: null}
cell_timeout_s: 4
"""


def _workers_of(lock: Path) -> list[int]:
    """Processes whose environment names this test's timing lock (supervisors, workers)."""
    found = []
    needle = f"NUMBENCH_TIMING_LOCK={lock}".encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in Path(entry.path, "environ").read_bytes().split(b"\0"):
                    if _state(int(entry.name)) not in ("Z", "gone"):
                        found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.e2e
def test_killed_run_resumes(workdir: Path, cpu_roofs: Path):
    seed_roofs(workdir, cpu_roofs)
    (workdir / "grid.yaml").write_text(INTERRUPTED, encoding="utf-8")
    lock = workdir / ".timing.lock"
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NUMBENCH_TIMING_LOCK"] = str(lock)
    run = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "grid.yaml"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    cells = workdir / "results" / "cells"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not list(cells.rglob("*.parquet")):
            assert run.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # Snakemake and its jobs, as a lost node would
        run.wait()
    done = sorted(cells.rglob("*.parquet"))
    assert 1 <= len(done) < 4, "killed mid-grid"
    for path in done:  # no truncated Parquet is ever visible
        read_cell(path)
    visible = [p for p in (workdir / "results").rglob("*") if p.is_file()]
    # cells, inputs and early rounds (written whole too, by rename); no partial file
    assert all(p.suffix in (".parquet", ".npz", ".json") or p.name.startswith(".") for p in visible)
    for _ in range(50):  # the workers died with their supervisors
        if not _workers_of(lock):
            break
        time.sleep(0.1)
    assert not _workers_of(lock)

    # make run's resume step removes the stale lock; the run completes its cells and their
    # table (what follows the table is test_grid_of_numpy_and_every_fault_completes').
    assert snakemake_running_in(workdir) == []
    assert "stale lock" in unlock_if_stale(workdir)
    table = "results/benchmarks.parquet"
    proc = snakemake(workdir, table, "--cores", "1", "--configfile", "grid.yaml", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = statuses(workdir)
    assert got == {("numpy", "elementwise"): "ok", ("fault-hang", "elementwise"): "timeout"}
    assert len(pq.read_table(workdir / "results" / "benchmarks.parquet")) == 4


def test_unlock_leaves_a_running_snakemake_alone(tmp_path: Path):
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.input.lock").write_text("x")
    fake = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "snakemake"], cwd=tmp_path
    )
    try:
        time.sleep(0.2)
        assert fake.pid in snakemake_running_in(tmp_path)
        assert "left alone" in unlock_if_stale(tmp_path)
        assert (tmp_path / ".snakemake" / "locks" / "0.input.lock").exists()
    finally:
        fake.kill()
        fake.wait()
