"""The real-time figures behind the tests that run on constructed clocks (a benchmark, not a
test): what the unit tests check on constructed readings, measured on this machine.

The tests (test_cpu_taken, test_lockstep, test_pipelined, test_environments, test_host_lock)
assert the logic on constructed clocks, because a threshold on a real time or share fails
on a busy machine. This script prints the real figures beside the value a quiet machine
gives, for a person to read:

- the CPU share another busy program takes on the worker's one CPU (about 0.5), the share
  the process's own two threads read as (about 0), and a paused stretch in which another
  program had the CPU (about 0 paused, about 0.5 unpaused);
- the CPU share each worker of a real lockstep pair reads while its partner takes turns
  (about 0: the waits are not counted);
- a thread pool's calls waited for against queued, 2 ms of dispatch and 2 ms of work
  (a ratio of about 2);
- the test-only slowdown's factor on a real call (1.5 asked);
- how long a cell waiting for a held timing lock takes to give up (1 s asked).

    .venv/bin/python benchmarks/timing_checks.py [--markdown]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from _report import ROOT, publish


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def hog_on(cpu: int) -> int:
    """The pid of a busy program on ``cpu``, not this process's descendant (``cpu_taken``
    counts a child's CPU time as the process's own): started by a child that ends at once."""
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile 1: pass"
    starter = (
        "import subprocess, sys\n"
        "print(subprocess.Popen([sys.executable, '-c', sys.argv[1]],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    started = subprocess.run(
        [sys.executable, "-c", starter, code], capture_output=True, text=True, check=True
    )
    return int(started.stdout)


def stop(pid: int) -> None:
    """Kill a program ``hog_on`` started and wait, up to a second, until it no longer runs
    (it is not this process's child to wait for)."""
    os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.01)


def cpu_taken_shares() -> list[tuple[str, float | None, str]]:
    from numbench.measure.cpu_taken import CpuTaken

    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    rows = []
    try:
        hog = hog_on(cpu)
        try:
            time.sleep(0.3)
            taken = CpuTaken()
            spin(0.5)
            rows.append(("another busy program on the same CPU", taken.share(), "about 0.5"))
        finally:
            stop(hog)

        taken = CpuTaken()
        helper = threading.Thread(target=spin, args=(0.5,))
        helper.start()
        spin(0.5)
        helper.join()
        rows.append(("the process's own two threads on its CPU", taken.share(), "about 0"))

        for paused in (True, False):
            hog = hog_on(cpu)
            time.sleep(0.3)
            taken = CpuTaken()
            if paused:
                taken.pause()
            time.sleep(0.5)  # the other program has the CPU
            stop(hog)
            if paused:
                taken.resume()
            spin(0.5)
            label = "paused" if paused else "not paused"
            rows.append(
                (
                    f"a stretch another program had, {label}",
                    taken.share(),
                    "about 0" if paused else "about 0.5",
                )
            )
    finally:
        os.sched_setaffinity(0, before)
    return rows


def lockstep_shares(folder: Path) -> list[tuple[str, float | None, str]]:
    from numbench import operations
    from numbench.measure import inputs
    from numbench.measure.lockstep import run_lockstep
    from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
    from numbench.timing import TimingSettings

    path = folder / "inputs" / "elementwise" / "1000.npz"
    inputs.write("elementwise", 1000, 1, path)
    spec = CellSpec(
        library="numpy",
        device="cpu",
        operation="elementwise",
        operation_file=None,
        operation_hash=operations.load("elementwise", None).sha256,
        size=1000,
        dtype="float64",
        threads=1,
        inputs=str(path),
        params={},
        # samples of 0.3 s a side: counted, the partner's turns would read as about a third
        timing=TimingSettings(min_sample_time_s=0.02, min_samples=3, max_samples=50, budget_s=0.3),
        timeout_s=120.0,
        memory_limit_mb=None,
        allocator="steady",
        replicates=ReplicateSettings(
            min=1, max=1, target_ci=1.0, stop_margin=1.1, early_rounds=0, round_sd=0.03,
            max_cpu_taken=None, lockstep=False, max_cell_s=None,
        ),
        paired_with=None,
        contract=CELL_CONTRACT,
    )  # fmt: skip
    rows = []
    for side, (_, report) in zip(("first", "second"), run_lockstep([spec, spec], seed=1)):
        what = f"a lockstep pair's {side} worker ({report.status}, {len(report.samples_s)} samples)"
        rows.append((what, report.cpu_taken, "about 0; about 0.33 if waits counted"))
    return rows


def thread_pool_ratio() -> float:
    import numpy as np

    from numbench.timing import Timer, TimingSettings

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def call():
        time.sleep(0.002)
        return pool.submit(time.sleep, 0.002)

    def sync(result):
        for f in result if isinstance(result, list) else [result]:
            if f is not None:
                f.result()

    settings = TimingSettings(min_sample_time_s=0.03, min_samples=5, max_samples=7, budget_s=0.2)
    try:
        timer = Timer(call, (), sync)
        latency = timer.measure(settings)
        pipelined = timer.measure_pipelined(settings, loops_from=latency.loops)
    finally:
        pool.shutdown()
    return float(np.median(latency.samples_s) / np.median(pipelined.samples_s))


def slowdown_factor() -> float:
    sys.path.insert(0, str(ROOT / "tests"))
    from adapters import slowed  # the tests' slowdown

    def call():
        spin(0.02)

    plain = []
    for _ in range(5):
        t0 = time.perf_counter()
        call()
        plain.append(time.perf_counter() - t0)
    fn = slowed.stretched(call, None, 1.5)
    slow = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        slow.append(time.perf_counter() - t0)
    return sorted(slow)[2] / sorted(plain)[2]


def lock_give_up_s(folder: Path) -> float:
    from numbench.measure.host_lock import LockError, timing_lock

    path, ready = folder / "lock", folder / "ready"
    code = textwrap.dedent(
        f"""
        import sys, time, pathlib
        sys.path.insert(0, {str(ROOT / "src")!r})
        from numbench.measure.host_lock import timing_lock
        with timing_lock({str(path)!r}, holder="timing_checks"):
            pathlib.Path({str(ready)!r}).write_text("held")
            time.sleep(600)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code])
    try:
        while not ready.exists():
            time.sleep(0.05)
        t0 = time.monotonic()
        try:
            with timing_lock(path, timeout_s=1.0, say=lambda line: None):
                pass
        except LockError:
            pass
        return time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a section for the docs")
    args = parser.parse_args()
    os.environ.setdefault("NUMBENCH_TEST_ADAPTERS", "1")
    lines = ["| check | measured | a quiet machine |", "|---|---|---|"]

    def share(x):
        return "unknown" if x is None else f"{x:.2f}"

    with tempfile.TemporaryDirectory() as tmp:
        for what, value, quiet in cpu_taken_shares() + lockstep_shares(Path(tmp)):
            lines.append(f"| CPU taken: {what} | {share(value)} | {quiet} |")
        lines.append(f"| thread pool, waited for / queued | {thread_pool_ratio():.2f} | about 2 |")
        lines.append(f"| test-only slowdown of 1.5 | {slowdown_factor():.2f} | 1.50 |")
        lines.append(
            f"| giving up on a held lock after 1 s | {lock_give_up_s(Path(tmp)):.2f} s | 1.0 s |"
        )
    publish("timing_checks.py", "\n".join(lines), args.markdown, None)


if __name__ == "__main__":
    main()
