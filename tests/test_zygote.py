"""Workers forked from a zygote (``worker_start: fork``, ``numbench.measure.zygote``): they
measure as fresh ones do and say how they started; the zygote's import is paid once; a
library that leaves a thread running at import is refused and its workers start fresh; a
worker is killed when its supervisor goes; every child draws its own layout; the zygotes of
a folder end when told. NumPy only: its import is the cheapest. No time is asserted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, make_spec

from numbench.config import ConfigError, cell_spec, grid, resolve
from numbench.errors import MachineryFault
from numbench.measure import lockstep, process, zygote

pytestmark = pytest.mark.skipif(not zygote.supported(), reason="forking workers needs Linux")

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 5, "budget_s": 0.01}


@pytest.fixture
def here(zygote_folder):
    return zygote_folder


def spec(tmp_path: Path, how: str = "fork", **timing):
    return make_spec(
        "numpy", "cpu", "elementwise", 1000, tmp_path / "in.npz", {**TIMING, **timing}
    ).replace(worker_start=how)


def served(folder: Path) -> list[str]:
    """The zygotes listening for ``folder``."""
    return zygote.serving(str(Path(folder).resolve()))


def test_forked_workers_measure_and_pay_the_import_once(here):
    first = process.run_worker(spec(here))
    second = process.run_worker(spec(here))
    fresh = process.run_worker(spec(here, "exec"))
    for report in (first, second, fresh):
        assert report.status == "ok", report.error
        assert 3 <= len(report.samples_s) <= 5 and report.library_version
    assert (first.worker_start, second.worker_start, fresh.worker_start) == ("fork",) * 2 + (
        "exec",
    )
    # the zygote's import is in every forked worker's import_s, and paid by the first alone
    assert first.import_paid_s == pytest.approx(first.import_s)
    assert second.import_paid_s < first.import_paid_s
    shared = second.import_s - second.import_paid_s  # the zygote's import, in every one
    assert shared > 0 and first.import_paid_s >= shared
    assert fresh.import_paid_s == fresh.import_s
    assert len(served(here)) == 1


def test_lockstep_partners_are_forked_and_take_turns(here):
    own = spec(here)
    runs = lockstep.run_lockstep([own, own.replace(library="numpy")], seed=3)
    assert [r.worker_start for _, r in runs] == ["fork", "fork"]
    assert all(r.status == "ok" and len(r.samples_s) >= 3 for _, r in runs)


def test_the_forked_workers_cpu_time_counts_as_the_supervisors_own(here):
    from numbench.measure.activity import own_cpu_s

    process.run_worker(spec(here))  # the zygote started, its import relayed
    before_relayed, before_own = zygote.relayed_cpu_s(), own_cpu_s()
    report = process.run_worker(spec(here, budget_s=0.3, max_samples=1000))
    assert report.status == "ok" and report.worker_start == "fork"
    relayed = zygote.relayed_cpu_s() - before_relayed
    assert relayed > 0.05  # the samples alone ran 0.3 s; none of it is another program's
    assert own_cpu_s() - before_own >= relayed - 1e-6  # the sum rounds


THREADED = """
import threading, time
threading.Thread(target=time.sleep, args=(3600,), name="holder", daemon=True).start()
"""


def test_a_library_leaving_a_thread_at_import_is_refused_and_its_workers_start_fresh(here):
    (here / "threaded_lib.py").write_text(THREADED)
    env = {**os.environ, "PYTHONPATH": f"{here}{os.pathsep}{REPO / 'src'}"}
    name = zygote.socket_name("threaded_lib", sys.executable, env)
    why = zygote.launch("threaded_lib", sys.executable, env, name, timeout_s=60)
    # Python 3.11 names no OS thread: the thread's name in /proc is the process's
    assert why.startswith("its import leaves 1 thread(s) running (")
    cmd = [sys.executable, "-m", "numbench.measure.worker", "spec.json", "result.json"]
    worker, how = zygote.fork_worker("threaded_lib", cmd, env)
    assert worker is None and how == f"exec: {why}"
    log = zygote.log_path("threaded_lib", name).read_text()
    assert "refuses to fork" in log and "1 thread(s) running" in log


def test_a_worker_whose_supervisor_goes_is_killed_by_its_zygote(here):
    job = process.cell_job(spec(here, budget_s=60, max_samples=10**6))
    with contextlib.ExitStack() as stack:
        cmd, env, _ = process.prepare(job, process.scratch_folder(stack))
        worker, how = process.spawn(job, cmd, env)
        assert how == "fork" and isinstance(worker, zygote.ForkedWorker)
        os.kill(worker.pid, 0)  # it runs
        worker.conn.close()  # its supervisor is gone
        for _ in range(200):
            try:
                os.kill(worker.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"worker {worker.pid} outlived its supervisor")


def test_a_forked_worker_killed_past_its_limit_reads_as_killed(here):
    job = process.cell_job(spec(here, budget_s=60, max_samples=10**6))
    with contextlib.ExitStack() as stack:
        cmd, env, _ = process.prepare(job, process.scratch_folder(stack))
        worker, _ = process.spawn(job, cmd, env)
        assert worker.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            worker.wait(timeout=0.05)
        process.kill_group(worker)
        assert worker.returncode == -signal.SIGKILL


LAYOUT = """
import os, sys
sys.path.insert(0, {src!r})
import numpy as np
from numbench.measure.zygote import vary_layout
vary = sys.argv[1] == "vary"
addresses = []
for _ in range(6):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        keep = vary_layout() if vary else None
        a = np.empty(1000)
        os.write(w, str(a.ctypes.data).encode())
        os._exit(0)
    os.close(w)
    addresses.append(int(os.read(r, 64)))
    os.waitpid(pid, 0)
print(len(set(addresses)))
"""


@pytest.mark.parametrize("how, distinct", [("same", (1, 1)), ("vary", (4, 6))])
def test_each_forked_child_draws_its_own_layout(tmp_path, how, distinct):
    """Without ``vary_layout`` every child of one process puts its first array at the same
    address; with it, the six children put it at four to six addresses (a child's small
    blocks may fill the same free chunks as a sibling's: a repeat now and then is chance)."""
    script = tmp_path / "layout.py"
    script.write_text(textwrap.dedent(LAYOUT.format(src=str(REPO / "src"))))
    out = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert distinct[0] <= int(out.stdout) <= distinct[1]


def test_stop_all_ends_the_zygotes_of_its_folder_only(here):
    assert process.run_worker(spec(here)).worker_start == "fork"
    assert len(served(here)) == 1
    assert zygote.stop_all("/nowhere") == 0
    assert zygote.stop_all(str(here.resolve())) == 1
    for _ in range(200):
        if not served(here):
            break
        time.sleep(0.05)
    assert served(here) == []


def test_a_zygote_ends_by_itself_once_idle(here, monkeypatch):
    monkeypatch.setenv(zygote.IDLE_ENV, "0.5")
    assert process.run_worker(spec(here)).worker_start == "fork"
    for _ in range(200):
        if not served(here):
            break
        time.sleep(0.05)
    assert served(here) == []


def test_config_default_is_fork_and_reaches_every_spec():
    cfg = resolve({"operations": {"sort": {"sizes": [10]}}}, SCHEMA)
    assert cfg["worker_start"] == "fork"
    assert {cell_spec(cfg, c).worker_start for c in grid(cfg)} == {"fork"}
    cfg = resolve({"operations": {"sort": {"sizes": [10]}}, "worker_start": "exec"}, SCHEMA)
    assert {cell_spec(cfg, c).worker_start for c in grid(cfg)} == {"exec"}
    spec_json = json.loads(cell_spec(cfg, grid(cfg)[0]).to_json())
    assert spec_json["worker_start"] == "exec"


def test_an_unknown_worker_start_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="worker_start"):
        resolve({"operations": {"sort": {"sizes": [10]}}, "worker_start": "spawn"}, SCHEMA)


def test_what_differs_from_worker_to_worker_is_left_out_of_the_key():
    """The supervisor's pid, the lockstep pipes and the scratch folder differ for every
    worker: in the key, every job would start a zygote of its own."""
    from numbench.spec import SUPERVISOR_ENV

    assert {SUPERVISOR_ENV, lockstep.TURNS_ENV, "TMPDIR"} <= zygote.VOLATILE
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin"}
    one = zygote.socket_name("numpy", sys.executable, {**env, SUPERVISOR_ENV: "11", "TMPDIR": "/a"})
    two = zygote.socket_name("numpy", sys.executable, {**env, SUPERVISOR_ENV: "12", "TMPDIR": "/b"})
    assert one == two
    assert zygote.socket_name("numpy", sys.executable, {**env, "OMP_NUM_THREADS": "2"}) != one
    assert zygote.socket_name("torch", sys.executable, env) != one


def test_a_workers_zygote_key_changes_with_an_adapter_file_it_imports(tmp_path):
    """The zygote imports the adapter files NUMBENCH_ADAPTERS names: one edited during a
    run must reach the next worker through a zygote of its own."""
    from numbench.libraries import EXTRA_ADAPTERS_ENV

    adapters = tmp_path / "mine.py"
    adapters.write_text("ADAPTERS = ()\n")
    env = {EXTRA_ADAPTERS_ENV: str(adapters)}
    before = zygote.worker_code(env)
    assert zygote.worker_code(env) == before
    assert zygote.worker_code({}) != before
    adapters.write_text("ADAPTERS = ()  # edited\n")
    assert zygote.worker_code(env) != before


PRELOADED = """
import json, sys
from numbench.measure import zygote
refused, import_s = zygote.preload(sys.argv[1])
print(json.dumps([refused, "numbench.timing" in sys.modules, "numbench.libraries" in sys.modules]))
"""


@pytest.mark.parametrize(
    "library, imported",
    [("numpy", True), ("json", False)],  # json: a library whose import brings no NumPy
)
def test_a_workers_zygote_imports_numbench_s_modules_after_a_library_that_brings_numpy(
    library, imported
):
    """A worker finds numbench's modules imported (no worker pays for them), unless the
    library's import did not bring NumPy in: numbench's would, and a worker's import_s
    would miss NumPy's import."""
    # one BLAS thread, as in a worker's environment: a pool would be refused
    one = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env = {**os.environ, **one, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", PRELOADED, library], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [None, imported, imported]


def test_a_forked_workers_peak_memory_counts_the_zygotes_import(monkeypatch):
    """A forked worker's own peak counts only the pages it touched after the fork; its
    reported peak adds what the zygote held once imported, less what the worker held at
    the fork: 50 GB imported, 10 MB at the fork, so at least 49,990 MB."""
    from numbench.measure import worker

    monkeypatch.setattr(worker, "FORKED", worker.Forked(1.0, False, 50_000.0, 10.0))
    assert worker._peak_rss_mb() >= 49_990.0
    monkeypatch.setattr(worker, "FORKED", None)
    assert worker._peak_rss_mb() < 49_990.0  # this test process is far smaller


def test_a_started_workers_peak_memory_is_its_own_not_its_starters():
    """A process started by a larger one (here this test, holding 800 MB more) reports
    its own peak: the 800 MB it never held are not in it."""
    import numpy as np

    held = np.ones(100_000_000)  # 800 MB, touched
    code = "from numbench.measure import worker; print(worker._peak_rss_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert held[-1] == 1.0
    assert float(out.stdout.strip()) < 400.0  # an interpreter with NumPy: well under 800


def test_a_zygote_ends_with_the_run_it_serves(here):
    """Its run killed (the Snakemake above the jobs, here a process of the test's), the
    zygote and its workers go at once, not a minute later."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        env = process.job_environment(process.cell_job(spec(here)))
        cmd = [sys.executable, "-m", "numbench.measure.worker", "s.json", "r.json"]
        name = zygote.socket_name("numpy", sys.executable, env)
        assert zygote.launch("numpy", sys.executable, env, name, 60, watch=run.pid) is None
        assert zygote.socket_name("numpy", cmd[0], env) in " ".join(served(here))
    finally:
        run.kill()
        run.wait()
    for _ in range(100):
        if not served(here):
            break
        time.sleep(0.05)
    assert served(here) == []


def test_a_worker_whose_zygote_ends_fails_its_job_with_that_fault_and_not_another():
    # the zygote's end of the connection closes with no word of its worker's end, as when
    # the zygote dies while its worker runs
    ours, zygotes = socket.socketpair()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    worker = zygote.ForkedWorker(ours, pid_max + 1, ["python", "-m", zygote.WORKER_MODULE])
    zygotes.close()
    with pytest.raises(MachineryFault, match="the zygote of worker .* ended before it"):
        worker.wait(timeout=5)
    # the job's handler kills the worker's group and waits for it: it is gone with its zygote
    process.kill_group(worker)
    assert worker.poll() == -signal.SIGKILL and worker.wait(timeout=0) == -signal.SIGKILL
