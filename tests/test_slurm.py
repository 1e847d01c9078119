"""The workflow on a real Slurm: a single-node cluster on this host runs every cell of a
tiny grid as its own Slurm job through ``--profile profiles/slurm``.

Needs Debian's ``slurm-wlm`` and ``munge`` (skipped with the reason where they are missing:
the tests install no system package; ``.ci/run`` installs them on CI's machine). Set-up writes
``/etc/slurm/slurm.conf`` and ``gres.conf`` (the slurm executor plugin's job step drops
``SLURM_CONF``, so the default path must hold ours; files already there are backed up and
put back), starts ``munged`` (as user munge, on its own socket), ``slurmctld`` and
``slurmd -N localhost`` with their state in a temporary folder, and stops them by their pid
files at the end, pass or fail. One GPU is declared for scheduling only (``File=/dev/null``),
so GPU cells are scheduled with their GPU request and then end ``unavailable`` on a host
without CUDA. Needs root; skipped elsewhere.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, snakemake

pytestmark = pytest.mark.slurm

SLURM_ETC = Path("/etc/slurm")
MUNGE_KEY = Path("/etc/munge/munge.key")
SBIN_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin"]
)
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel")
HOST_LOCK = Path(tempfile.gettempdir()) / "numbench-slurm-test.lock"

# numpy on the CPU (the baseline) and torch on the GPU: one operation, a user's own (the
# example of examples/stencil, from a folder outside the workflow whose path has a space), at
# one size, minimal timing. Each Slurm job waits for the plugin's status checks, which back
# off by 10 s while none ends: the jobs run in three waves (inputs and roofs, early rounds,
# cells), and a wave whose jobs (taking turns on the host's timing lock) do not all end by
# the second check waits 22 s more for the third. A second size or operation doubled every
# wave's work; a Slurm run of its own for the user's operation held the host for a minute.
# Each round and roof job measured once (max_cpu_taken: null): the local run goes on beside
# the Slurm run on purpose, so each finds the other busy, and with the default limit every
# round of both runs, and the Slurm run's roof job, was measured twice more (measuring again is
# test_replicates' and test_disturbed's to check).
CONFIG = """\
device: gpu
libraries: [numpy, torch]
operations:
  stencil:
    module: "{module}"
    sizes: [32]
    params: {{spacing: 0.5}}
timing:
  min_sample_time_s: 0.001
  min_samples: 3
  max_samples: 3
  budget_s: 0.02
replicates: {{min: 2, max: 2, max_cpu_taken: null}}
cell_timeout_s: 120
"""
CELL_KEY = ["library", "device", "dtype", "threads", "operation", "size"]
STENCIL = REPO / "examples" / "stencil"

# What the test's cluster lacks and the profile leaves to the site: an account and sacct.
SLURM_TEST_ARGS = (
    "--slurm-no-account",
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
)


def _which(name: str) -> str | None:
    return shutil.which(name, path=SBIN_PATH)


def _run(cmd: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _missing_programs() -> list[str]:
    """Slurm and munge programs this host lacks. The tests never install them (``.ci/run``
    does, on CI's own machine): a test suite must not change the system it runs on."""
    return [p for p in PROGRAMS if not _which(p)]


def _ensure_munge_key() -> None:
    if MUNGE_KEY.exists():
        return
    proc = _run([_which("mungekey") or "mungekey", "--create", f"--keyfile={MUNGE_KEY}"])
    if proc.returncode:
        pytest.fail(f"cannot create {MUNGE_KEY}: {proc.stderr}")
    shutil.chown(MUNGE_KEY, "munge", "munge")
    MUNGE_KEY.chmod(0o600)


def _running_daemons() -> list[str]:
    """Slurm or munge daemons already running here (not ours: ours are not started yet)."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            name = comm.read_text().strip()
            if name in ("slurmctld", "slurmd"):
                found.append(f"{name} (pid {comm.parent.name})")
    return found


def _real_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(int(line.split()[1]) / 1024 * 0.9)
    return 4000


def _slurm_conf(base: Path, socket_path: Path) -> str:
    return f"""\
# Written by numbench's tests/test_slurm.py for a throw-away single-node cluster.
ClusterName=numbench-test
SlurmctldHost={socket.gethostname().split(".")[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket_path}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=900
ReturnToService=2
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory={_real_memory_mb()} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def _wait_for(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def _stop_by_pid_files(*daemons: tuple[Path, str]) -> None:
    """SIGTERM each daemon named in its pid file (if it is still that daemon), all at once,
    and wait for them together (each takes a second or two to save its state and go);
    SIGKILL those left after 20 s."""
    pids = []
    for pid_file, name in daemons:
        try:
            pid = int(pid_file.read_text().split()[0])
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        if comm == name:
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if Path(f"/proc/{pid}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def slurm_cluster(tmp_path: Path):
    """A running single-node Slurm; yields its folder (logs, pid files). Stops it after."""
    missing = _missing_programs()
    if missing:
        pytest.skip(
            f"Slurm is not installed (missing {', '.join(missing)}): "
            "install Debian's slurm-wlm and munge to run this test"
        )
    if os.geteuid() != 0:
        pytest.skip("needs root: writes /etc/slurm and starts munged, slurmctld and slurmd")
    _ensure_munge_key()
    with open(HOST_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        others = _running_daemons()
        if others:
            pytest.fail(f"Slurm daemons already run on this host, not touching them: {others}")
        base = Path(tempfile.mkdtemp(prefix="numbench-slurm-"))
        base.chmod(0o755)
        munge_dir, backup = base / "munge", base / "etc-backup"
        for d in (munge_dir, base / "state", base / "spool", backup):
            d.mkdir()
        shutil.chown(munge_dir, "munge", "munge")
        munge_dir.chmod(0o755)  # munged wants its socket's folder open to all, writable by it
        socket_path = munge_dir / "munge.socket"
        SLURM_ETC.mkdir(parents=True, exist_ok=True)
        saved = []
        for name in ("slurm.conf", "gres.conf"):
            if (SLURM_ETC / name).exists():
                shutil.copy2(SLURM_ETC / name, backup / name)
                saved.append(name)
        try:
            (SLURM_ETC / "slurm.conf").write_text(_slurm_conf(base, socket_path))
            (SLURM_ETC / "gres.conf").write_text("Name=gpu File=/dev/null\n")
            munged = [
                _which("munged"),
                f"--socket={socket_path}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--log-file={munge_dir / 'munged.log'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
            ]
            for cmd in (
                ["runuser", "-u", "munge", "--", *munged],
                [_which("slurmctld")],
            ):
                proc = _run(cmd)
                assert proc.returncode == 0, f"{cmd[0]} did not start: {proc.stderr}"
            _wait_for(lambda: "UP" in _run(["scontrol", "ping"]).stdout, "slurmctld")
            proc = _run([_which("slurmd"), "-N", "localhost"])
            assert proc.returncode == 0, f"slurmd did not start: {proc.stderr}"
            _wait_for(
                lambda: _run(["sinfo", "-h", "-N", "-o", "%T"]).stdout.strip() == "idle",
                "the node to be idle",
            )
            yield base
        finally:
            with contextlib.suppress(Exception):
                ids = _run(["squeue", "-h", "-o", "%i"], timeout=10).stdout.split()
                if ids:
                    _run(["scancel", *ids], timeout=10)
                    _wait_for(
                        lambda: not _run(["squeue", "-h", "-o", "%i"], timeout=10).stdout.strip(),
                        "cancelled jobs to leave",
                        timeout=20,
                    )
            # both Slurm daemons at once, then munge, which they authenticate through
            _stop_by_pid_files(
                (base / "slurmd.pid", "slurmd"), (base / "slurmctld.pid", "slurmctld")
            )
            _stop_by_pid_files((munge_dir / "munged.pid", "munged"))
            for name in ("slurm.conf", "gres.conf"):
                (SLURM_ETC / name).unlink(missing_ok=True)
                if name in saved:
                    shutil.copy2(backup / name, SLURM_ETC / name)
            logs = tmp_path / "slurm-logs"
            logs.mkdir(exist_ok=True)
            for log in (*base.glob("*.log"), *munge_dir.glob("*.log")):
                shutil.copy2(log, logs / log.name)
            shutil.rmtree(base, ignore_errors=True)


def _jobs() -> dict[str, dict[str, str]]:
    """Every job the controller knows (finished ones too, for MinJobAge): id -> fields."""
    out = _run(["scontrol", "-o", "-d", "show", "job"]).stdout
    jobs = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


def _cells(workdir: Path) -> pd.DataFrame:
    table = pd.read_parquet(workdir / "results" / "benchmarks.parquet")
    return table[[*CELL_KEY, "status"]].sort_values(CELL_KEY).reset_index(drop=True)


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def test_workflow_runs_every_cell_as_a_slurm_job(slurm_cluster: Path, workdir: Path, tmp_path):
    from numbench.operations.loading import operation_code

    folder = tmp_path / "my operations" / "stencil op"
    shutil.copytree(STENCIL, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (workdir / "slurm-test.yaml").write_text(CONFIG.format(module=folder / "stencil.py"))
    local = tmp_path / "local"
    shutil.copytree(workdir, local)

    # Jobs run the `python` first on PATH: this interpreter's environment, as make puts it.
    path = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", ""), SBIN_PATH]
    )
    env = {"PATH": path}
    # The Slurm run up to the summary: the analysis rules are local rules (the jobs below
    # show none went to Slurm); the charts, local too, are no part of what this checks. The
    # local run up to the cells' table, which is what the two runs compare.
    target = "results/summary.md"
    # The local run of the same grid goes on beside the Slurm run, which mostly waits. It
    # measures no roofs (no cell reads them, and its own roofs job took a CPU from the Slurm
    # run's, whose end the GPU cells wait for: one check of the plugin too late cost 22 s).
    (local / "no-roofs.yaml").write_text("roofs: false\n")
    local_args = ("--cores", "1", "--configfile", "slurm-test.yaml", "no-roofs.yaml")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        local_run = pool.submit(
            snakemake, local, "results/benchmarks.parquet", *local_args, timeout=600
        )
        proc = snakemake(
            workdir,
            target,
            "--profile",
            "profiles/slurm",
            "--configfile",
            "slurm-test.yaml",
            *SLURM_TEST_ARGS,
            timeout=900,
            env=env,
        )
        local_proc = local_run.result()
    ctld_log = slurm_cluster / "slurmctld.log"
    assert proc.returncode == 0, (
        f"Slurm run failed:\n{_tail(proc.stderr)}\nslurmctld.log:\n{_tail(ctld_log.read_text())}"
    )
    assert local_proc.returncode == 0, f"local run failed:\n{_tail(local_proc.stderr)}"

    # Same cells, same statuses as the local run.
    on_slurm, here = _cells(workdir), _cells(local)
    pd.testing.assert_frame_equal(on_slurm, here)
    assert len(on_slurm) == 2
    assert set(on_slurm.loc[on_slurm.library == "numpy", "status"]) == {"ok"}
    gpu = on_slurm[on_slurm.device == "gpu"]
    assert len(gpu) == 1 and set(gpu.status) <= {"ok", "unavailable"}
    # the jobs ran the user's file, from its folder outside the workflow
    bench = pd.read_parquet(workdir / "results" / "benchmarks.parquet")
    assert set(bench["operation_hash"]) == {operation_code(folder / "stencil.py").sha256}

    # Every cell (and input) was a Slurm job, as the plugin reported and the controller knows.
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", proc.stderr)
    jobs = _jobs()
    by_comment = {job.get("Comment"): job for job in jobs.values()}
    assert sorted(submitted) == sorted(jobs), "jobs the controller knows != jobs submitted"
    # cells, their early rounds, inputs, and the roofs (measured on a node, like the cells)
    assert len(jobs) == 2 + 2 + 1 + 1, sorted(by_comment)
    cell_jobs = []
    for cell in on_slurm.itertuples():
        wildcards = (cell.library, cell.device, cell.dtype, cell.threads, cell.operation, cell.size)
        for rule, tail in (("cell", ()), ("early_round", (0,))):
            comment = f"rule_{rule}_wildcards_" + "_".join(map(str, wildcards + tail))
            assert comment in by_comment, f"no Slurm job for {rule} {comment}"
            job = by_comment[comment]
            assert job["JobState"] == "COMPLETED", job
            cell_jobs.append(job)
            # GPU cells asked Slurm for a GPU (sbatch --gpus=1); CPU cells did not.
            if cell.device == "gpu":
                assert re.search(r"gpu[:=]1", job.get("TresPerJob", "")), job
            else:
                assert "gpu" not in job.get("TresPerJob", ""), job
    # ... and so were the user's operation's inputs and the roofs: no other job, each done
    inputs_and_roofs = {"rule_inputs_wildcards_stencil_32", "rule_roofs"}
    assert set(by_comment) == {job["Comment"] for job in cell_jobs} | inputs_and_roofs
    assert {job["JobState"] for job in jobs.values()} == {"COMPLETED"}, jobs
    assert not any(c and c.startswith(("rule_aggregate", "rule_summary")) for c in by_comment)
    assert (workdir / "results" / "summary.md").exists()
    ctld_text = ctld_log.read_text()
    for job in cell_jobs:
        assert f"_job_complete: JobId={job['JobId']} WEXITSTATUS 0" in ctld_text, job["JobId"]

    # timing_slots=1 did not serialise the submissions: some cell jobs were queued together.
    def overlap(a, b):
        return a["SubmitTime"] < b["EndTime"] and b["SubmitTime"] < a["EndTime"]

    assert any(overlap(a, b) for i, a in enumerate(cell_jobs) for b in cell_jobs[i + 1 :]), [
        (j["JobId"], j["SubmitTime"], j["EndTime"]) for j in cell_jobs
    ]
