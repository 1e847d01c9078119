"""A cell's compilations shared between its processes (``compile_cache: cell``,
``numbench.measure.compile_cache``): the first JAX process of a cell compiles into the cell's
empty folder and says ``cold``, the later ones load from it and say ``warm`` (Numba's
``njit`` on the CPU likewise); another cell,
or the same cell in another run, gets a folder of its own; a library that cannot keep its
compilations is given none, and so is the baseline beside a cell; a folder others could
write in is refused; the cell's ``first_call_s`` is its cold processes' alone; a cell's
folder goes when its rounds end, the run's when it ends, and a run's whose pid a later
process took at the next start. No time is asserted."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import make_spec

from numbench import inputs_file as inputs
from numbench.analyse.aggregate import cell_row
from numbench.measure import compile_cache, process, zygote

TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 5, "budget_s": 0.01}


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A folder of its own to work in (the caches are per folder), with its inputs, and a
    temporary folder of its own, so that what the test leaves there is its own."""
    monkeypatch.chdir(tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)
    inputs.write("matmul", 24, 1, tmp_path / "in.npz")
    return tmp_path


def spec(folder: Path, library: str = "jax", cache: str = "cell", size: int = 24, rounds=1):
    return make_spec(
        library, "cpu", "matmul", size, folder / "in.npz", TIMING, replicates=(rounds, rounds)
    ).replace(compile_cache=cache, worker_start="exec")


@pytest.mark.parametrize("start", ["exec", "fork"])
def test_the_first_process_compiles_and_the_later_ones_load(here, start):
    pytest.importorskip("jax")
    folder = Path(process.cell_compile_folder(spec(here)))
    reports = [process.run_worker(spec(here).replace(worker_start=start))]
    written = entries(folder)
    assert written  # what the first process compiled
    reports += [process.run_worker(spec(here).replace(worker_start=start)) for _ in range(2)]
    for report in reports:
        assert report.status == "ok", report.error
    assert [r.compile_cache for r in reports] == ["cold", "warm", "warm"]
    assert [r.worker_start for r in reports] == [start] * 3
    assert entries(folder) == written  # the later ones loaded it: nothing compiled anew
    zygote.stop_all()


def entries(folder: Path) -> dict[str, int]:
    """The compilations kept in a cell's folder, each with when it was written: one
    compiled again would be written again (JAX's access-time marks left out)."""
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith("-atime")
    }


def test_a_cells_folder_goes_when_its_rounds_end(here):
    pytest.importorskip("jax")
    from numbench.measure.supervisor import run_cell

    cell = spec(here, rounds=2)
    result = run_cell(cell, here / "cell.parquet", lock=str(here / ".lock"))
    assert result.status == "ok", result.meta.error
    # a round set aside (another program took the CPUs) would have compiled again: the last
    # kept round is warm, the first kept one cold
    caches = [r.report.compile_cache for r in result.runs]
    assert caches[0] == "cold" and caches[-1] == "warm" and len(caches) == 2
    folder = Path(process.cell_compile_folder(cell))
    assert folder.parent.is_dir() and not folder.exists()


def test_numba_keeps_its_compilations_on_the_cpu_alone(here):
    pytest.importorskip("numba")
    folder = Path(process.cell_compile_folder(spec(here, "numba")))
    reports = [process.run_worker(spec(here, "numba"))]
    written = entries(folder)
    assert any(name.endswith(".nbi") for name in written)  # njit's index, from the first
    reports.append(process.run_worker(spec(here, "numba")))
    for report in reports:
        assert report.status == "ok", report.error
    assert [r.compile_cache for r in reports] == ["cold", "warm"]
    assert entries(folder) == written  # the second loaded it: nothing compiled anew
    on_gpu = spec(here, "numba").replace(device="gpu")
    assert process.cell_compile_folder(on_gpu) is None  # a CUDA kernel compiles at launch


def test_without_it_every_process_compiles_and_nothing_is_kept(here):
    pytest.importorskip("jax")
    report = process.run_worker(spec(here, cache="none"))
    assert report.status == "ok", report.error
    assert report.compile_cache is None
    assert process.cell_compile_folder(spec(here, cache="none")) is None
    assert not list((here / "temp").glob("numbench-compile-*"))


def test_a_library_that_keeps_no_compilations_gets_no_folder(here, monkeypatch):
    assert process.cell_compile_folder(spec(here, "numpy")) is None
    assert process.cell_compile_folder(spec(here, "jax-eager")) is None
    # a folder the supervisor's own environment names is not handed on
    monkeypatch.setenv(compile_cache.FOLDER_ENV, str(here / "stale"))
    env = process.worker_environment(spec(here, "numpy"))
    assert compile_cache.FOLDER_ENV not in env
    own = process.worker_environment(spec(here))[compile_cache.FOLDER_ENV]
    assert own == process.cell_compile_folder(spec(here)) != str(here / "stale")


def test_the_baseline_beside_a_cell_compiles_afresh(here):
    """A JAX cell's partner (an environment's JAX cell is paired with the base one) has
    the baseline cell's identity: sharing would let it fill that cell's folder."""
    cell = spec(here).replace(paired_with="jax/cpu")
    assert cell.paired_spec().compile_cache == "none"
    assert process.cell_compile_folder(cell.paired_spec()) is None
    assert process.cell_compile_folder(cell) is not None


def test_a_folder_another_user_could_write_in_is_not_shared(here):
    pytest.importorskip("jax")
    folder = Path(process.cell_compile_folder(spec(here)))
    folder.parent.mkdir(parents=True)
    folder.parent.chmod(0o777)
    report = process.run_worker(spec(here))
    assert report.status == "ok", report.error
    assert report.compile_cache is None  # compiled afresh, nothing loaded from there
    assert not folder.exists()


def test_each_cell_and_each_run_has_a_folder_of_its_own(here):
    one, other = spec(here), spec(here, size=32)
    assert compile_cache.folder_for(one, 10) != compile_cache.folder_for(other, 10)
    assert compile_cache.folder_for(one, 10) != compile_cache.folder_for(one, 11)
    assert compile_cache.folder_for(one, 10) == compile_cache.folder_for(one, 10)
    # the same cell measured from another folder is another run's
    assert compile_cache.folder_for(one, 10, cwd="/elsewhere") != compile_cache.folder_for(one, 10)


def test_a_pid_taken_again_by_a_later_process_is_not_the_run_it_was(here):
    reused = compile_cache.folder_for(spec(here), os.getpid())
    tag = reused.parent.name
    host, pid, started = tag.rsplit("-", 2)
    assert pid == str(os.getpid()) and started != "0"
    # the same host and pid, started at another time: a run that has ended
    older = reused.parent.with_name(f"{tag[: -len(started)]}{int(started) - 1}") / "cell"
    older.mkdir(parents=True)
    assert compile_cache.clear(only_dead=True) == 1 and not older.parent.exists()
    # another host's run (a temporary folder shared between nodes) is left to that host
    remote = reused.parent.with_name(reused.parent.name.replace(host, "otherhost", 1))
    remote.mkdir()
    assert compile_cache.clear(only_dead=True) == 0 and remote.exists()


def test_the_runs_folders_go_at_its_end_and_a_dead_runs_at_the_next_start(here):
    dead = compile_cache.folder_for(spec(here), 2**22 + 12345)  # no such process
    alive = compile_cache.folder_for(spec(here), os.getpid())
    for folder in (dead, alive):
        folder.mkdir(parents=True)
        (folder / "entry").write_text("x")
    newer = compile_cache.folder_for(spec(here, size=32), os.getppid())
    assert compile_cache.open_folder(str(newer)) == "cold"
    assert not dead.parent.exists() and alive.exists()
    assert compile_cache.open_folder(str(alive)) == "warm"
    assert compile_cache.clear() == 2
    assert not alive.parent.exists() and not newer.parent.exists()


def _cell_table(first_calls: list[float], caches: list[str | None]) -> pa.Table:
    """A cell file's rows as aggregation reads them: two samples per process."""
    from numbench.contract import LATENCY, MEASURED

    key = {"library": "jax", "device": "cpu", "operation": "matmul", "size": 24}
    key |= {"dtype": "float64", "threads": 1, "role": MEASURED, "mode": LATENCY, "status": "ok"}
    rows = []
    for rep, (first, cache) in enumerate(zip(first_calls, caches, strict=True)):
        for seconds in (1e-3, 1.1e-3):
            rows.append(
                key
                | {"replicate": rep, "seconds": seconds, "first_call_s": first}
                | {"compile_cache": cache}
            )
    return pa.Table.from_pylist(rows)


def test_a_cells_first_call_is_that_of_the_processes_that_compiled(monkeypatch):
    from numbench.analyse import aggregate

    # only the columns this test gives: the rest of the reducers' columns are not read
    monkeypatch.setattr(
        aggregate,
        "PROCESS_REDUCERS",
        {"first_call_s": "median", "compile_cache": "tally"},
    )
    monkeypatch.setattr(aggregate, "META_COLUMNS", ["status", "dispatch"])
    table = _cell_table([2.0, 0.1, 0.2, 0.3], ["cold", "warm", "warm", "warm"])
    table = table.append_column("dispatch", pa.array(["synchronous"] * table.num_rows))
    row = cell_row(table)
    assert row["first_call_s"] == 2.0
    assert row["first_call_paid_s"] == pytest.approx(2.6)  # what the four processes paid
    assert row["compile_cache"] == "1 cold, 3 warm"
    unshared = _cell_table([2.0, 0.1, 0.3], [None, None, None])
    unshared = unshared.append_column("dispatch", pa.array(["synchronous"] * unshared.num_rows))
    row = cell_row(unshared)
    assert row["first_call_s"] == 0.3 and row["compile_cache"] is None


def test_a_round_set_aside_that_compiled_takes_its_compilations_with_it(here):
    from numbench.measure.replicates import BASELINE, MEASURED, ProcessRun, forget_compiled
    from numbench.spec import ProcessReport

    own = spec(here)
    folder = Path(process.cell_compile_folder(own))
    folder.mkdir(parents=True)
    (folder / "entry").write_text("x")
    warm = ProcessRun(MEASURED, 0, 0.0, ProcessReport(status="ok", compile_cache="warm"))
    partner = ProcessRun(BASELINE, 0, 0.0, ProcessReport(status="ok"))
    forget_compiled([warm, partner], own, spec(here, "numpy"))
    assert (folder / "entry").exists()  # what a kept earlier process compiled stays
    cold = ProcessRun(MEASURED, 0, 0.0, ProcessReport(status="ok", compile_cache="cold"))
    forget_compiled([partner, cold], own, spec(here, "numpy"))
    assert not folder.exists()
    assert compile_cache.open_folder(str(folder)) == "cold"  # the next attempt compiles
