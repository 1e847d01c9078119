"""A fault of numbench's machinery or of the host fails the cell's job (non-zero exit of
scripts/run_cell.py, a clear message, no cell file), so Snakemake's --retries and the next
run measure the cell again; ``failed`` stays the library's raising (tests/test_faults.py)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_spec

from numbench import contract as tables
from numbench import inputs_file as inputs
from numbench.errors import MachineryFault
from numbench.measure import process as cell_module
from numbench.measure.process import ended_report
from numbench.measure.supervisor import run_cell, run_round
from numbench.measure.worker import MACHINERY_FAULT_EXIT

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}
#: the sentence every failed job's log ends with
NOT_THE_LIBRARY = "This is a fault of numbench or of this host, not of numpy"


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    return make_spec("numpy", "cpu", "sort", 1000, path, FAST)


def run_script(spec, output: Path, lock: Path, *extra: str) -> subprocess.CompletedProcess:
    """scripts/run_cell.py as the cell rule runs it, with its own lock."""
    env = {**os.environ, "NUMBENCH_TIMING_LOCK": str(lock)}
    cmd = [sys.executable, str(REPO / "scripts" / "run_cell.py"), "--spec", spec.to_json()]
    return subprocess.run(
        [*cmd, "--output", str(output), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_script_measures_and_exits_0_when_all_is_well(spec, tmp_path):
    out = tmp_path / "cells" / "cell.parquet"
    proc = run_script(spec, out, tmp_path / "lock")
    assert proc.returncode == 0, proc.stderr
    assert "cell: ok" in proc.stdout and out.exists()


def test_a_lock_that_cannot_be_opened_fails_the_job_with_no_cell_file(spec, tmp_path):
    lock = tmp_path / "lock"
    lock.symlink_to(tmp_path / "planted")
    out = tmp_path / "cells" / "cell.parquet"
    proc = run_script(spec, out, lock)
    assert proc.returncode != 0, proc.stdout
    assert f"cell job failed: refusing the timing lock {lock}: it is a symbolic link" in (
        proc.stderr
    )
    assert NOT_THE_LIBRARY in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "planted").exists()


def test_a_round_whose_lock_cannot_be_opened_fails_its_job_too(spec, tmp_path):
    lock = tmp_path / "no-such-folder" / "lock"
    out = tmp_path / "rounds" / "r0.json"
    proc = run_script(spec, out, lock, "--round", "0")
    assert proc.returncode != 0, proc.stdout
    assert f"cannot open the timing lock's folder {lock.parent}" in proc.stderr
    assert not out.exists()


def test_an_output_folder_that_cannot_be_made_fails_the_job_before_measuring(spec, tmp_path):
    blocker = tmp_path / "cells"
    blocker.write_text("a file where the cell's folder should be")
    out = blocker / "numpy" / "cell.parquet"
    proc = run_script(spec, out, tmp_path / "lock")
    assert proc.returncode != 0, proc.stdout
    assert f"cell job failed: cannot write {out}" in proc.stderr
    assert NOT_THE_LIBRARY in proc.stderr and "Traceback" not in proc.stderr
    assert "worker:" not in proc.stdout  # refused before any worker ran


@pytest.mark.skipif(os.getuid() == 0, reason="root writes in a read-only folder anyway")
def test_an_output_folder_that_is_not_writable_fails_the_job(spec, tmp_path):
    folder = tmp_path / "cells"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        proc = run_script(spec, folder / "cell.parquet", tmp_path / "lock")
    finally:
        folder.chmod(0o700)
    assert proc.returncode != 0, proc.stdout
    assert "Permission denied" in proc.stderr and NOT_THE_LIBRARY in proc.stderr
    assert list(folder.iterdir()) == []


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_when_the_cell_is_written_fails_the_job_and_leaves_nothing(
    spec, tmp_path, monkeypatch
):
    monkeypatch.setattr(tables.pq, "write_table", _disk_full)
    out = tmp_path / "cells" / "cell.parquet"
    with pytest.raises(MachineryFault) as err:
        run_cell(spec, out, lock=str(tmp_path / "lock"))
    assert str(err.value) == f"cannot write the cell's file {out}: No space left on device"
    assert list(out.parent.iterdir()) == []  # no cell file, no temporary one


def test_a_full_disk_when_a_round_is_written_fails_its_job(spec, tmp_path, monkeypatch):
    monkeypatch.setattr(tables.Path, "write_bytes", _disk_full)
    out = tmp_path / "rounds" / "r0.json"
    with pytest.raises(MachineryFault, match="cannot write the round's file .*No space left"):
        run_round(spec, 0, out, lock=str(tmp_path / "lock"))
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("lockstep", [False, True], ids=["alone", "lockstep"])
def test_a_worker_that_cannot_start_fails_the_job(spec, tmp_path, monkeypatch, lockstep):
    if lockstep:
        spec = spec.replace(paired_with="numpy/cpu").replace(
            replicates={**spec.replicates.__dict__, "lockstep": True}
        )
    monkeypatch.setattr(cell_module.sys, "executable", str(tmp_path / "no-such-python"))
    out = tmp_path / "cell.parquet"
    with pytest.raises(MachineryFault, match="the worker cannot start: No such file"):
        run_cell(spec, out, lock=str(tmp_path / "lock"))
    assert not out.exists()


def test_a_worker_that_cannot_write_its_report_exits_with_the_machinery_s_status(spec, tmp_path):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    result = tmp_path / "gone" / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "numbench.measure.worker", str(spec_file), str(result)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == MACHINERY_FAULT_EXIT, proc.stderr
    assert f"worker: cannot write its report {result}" in proc.stderr
    with pytest.raises(MachineryFault, match="could not read its spec or write its report"):
        ended_report(proc.returncode, result)


def test_a_worker_report_that_cannot_be_read_is_the_machinery_s_fault(tmp_path):
    report = tmp_path / "result.json"
    report.write_text("{half a repo")
    with pytest.raises(MachineryFault, match="is unreadable"):
        ended_report(0, report)
    report.write_text(json.dumps({"status": "fine"}))
    with pytest.raises(MachineryFault, match="unknown status 'fine'"):
        ended_report(0, report)


def test_a_worker_exit_without_a_report_is_still_the_library_s(tmp_path):
    """A library that exits its process, or a crash, stays the cell's status."""
    assert ended_report(3, tmp_path / "none.json").status == "failed"
    assert ended_report(-11, tmp_path / "none.json").status == "crashed"


ONE_CELL = """
libraries: [numpy]
operations:
  elementwise:
    sizes: [1000]
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.02}
replicates: {min: 1, max: 1, early_rounds: 0}
"""


@pytest.mark.e2e
def test_a_run_whose_lock_is_refused_fails_and_the_next_run_measures_the_cell(workdir):
    from conftest import snakemake

    (workdir / "one.yaml").write_text(ONE_CELL, encoding="utf-8")
    planted = workdir / ".timing.lock"
    planted.symlink_to(workdir / "elsewhere")
    rel = "results/cells/numpy/cpu/float64/t1/elementwise/1000.parquet"
    cell = workdir / rel
    # the cell alone is asked for (its inputs and cell jobs): the roofs job, which takes the
    # same lock, and the analysis are no part of what this checks
    proc = snakemake(workdir, rel, "--cores", "1", "--configfile", "one.yaml", "--retries", "1")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert not cell.exists()
    log = (workdir / "logs/cells/numpy/cpu/float64/t1/elementwise/1000.log").read_text()
    assert "refusing the timing lock" in log and NOT_THE_LIBRARY in log

    planted.unlink()
    proc = snakemake(workdir, rel, "--cores", "1", "--configfile", "one.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert tables.read_cell(cell).column("status").to_pylist()[0] == "ok"
