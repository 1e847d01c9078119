"""The host's timing lock: a per-user 0700 folder whose owner and mode are checked, a file
opened without following links, a note saying who holds it, a waiting cell that says so
every LOCK_REPORT_S and gives up after lock_timeout_s, and the config key that sets it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, make_spec

from numbench import inputs_file as inputs
from numbench.errors import MachineryFault
from numbench.measure import host_lock as cell_module
from numbench.measure.host_lock import LOCK_ENV, LockError, default_lock_path, timing_lock
from numbench.measure.supervisor import run_cell

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}
#: how long a test waits for a helper process to say it holds the lock
HOLDER_START_S = 30.0


@pytest.fixture
def own_root(tmp_path, monkeypatch) -> Path:
    """The lock's default root moved to a fresh folder, with no lock named in the
    environment (the default path is what is tested)."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(cell_module, "lock_root", lambda: root)
    monkeypatch.delenv(LOCK_ENV, raising=False)
    return root


@pytest.fixture
def holder(tmp_path):
    """Start a process that holds a lock file (``numbench.measure.host_lock.timing_lock``) as a cell
    would, until the test ends; return (its pid, the lock's path)."""
    procs = []

    def start(path: Path, label: str = "numpy/cpu sort 1000 float64 t1") -> int:
        ready = tmp_path / f"ready-{len(procs)}"
        code = textwrap.dedent(
            f"""
            import sys, time, pathlib
            sys.path.insert(0, {str(REPO / "src")!r})
            from numbench.measure.host_lock import timing_lock
            with timing_lock({str(path)!r}, holder={label!r}):
                pathlib.Path({str(ready)!r}).write_text("held")
                time.sleep(600)
            """
        )
        proc = subprocess.Popen([sys.executable, "-c", code])
        procs.append(proc)
        deadline = time.monotonic() + HOLDER_START_S
        while not ready.exists():
            assert proc.poll() is None, "the holder ended before taking the lock"
            assert time.monotonic() < deadline, "the holder did not take the lock"
            time.sleep(0.05)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_the_default_lock_is_a_0600_file_in_a_0700_folder_of_the_user(own_root):
    path = default_lock_path()
    assert path == own_root / f"numbench-{os.getuid()}" / "timing.lock"
    with timing_lock():
        folder = os.stat(path.parent)
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert default_lock_path(own_root) == path  # the same path for every run and job


def test_the_default_path_is_the_same_whatever_the_job_s_temporary_folder(monkeypatch, tmp_path):
    """Cells of several Slurm jobs on one node must queue on one lock: a per-job TMPDIR or
    XDG_RUNTIME_DIR must not move it."""
    monkeypatch.delenv(LOCK_ENV, raising=False)
    first = default_lock_path()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_lock_path() == first


def test_a_folder_others_may_write_in_is_refused(own_root):
    folder = default_lock_path().parent
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    with pytest.raises(LockError) as err, timing_lock():
        pass
    assert str(folder) in str(err.value) and "lets others write in it" in str(err.value)
    assert LOCK_ENV in str(err.value)  # and the way out
    assert not default_lock_path().exists()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(own_root):
    folder = default_lock_path().parent
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    with pytest.raises(LockError, match=r"belongs to uid 65534, not to this user"):
        with timing_lock():
            pass


def test_a_folder_that_is_a_link_is_refused(own_root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    default_lock_path().parent.symlink_to(elsewhere)
    with pytest.raises(LockError, match="it is a link or not a folder"):
        with timing_lock():
            pass
    assert list(elsewhere.iterdir()) == []


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    link = tmp_path / "timing.lock"
    link.symlink_to(victim)
    with pytest.raises(LockError, match="it is a symbolic link"):
        with timing_lock(link):
            pass
    assert not victim.exists()  # a link planted at the lock's name creates nothing


def test_the_holder_s_note_says_who_holds_it_and_goes_with_it(tmp_path):
    path = tmp_path / "lock"
    before = time.time()
    with timing_lock(path, holder="torch/cpu matmul 64 float64 t1"):
        note = json.loads(path.read_text())
        assert note["pid"] == os.getpid() and note["cell"] == "torch/cpu matmul 64 float64 t1"
        assert before <= note["since_unix"] <= time.time() and note["cwd"] == os.getcwd()
    assert path.read_text() == ""  # released: no stale holder for the next waiter


class StepClock:
    """A constructed clock: each reading is ``step`` seconds after the last."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_waiting_cell_says_who_holds_the_lock_and_gives_up(tmp_path, holder, monkeypatch):
    # the real waits between reports are short; the seconds waited are read on a clock
    # that moves a quarter second a reading, so the cell gives up after 1 s of it
    monkeypatch.setattr(cell_module, "LOCK_REPORT_S", 0.05)
    path = tmp_path / "lock"
    proc = holder(path, "jax/cpu fft 4096 float32 t2")
    lines: list[str] = []
    clock = StepClock(0.25)
    with pytest.raises(LockError) as err:
        with timing_lock(path, timeout_s=1.0, say=lines.append, clock=clock):
            pass
    message = str(err.value)
    assert "gave up waiting" in message and "lock_timeout_s = 1" in message
    assert "after 1 s" in message
    assert f"pid {proc.pid}" in message and "jax/cpu fft 4096 float32 t2" in message
    assert lines[0].startswith(f"waiting for the host's timing lock {path}, held by pid")
    still = [line for line in lines[1:] if "still waiting" in line]
    assert still and len(still) == len(lines) - 1
    assert all(f"pid {proc.pid}" in line for line in still)
    assert proc.poll() is None  # the holder goes on


def test_a_waiting_cell_takes_the_lock_once_it_is_free(tmp_path, holder):
    path = tmp_path / "lock"
    proc = holder(path)
    threading.Timer(0.5, proc.kill).start()
    lines: list[str] = []
    with timing_lock(path, holder="me", timeout_s=30, say=lines.append):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert lines[-1].startswith("took the timing lock after")


def test_a_lock_file_removed_while_waiting_is_not_a_second_lock(tmp_path, monkeypatch):
    """A cleaner of /tmp removes the file a cell waits on: the cell that then gets the old
    file's lock would hold a lock nobody else can see. It queues on the new file instead."""
    path = tmp_path / "lock"
    real_take, calls = cell_module._take, []

    def take_after_removal(fd, lock, timeout_s, say, clock):
        calls.append(os.fstat(fd).st_ino)
        if len(calls) == 1:
            lock.unlink()
        real_take(fd, lock, timeout_s, say, clock)

    monkeypatch.setattr(cell_module, "_take", take_after_removal)
    with timing_lock(path, holder="me"):
        assert path.exists() and json.loads(path.read_text())["pid"] == os.getpid()
        assert os.stat(path).st_ino == calls[-1]
    assert len(calls) == 2


def test_a_cell_that_waits_past_lock_timeout_s_fails_without_a_cell_file(tmp_path, holder):
    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    spec = make_spec("numpy", "cpu", "sort", 1000, path, FAST)
    lock = tmp_path / "lock"
    proc = holder(lock)
    out = tmp_path / "cell.parquet"
    with pytest.raises(MachineryFault, match=f"gave up waiting.*pid {proc.pid}"):
        run_cell(spec, out, lock=str(lock), lock_timeout_s=0.5)
    assert not out.exists()


def test_the_config_s_lock_timeout_is_no_part_of_a_spec_and_0_is_refused(tmp_path):
    """``lock_timeout_s`` is no part of a cell's spec: changing it remeasures nothing."""
    from numbench.config import cell_spec, grid, load_file

    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    cfg = load_file(REPO / "config" / "config.yaml", schema)
    assert cfg["lock_timeout_s"] == 14400
    assert all("lock_timeout" not in cell_spec(cfg, c).to_json() for c in grid(cfg))
    (tmp_path / "mine.yaml").write_text("operations: {sort: {sizes: [10]}}\nlock_timeout_s: 0\n")
    with pytest.raises(Exception, match="lock_timeout_s"):
        load_file(tmp_path / "mine.yaml", schema)


@pytest.mark.e2e
def test_the_config_s_lock_timeout_reaches_each_timing_job(tmp_path):
    """``lock_timeout_s`` is passed to each timing job (a resource, not a param), as is the
    wait for quiet (numbench.measure.quiet): ``snakemake -n -p`` shows them."""
    from conftest import copy_workflow, snakemake

    wd = copy_workflow(tmp_path / "wf")
    (wd / "mine.yaml").write_text(
        "operations: {sort: {sizes: [10]}}\nlock_timeout_s: 90\n"
        "wait_for_quiet: {below: 0.05, max_wait_s: 30}\n"
    )
    proc = snakemake(wd, "-n", "-p", "--cores", "1", "--configfile", "mine.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = [line for line in proc.stdout.splitlines() if "run_cell.py" in line]
    assert jobs and all("--lock-timeout-s 90 " in line for line in jobs)
    assert all("--quiet-wait-s 30 --quiet-below 0.05 " in line for line in jobs)
