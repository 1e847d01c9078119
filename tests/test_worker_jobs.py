"""One launch for every worker (``numbench.measure.process``): a cell's worker and a roof's
are two kinds of ``WorkerJob``, given the same environment for the same settings, started
in a private folder, killed past their limit, and every way they end turned into a status.
Stand-in workers (a small module on ``PYTHONPATH``) stand for the real ones, except where
the roofs' own worker is started to show that its module runs."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest
from conftest import make_spec

from numbench.measure import process
from numbench.roofline import measure as roofs
from numbench.spec import SUPERVISOR_ENV, ProcessReport

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}

STAND_IN = """
import json, os, signal, sys, time

job = json.load(open(sys.argv[1]))
time.sleep(job.get("sleep", 0))
if job.get("signal"):
    os.kill(os.getpid(), job["signal"])
if "write" in job:
    seen = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "TMPDIR", "STAND_IN_FLAG")}
    with open(sys.argv[2], "w") as fh:
        json.dump({**job["write"], "env": seen, "job_file": os.path.basename(sys.argv[1])}, fh)
sys.exit(job.get("exit", 0))
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A ``WorkerJob`` maker for the stand-in worker module (``stand_in_worker``)."""
    (tmp_path / "stand_in_worker.py").write_text(STAND_IN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    def make(job: dict, **fields) -> process.WorkerJob:
        settings = {"threads": 2, "allocator": "steady", "timeout_s": 60.0, **fields}
        return process.WorkerJob(
            module="stand_in_worker", job_file="job.json", job_text=json.dumps(job), **settings
        )

    return make


def test_a_cell_and_a_roof_gemm_of_the_same_settings_get_the_same_environment():
    spec = make_spec("numpy", "cpu", "sort", 1000, "x.npz", FAST, dtype="float32", threads=2)
    gemm = {"kind": "gemm", "library": "numpy", "device": "cpu", "dtype": "float32"}
    roof = roofs.worker_job({**gemm, "threads": 2, "sizes": [8]}, spec.allocator)
    cell_env = process.worker_environment(spec)
    assert process.job_environment(roof) == cell_env
    assert cell_env["OMP_NUM_THREADS"] == "2" and cell_env["PYTHONUNBUFFERED"] == "1"
    assert cell_env["PYTHONPATH"].split(os.pathsep)[0].endswith("src")
    # a job without a library (the memory roof) gets the threads' and allocator's settings
    memory = process.job_environment(roofs.worker_job({"kind": "memory", "threads": 2}, "steady"))
    assert memory["OMP_NUM_THREADS"] == "2" and memory[SUPERVISOR_ENV] == cell_env[SUPERVISOR_ENV]


def test_a_worker_reads_its_job_and_its_result_is_read_back(stand_in):
    job = stand_in({"write": {"status": "ok"}}, variables={"STAND_IN_FLAG": "on"})
    out = process.run_job(job, roofs.read_result)
    assert out["status"] == "ok" and out["job_file"] == "job.json"
    assert out["env"]["OMP_NUM_THREADS"] == "2" and out["env"]["STAND_IN_FLAG"] == "on"
    assert "numbench-worker-" in out["env"]["TMPDIR"]  # a private folder, removed after


def test_a_worker_past_its_limit_is_killed_and_its_limit_named(stand_in):
    job = stand_in({"sleep": 60, "write": {}}, timeout_s=0.2, limit_name="the test's limit")
    out = process.run_job(job, roofs.read_result)
    assert isinstance(out, ProcessReport) and out.status == "timeout"
    assert out.error == "no result within the test's limit = 0.2 s; worker killed"
    # a roof's job says the same as a mapping, with the roofs' limit named
    roof = roofs.worker_job({"kind": "memory", "threads": 1}, "steady")
    roof = dataclasses.replace(roof, module="stand_in_worker", job_text='{"sleep": 60}')
    killed = roofs.run_job(dataclasses.replace(roof, timeout_s=0.2))
    assert killed == {
        "status": "timeout",
        "error": f"no result within {roofs.LIMIT_NAME} = 0.2 s; worker killed",
    }


@pytest.mark.parametrize(
    ("job", "status", "words"),
    [
        ({"exit": 3}, "failed", "exited with status 3 without a result; see the roofs' log"),
        ({"signal": int(signal.SIGTERM)}, "crashed", "worker died by SIGTERM"),
    ],
)
def test_a_roof_worker_that_ends_without_a_result_gets_a_status(stand_in, job, status, words):
    out = roofs.run_job(stand_in(job))
    assert out["status"] == status and words in out["error"]


def test_a_cell_worker_that_ends_without_a_result_gets_the_same_statuses(tmp_path):
    assert process.ended_report(3, tmp_path / "none.json").status == "failed"
    crashed = process.ended_report(-int(signal.SIGKILL), tmp_path / "none.json")
    assert crashed.status == "crashed" and "out-of-memory killer" in crashed.error


def test_an_unreadable_roof_result_is_numbenchs_fault(tmp_path):
    from numbench.errors import MachineryFault

    broken = tmp_path / "result.json"
    broken.write_text("{not json")
    with pytest.raises(MachineryFault, match="unreadable"):
        roofs.read_result(0, broken)


def test_the_roofs_own_worker_runs_through_the_launch():
    """The real module (``python -m numbench.roofline.measure.kernels``): a job of no known
    kind fails there, and says so as a status."""
    out = roofs.run_job(roofs.worker_job({"kind": "nothing", "threads": 1}, "steady"))
    assert out["status"] == "failed" and "exited with status 1" in out["error"]


def test_the_roofs_worker_loads_no_table_library_before_it_pins_its_cpus():
    """Every roof worker imports ``numbench.roofline.measure`` first: it must stay light."""
    import subprocess
    import sys

    code = (
        "import sys, numbench.roofline.measure.kernels; "
        "print(sorted(m for m in ('pyarrow', 'numpy', 'pandas') if m in sys.modules))"
    )
    env = process.job_environment(roofs.worker_job({"kind": "memory", "threads": 1}, "steady"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
