"""Does `--cores N` disturb the cells (a benchmark, not a test)? Issue 52, "Precision per
minute".

Runs one small grid (NumPy, Numba, PyTorch; matmul 250 and 1000, elementwise 1e5 and 1e6,
poly 1e5; float64, one thread: 15 cells) in a scratch copy of the workflow, once per
``--cores`` value given, one after the other, each from scratch. With ``--watch``, while each
run goes, the processes under Snakemake are listed every ``LOOK_S``: the most timing jobs
(``run_cell.py``, ``roofs.py``, ``make_inputs.py``) alive at once, the most of them at once
that had not yet taken the host's timing lock (waiting beside the one that measures), and the
programs Snakemake ran itself (its children that are no job's shell). Then, per run: its wall
time, the summary's headline (``results/summary.md``: how quiet the machine read, cells
unstable, verdicts in doubt), and the medians over the cells of ``other_cpu_share`` and
``workflow_cpu_share`` (each run's cell rows kept as ``benchmarks-coresN.parquet``).

    .venv/bin/python benchmarks/cores_beside.py [--cores 2 1] [--keep DIR] [--watch]
        [--source CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _report import PARTS, ROOT, machine, snakemake_env

from numbench.machine.system import children, descendants, read_argv

CONFIG = {
    "libraries": ["numpy", "numba", "torch"],
    "dtype": "float64",
    "threads": 1,
    "seed": 11,
    "operations": {
        "matmul": {"sizes": [250, 1000]},
        "elementwise": {"sizes": [100000, 1000000]},
        "poly": {"sizes": [100000]},
    },
    "history": {"add": False},
}
#: seconds between two listings of the processes under Snakemake
LOOK_S = 0.2
#: what a timing job's Python runs
TIMING_SCRIPTS = ("run_cell.py", "roofs.py", "make_inputs.py")


def copy_workflow(dst: Path, source: Path) -> None:
    """The workflow's parts (``_report.PARTS``) copied from ``source`` into ``dst``."""
    dst.mkdir(parents=True)
    for name in PARTS:
        if (source / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source / name, dst / name, ignore=ignore)
        else:
            shutil.copy2(source / name, dst / name)


def timing_jobs(top: int) -> list[int]:
    """The Python processes under ``top`` that run a timing job's script."""
    found = []
    for pid in descendants(top):
        argv = read_argv(pid)
        if argv and os.path.basename(argv[0]).startswith("python"):
            if any(os.path.basename(a) in TIMING_SCRIPTS for a in argv[1:3]):
                found.append(pid)
    return found


def holds_lock(pid: int, lock: Path) -> bool | None:
    """Whether ``pid`` holds a flock on ``lock`` (``/proc/locks`` by the file's inode)."""
    try:
        inode = lock.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[4] == str(pid):
            if parts[5].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


def helpers(top: int) -> set[str]:
    """The programs Snakemake runs itself (its children that are no job's shell)."""
    names = set()
    for pid in children(top):
        argv = read_argv(pid)
        if argv and os.path.basename(argv[0]) not in ("bash", "sh"):
            names.add(os.path.basename(argv[0]))
    return names


def watch(top: int, lock: Path, seen: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        seen["helpers"] = sorted(set(seen["helpers"]) | helpers(top))
        jobs = timing_jobs(top)
        waiting = [pid for pid in jobs if holds_lock(pid, lock) is False]
        seen["most_jobs"] = max(seen["most_jobs"], len(jobs))
        seen["most_waiting"] = max(seen["most_waiting"], len(waiting))
        seen["looks_with_waiting"] += bool(waiting)
        seen["looks"] += 1
        stop.wait(LOOK_S)


def headline(wd: Path) -> str:
    for line in (wd / "results" / "summary.md").read_text().splitlines():
        if line.startswith("**") and "machine**" in line.split(":")[0]:
            return line
    return "(no headline)"


def shares(wd: Path) -> dict:
    import pyarrow.parquet as pq

    rows = pq.read_table(wd / "results" / "benchmarks.parquet").to_pylist()

    def median(name):
        values = [r[name] for r in rows if r.get(name) is not None]
        return statistics.median(values) if values else None

    return {
        "cells": len(rows),
        "other_cpu_share": median("other_cpu_share"),
        "workflow_cpu_share": median("workflow_cpu_share"),
    }


def one_run(wd: Path, cores: int, look: bool) -> dict:
    env = {**snakemake_env(wd), "PYTHONPATH": str(wd / "src")}  # the copy's code, not ours
    lock = Path(env["NUMBENCH_TIMING_LOCK"])
    lock.touch()
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores)]
    cmd += ["--configfile", "grid.yaml", "--forceall"]
    seen = {"most_jobs": 0, "most_waiting": 0, "looks_with_waiting": 0, "looks": 0, "helpers": []}
    t0 = time.perf_counter()
    with open(wd / f"snakemake-cores{cores}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=wd, env=env, stdout=log, stderr=subprocess.STDOUT)
        stop = threading.Event()
        looker = threading.Thread(target=watch, args=(proc.pid, lock, seen, stop))
        if look:
            looker.start()
        proc.wait()
        stop.set()
        if look:
            looker.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"--cores {cores} failed: see {wd / f'snakemake-cores{cores}.log'}")
    kept = wd / f"benchmarks-cores{cores}.parquet"  # the next run remakes results/
    shutil.copy2(wd / "results" / "benchmarks.parquet", kept)
    return {
        "cores": cores,
        "wall_s": round(wall, 1),
        **seen,
        **shares(wd),
        "headline": headline(wd),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--keep", help="work in this (new) folder and keep it")
    parser.add_argument(
        "--watch",
        action="store_true",
        help=f"list the processes under Snakemake every {LOOK_S} s (a process of its own "
        "beside the cells, which counts among their other programs)",
    )
    parser.add_argument("--source", help="copy the workflow from this checkout instead")
    args = parser.parse_args()
    wd = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="numbench-cores-")) / "wf"
    copy_workflow(wd, Path(args.source) if args.source else ROOT)
    (wd / "grid.yaml").write_text(json.dumps(CONFIG))
    print(f"machine: {machine()}; load before: {os.getloadavg()[0]:.2f}", flush=True)
    for cores in args.cores:
        print(json.dumps(one_run(wd, cores, args.watch)), flush=True)
        print(f"load after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
