"""The share of a worker's CPUs that other programs took while it measured
(numbench.measure.cpu_taken)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from numbench.measure import cpu_taken
from numbench.measure.cpu_taken import CpuTaken

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat")


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.fixture
def one_cpu():
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    yield cpu
    os.sched_setaffinity(0, before)


@linux
def test_another_busy_program_on_the_same_cpu_is_seen(one_cpu):
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{one_cpu}}})\nwhile 1: pass"]
    )
    try:
        time.sleep(0.3)  # the hog is running
        taken = CpuTaken()
        spin(0.5)
        share = taken.share()
    finally:
        hog.kill()
        hog.wait()
    # two busy programs on one CPU: each gets about half of it
    assert share is not None and share > 0.25


@linux
def test_the_process_own_threads_are_not_another_program(one_cpu):
    # two of the process's own threads share its one CPU, one of them ending before the
    # share is read: their waiting for each other is the library's cost, not the machine's
    taken = CpuTaken()
    helper = threading.Thread(target=spin, args=(0.5,))
    helper.start()
    spin(0.5)
    helper.join()
    share = taken.share()
    assert share is not None and 0.0 <= share < 0.25


def test_unknown_where_the_os_does_not_tell(monkeypatch):
    monkeypatch.setattr(cpu_taken, "busy_s", lambda cpus: None)
    assert CpuTaken().share() is None


def test_busy_time_is_read_per_cpu(tmp_path, monkeypatch):
    # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
    stat = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 1 0 2 50 40 0 0 3 0 0\ncpu1 10 0 20 70 60 1 1 30 0 0\n"
    real_open = open

    def fake_open(path, *args, **kwargs):
        if path == "/proc/stat":
            path = tmp_path / "stat"
            path.write_text(stat)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    tick = os.sysconf("SC_CLK_TCK")
    assert cpu_taken.busy_s([0]) == pytest.approx(6 / tick)
    assert cpu_taken.busy_s([0, 1]) == pytest.approx(68 / tick)
