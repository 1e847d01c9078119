"""Jobs that run beside a timing cell (``--cores`` above 1): a job under the same Snakemake is
the workflow's, not another program (``numbench.measure.activity.WorkflowCpu``), one started
while the cell measured included; and a timing job waiting for the host's timing lock has
loaded nothing heavy (``numbench.measure.host_lock``): the lock is taken first, the
supervisor's own block of it enters within the entry point's."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest
from conftest import REPO, make_spec
from test_activity import watched, write_process

from numbench.machine.system import descendants
from numbench.measure.activity import WorkflowCpu, workflow_ticks
from numbench.measure.host_lock import LockError, timing_lock

#: the aggregate cpu line before and after a watched stretch: 400 ticks, 240 of them busy
#: (user), 140 idle, 20 steal
BEFORE = [1000, 0, 0, 5000, 0, 0, 0, 0, 0, 0]
AFTER = [1240, 0, 0, 5140, 0, 0, 0, 20, 0, 0]


def two_jobs(
    proc, snakemake_kids=(300, 310), snakemake_ticks=600, sibling_ticks=40, snakemake_waited=0
):
    """Snakemake (200) runs two jobs: the cell's (shell 300, supervisor 400, its worker 500)
    and, where 310 is among its children, another beside it (shell 310, its job 410,
    waiting for the lock)."""
    write_process(proc, 1, 0, ["/sbin/init"], 90, kids=[100])
    write_process(proc, 100, 1, ["-bash"], 50, kids=[200])
    snakemake = ["/venv/bin/python3.12", "-m", "snakemake", "--cores", "2"]
    write_process(
        proc, 200, 100, snakemake, snakemake_ticks, kids=snakemake_kids, waited=snakemake_waited
    )
    write_process(proc, 300, 200, ["/bin/bash", "-c", "python run_cell.py"], 10, kids=[400])
    write_process(proc, 400, 300, ["python", "run_cell.py"], 300, kids=[500])
    write_process(proc, 500, 400, ["python", "-m", "numbench.measure.worker"], 900)
    if 310 in snakemake_kids:
        write_process(proc, 310, 200, ["/bin/bash", "-c", "python run_cell.py"], 5, kids=[410])
        write_process(proc, 410, 310, ["python", "run_cell.py"], sibling_ticks)


def test_a_sibling_job_s_process_tree_is_the_workflow_s_and_the_cell_s_own_is_not(tmp_path):
    proc = tmp_path / "proc"
    two_jobs(proc)
    reader = WorkflowCpu(parent=300, proc=proc, own=400)
    assert reader.pids == [300, 200]
    # the ancestors, and the other job's shell and process; not the cell's supervisor or
    # its worker (their time is the cell's own, counted apart)
    assert reader() == {300: (5000, 10), 200: (5000, 600), 310: (5000, 5), 410: (5000, 40)}
    assert sorted(descendants(200, proc, leave_out=[400])) == [300, 310, 410]


def test_a_sibling_job_s_ticks_count_as_the_workflow_s_not_as_other_programs(tmp_path):
    proc = tmp_path / "proc"
    two_jobs(proc)
    reader = WorkflowCpu(parent=300, proc=proc, own=400)

    def later():
        """Meanwhile Snakemake took 20 ticks, the waiting job 10, and a third job started
        (shell 320 with 4 ticks, its process 420 with 6): 40 ticks of the workflow's."""
        two_jobs(proc, snakemake_kids=(300, 310, 320), snakemake_ticks=620, sibling_ticks=50)
        write_process(proc, 320, 200, ["/bin/bash", "-c", "python run_cell.py"], 4, kids=[420])
        write_process(proc, 420, 320, ["python", "run_cell.py"], 6, start=7000)
        return AFTER

    got = watched(BEFORE, later, reader)
    # 240 busy ticks of 400: the cell's own 150, the workflow's 40, other programs' 50
    assert got.workflow_cpu_share == pytest.approx(40 / 400)
    assert got.other_cpu_share == pytest.approx(50 / 400)
    assert got.steal_share == pytest.approx(20 / 400)


def test_a_helper_snakemake_waited_for_counts_and_an_ended_job_counts_once(tmp_path):
    """Snakemake's scheduler runs its solver in a process of its own, started and ended
    between two readings: it is in Snakemake's waited-for children's time. A job beside the
    cell that ended meanwhile is gone from the second reading, and its whole time came into
    its parent's: what it had taken by the first reading is not counted again."""
    proc = tmp_path / "proc"
    two_jobs(proc)
    reader = WorkflowCpu(parent=300, proc=proc, own=400)
    before = reader()
    # Snakemake took 20 ticks itself and waited for a solver of 9 ticks and for the job
    # beside's shell, which had waited for its process (40 ticks by the first reading, 50 in
    # all): the shell's 5 + 50 came into Snakemake's waited-for time
    shutil.rmtree(proc / "310")
    shutil.rmtree(proc / "410")
    two_jobs(proc, snakemake_kids=(300,), snakemake_ticks=620, snakemake_waited=9 + 55)
    after = reader()
    assert sorted(after) == [200, 300]
    # 20 + 9 + 5 + 50 = 84 ticks, less the 45 the job beside had taken by the first reading
    assert workflow_ticks(before, after) == 20 + 9 + (5 + 50) - (5 + 40)


def _children_files() -> bool:
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


#: a program named snakemake: it starts a helper of its own and a job beside the cell's, then
#: the cell's job under a shell; it prints what the cell's job read and the pids
FAKE_SNAKEMAKE = """\
import json, os, shlex, signal, subprocess, sys
helper = subprocess.Popen(["sleep", "60"])
beside = subprocess.Popen(["/bin/sh", "-c", "sleep 60; true"], start_new_session=True)
job = shlex.join([sys.executable, "-c", sys.argv[1]])
try:
    out = subprocess.run(["/bin/sh", "-c", job + "; true"], capture_output=True, text=True)
finally:
    helper.kill()
    os.killpg(beside.pid, signal.SIGKILL)
print(json.dumps({"me": os.getpid(), "helper": helper.pid, "beside": beside.pid,
                  "job": json.loads(out.stdout)}))
"""
#: the cell's job: starts a worker of its own, then reads the workflow's processes
JOB = """\
import json, os, subprocess
from numbench.measure.activity import WorkflowCpu
worker = subprocess.Popen(["sleep", "60"])
try:
    reading = WorkflowCpu()()
finally:
    worker.kill()
print(json.dumps({"me": os.getpid(), "worker": worker.pid, "read": sorted(reading)}))
"""


@pytest.mark.skipif(not _children_files(), reason="no /proc/PID/task/TID/children here")
def test_on_this_machine_a_job_beside_the_cell_is_the_workflow_s(tmp_path):
    fake = tmp_path / "bin" / "snakemake"
    fake.parent.mkdir()
    fake.write_text(FAKE_SNAKEMAKE)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    ran = subprocess.run(
        [sys.executable, str(fake), JOB], capture_output=True, text=True, check=True, env=env
    )
    got = json.loads(ran.stdout)
    read = set(got["job"]["read"])
    assert got["me"] in read  # Snakemake
    assert got["helper"] in read and got["beside"] in read  # its helper, the job beside
    assert got["job"]["me"] not in read and got["job"]["worker"] not in read  # the cell's own


# -- the waiting job ---------------------------------------------------------------------------
FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}
#: packages a timing job must not have loaded while it waits for the lock
HEAVY = {"numpy", "pyarrow", "pandas", "numba", "llvmlite", "torch", "jax", "tensorflow", "cupy"}


def imported(stderr: str) -> set[str]:
    """The modules named in ``python -X importtime``'s lines."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


@pytest.mark.parametrize("round_", [None, "0"])
def test_a_job_waiting_for_the_timing_lock_has_loaded_no_library_and_stops_on_sigterm(
    tmp_path, round_
):
    """The cell's entry point, its lock held here: once it says it waits, it is stopped; what
    it imported up to then (``-X importtime``) holds no numerical library, no pyarrow, and
    not the supervisor; it stops waiting on SIGTERM (143) and writes no file."""
    from numbench import inputs_file as inputs

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    spec = make_spec("numpy", "cpu", "sort", 1000, path, FAST)
    lock, out = tmp_path / "lock", tmp_path / "cells" / "cell.parquet"
    cmd = [sys.executable, "-X", "importtime", str(REPO / "scripts" / "run_cell.py")]
    cmd += ["--spec", spec.to_json(), "--output", str(out)]
    cmd += [] if round_ is None else ["--round", round_]
    env = {**os.environ, "NUMBENCH_TIMING_LOCK": str(lock)}
    log = tmp_path / "stderr"
    with open(lock, "w") as held, open(log, "w") as err:
        fcntl.flock(held, fcntl.LOCK_EX)
        job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            line = job.stdout.readline()
            assert line.startswith("waiting for the host's timing lock"), line
            job.send_signal(signal.SIGTERM)
            job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    stderr = log.read_text()
    assert job.returncode == 143, stderr[-2000:]
    loaded = imported(stderr)
    assert "numbench.measure.host_lock" in loaded  # the log is read
    assert not {name.split(".")[0] for name in loaded} & HEAVY
    assert "numbench.measure.supervisor" not in loaded
    assert not out.exists()


def test_a_lock_block_inside_another_of_the_same_thread_takes_nothing_again(tmp_path):
    """The entry point's block and the supervisor's: the inner one enters at once and lets
    go of nothing; another thread still waits; the outer block's end lets go."""
    lock = tmp_path / "lock"

    def free() -> bool:
        with open(lock, "a") as other:  # another open file: flock conflicts with it
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

    said = []
    with timing_lock(lock, holder="outer"):
        with timing_lock(lock, holder="inner", timeout_s=1.0, say=said.append):
            assert not free()
        assert not free() and said == []  # the inner block waited for nothing
        failed = []

        def other_thread():
            try:
                with timing_lock(lock, timeout_s=0.1, say=lambda line: None):
                    pass
            except LockError as exc:
                failed.append(exc)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert len(failed) == 1
    assert free()
