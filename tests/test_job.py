"""A timing job handed to a process forked from a zygote that has imported the supervisor
(numbench.measure.job), run by a stand-in for Snakemake: a program named snakemake that
runs the jobs' commands one after the other, so that each job finds it above itself, as its
zygote does (which ends with it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, make_spec

from numbench.measure import activity, zygote
from numbench.measure.host_lock import timing_lock
from numbench.measure.job import FAILED_EXIT

pytestmark = pytest.mark.skipif(not zygote.supported(), reason="forking jobs needs Linux")

RUN_CELL = REPO / "scripts" / "run_cell.py"
TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 5, "budget_s": 0.01}
FORKED = "job: run by a process forked from a zygote that had imported the supervisor"
#: the stand-in: runs each job of the JSON file given, its output to its log; a job with
#: "term_on" is sent SIGTERM once its log holds that text; the exit statuses go to a file
STAND_IN = """\
import json, signal, subprocess, sys, time
jobs = json.load(open(sys.argv[1]))
codes = []
for job in jobs:
    with open(job["log"], "w") as log:
        proc = subprocess.Popen(job["cmd"], stdout=log, stderr=subprocess.STDOUT)
    if job.get("term_on"):
        for _ in range(1200):
            if job["term_on"] in open(job["log"]).read():
                break
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
    codes.append(proc.wait())
json.dump(codes, open(sys.argv[2], "w"))
"""


@pytest.fixture
def here(zygote_folder):
    return zygote_folder


def round_job(folder: Path, output: str, how: str = "fork", **timing) -> list[str]:
    """The command of an early round's job of a small NumPy cell (rule early_round's)."""
    spec = make_spec(
        "numpy", "cpu", "elementwise", 1000, folder / "in.npz", {**TIMING, **timing}
    ).replace(worker_start=how)
    return [sys.executable, str(RUN_CELL), "--spec", spec.to_json(), "--round", "0"] + [
        "--output",
        output,
    ]


def run_jobs(folder: Path, jobs: list[dict]) -> list[int]:
    """The jobs' exit statuses, run one after the other under the stand-in for Snakemake."""
    program = folder / "bin" / "snakemake"
    program.parent.mkdir(exist_ok=True)
    program.write_text(STAND_IN)
    (folder / "jobs.json").write_text(json.dumps(jobs))
    cmd = [sys.executable, str(program), "jobs.json", "codes.json"]
    subprocess.run(cmd, check=True, timeout=300)
    return json.loads((folder / "codes.json").read_text())


def test_the_first_job_starts_a_zygote_and_the_next_are_forked_from_it(here):
    jobs = [{"cmd": round_job(here, f"r{i}.json"), "log": f"job{i}.log"} for i in range(3)]
    assert run_jobs(here, jobs) == [0, 0, 0]
    logs = [(here / f"job{i}.log").read_text() for i in range(3)]
    # the first ran in its own process; the next two in processes the zygote forked
    assert [FORKED in log for log in logs] == [False, True, True]
    for i, log in enumerate(logs):
        assert "round 0: measured ok" in log
        written = json.loads((here / f"r{i}.json").read_text())
        assert [run["report"]["status"] for run in written["runs"]] == ["ok"]
        # the stand-in above the job is the workflow, forked or not
        assert written["activity"]["workflow_cpu_share"] is not None
    started = list((here / "logs" / "zygotes").glob(f"{zygote.JOB}-*.log"))
    assert len(started) == 1 and "imported" in started[0].read_text()
    assert "refuses" not in started[0].read_text()
    for _ in range(100):  # and it ends with its run, as the workers' zygotes do
        if not zygote.serving(str(here.resolve())):
            break
        time.sleep(0.05)
    assert zygote.serving(str(here.resolve())) == []


def test_jobs_that_start_their_workers_fresh_run_in_their_own_process(here):
    jobs = [{"cmd": round_job(here, f"r{i}.json", "exec"), "log": f"job{i}.log"} for i in (0, 1)]
    assert run_jobs(here, jobs) == [0, 0]
    assert not any(FORKED in (here / f"job{i}.log").read_text() for i in (0, 1))
    assert not list((here / "logs" / "zygotes").glob(f"{zygote.JOB}-*.log"))


def test_a_forked_job_s_fault_is_its_job_s_exit_status_and_writes_nothing(here):
    (here / "a-file").write_text("not a folder\n")
    jobs = [
        {"cmd": round_job(here, "r0.json"), "log": "job0.log"},
        {"cmd": round_job(here, "a-file/r1.json"), "log": "job1.log"},
    ]
    assert run_jobs(here, jobs) == [0, FAILED_EXIT]
    log = (here / "job1.log").read_text()
    assert FORKED in log and "cell job failed: cannot write a-file/r1.json" in log
    assert (here / "a-file").read_text() == "not a folder\n"


def test_sigterm_to_a_job_ends_its_forked_process_which_lets_go_of_the_lock(here):
    long = round_job(here, "r1.json", budget_s=120, max_samples=10**6, min_sample_time_s=0.01)
    jobs = [
        {"cmd": round_job(here, "r0.json"), "log": "job0.log"},
        {"cmd": long, "log": "job1.log", "term_on": FORKED},
    ]
    assert run_jobs(here, jobs) == [0, 143]
    assert FORKED in (here / "job1.log").read_text()
    assert not (here / "r1.json").exists()
    with timing_lock(holder="test", timeout_s=10):  # let go of, not left held
        pass


def test_a_forked_job_finds_the_workflow_above_the_job_that_handed_it_over(monkeypatch):
    monkeypatch.delenv(zygote.JOB_PID_ENV, raising=False)
    monkeypatch.delenv(zygote.JOB_PARENT_ENV, raising=False)
    assert (activity.job_pid(), activity.job_parent()) == (os.getpid(), os.getppid())
    monkeypatch.setenv(zygote.JOB_PID_ENV, "4242")
    monkeypatch.setenv(zygote.JOB_PARENT_ENV, "4241")
    assert (activity.job_pid(), activity.job_parent()) == (4242, 4241)


def test_a_job_zygote_s_key_changes_with_numbench_s_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    before = zygote.package_digest(tmp_path)
    assert zygote.package_digest(tmp_path) == before
    (tmp_path / "sub" / "b.py").write_text("y = 22\n")  # one byte more
    assert zygote.package_digest(tmp_path) != before
    (tmp_path / "notes.txt").write_text("not a module\n")
    after = zygote.package_digest(tmp_path)
    assert zygote.package_digest(tmp_path) == after


def test_pythonpath_gets_a_folder_first_and_once():
    sep = os.pathsep
    assert zygote.with_first("/s", None) == "/s"
    assert zygote.with_first("/s", "") == "/s"
    assert zygote.with_first("/s", f"/a{sep}/s{sep}/b") == f"/s{sep}/a{sep}/b"
    assert zygote.with_first("/s", f"/s{sep}/a") == f"/s{sep}/a"


def test_a_job_under_slurm_starts_no_zygote_for_the_jobs_after_it(here, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "17")  # each Slurm job is a run of its own
    jobs = [{"cmd": round_job(here, f"r{i}.json"), "log": f"job{i}.log"} for i in (0, 1)]
    assert run_jobs(here, jobs) == [0, 0]
    assert not any(FORKED in (here / f"job{i}.log").read_text() for i in (0, 1))
    assert not list((here / "logs" / "zygotes").glob(f"{zygote.JOB}-*.log"))


def test_the_job_s_entry_imports_no_numbench_module_but_the_zygote_s():
    """Snakemake starts a process for every job, which with a zygote serving only hands its
    job over and waits: the entry point's import must not pull in the supervisor's modules
    (the spec, the lock, the cells' paths), which every job would pay for nothing."""
    probe = (
        "import sys; import numbench.measure.job; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('numbench'))))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [
        "numbench",
        "numbench.errors",
        "numbench.measure",
        "numbench.measure.job",
        "numbench.measure.zygote",
    ]
