"""Does `numbench history changes` find a real, planted slowdown, and nothing else? (a
benchmark, not a test)

Runs a small grid of NumPy cells (20 cells by default, measured alone: no pairing) RUNS
times in a temporary copy of the workflow, each run from scratch (``--forceall``), and adds
each run to a history store there. From run FROM on, one cell is measured again after the
run with the test-only slowdown (``tests/adapters/slowed.py``: every call stretched to
FACTOR times its own duration) and the tables downstream of it remade, before the run is
added. Then it prints `history list` and `history changes` on that store: the planted cell
should step at run FROM, and no other cell anywhere.

    .venv/bin/python benchmarks/history_planted.py [--runs 8] [--from 5] [--factor 1.2]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import ROOT, SLOWED, machine  # also puts src/ on the path

from numbench.cells import Cell

#: the grid: NumPy alone, each cell measured alone, two processes a cell, no roofs
CONFIG = """\
libraries: [numpy]
roofs: false
operations:
  elementwise: {sizes: [1000, 10000, 100000, 1000000]}
  poly: {sizes: [1000, 10000, 100000, 1000000]}
  sort: {sizes: [1000, 10000, 100000, 1000000]}
  fft: {sizes: [1000, 10000, 100000, 1000000]}
  matmul: {sizes: [50, 100, 200, 400]}
timing: {min_sample_time_s: 0.01, min_samples: 3, max_samples: 10, budget_s: 0.05}
replicates: {min: 2, max: 2, early_rounds: 0, paired: false, max_cpu_taken: null}
cell_timeout_s: 120
history: {add: false}
"""
#: the cell slowed from run FROM on
PLANTED = Cell("numpy", "cpu", "poly", 100000)
COPIED = ("Snakefile", "config", "workflow", "scripts", "src", "profiles", "envs")


def workflow_copy(folder: Path) -> Path:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, folder / name)
    (folder / "planted.yaml").write_text(CONFIG)
    return folder


def run(folder: Path, *args: str, env: dict | None = None) -> str:
    full = {**os.environ, "NUMBENCH_TIMING_LOCK": str(folder / ".timing.lock"), **(env or {})}
    full["PYTHONPATH"] = str(folder / "src")
    done = subprocess.run(
        [sys.executable, *args], cwd=folder, env=full, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def one_run(folder: Path, slowed: float | None) -> None:
    snakemake = ["-m", "snakemake", "--cores", "1", "--configfile", "planted.yaml"]
    run(folder, *snakemake, "--forceall")
    if slowed:
        env = {"NUMBENCH_ADAPTERS": str(SLOWED), "NUMBENCH_TEST_ADAPTERS": "1"}
        env["NUMBENCH_TEST_SLOWDOWN"] = str(slowed)
        run(folder, *snakemake, "--forcerun", PLANTED.path, env=env)
    run(folder, "-m", "numbench", "history", "add", "results")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--from", dest="start", type=int, default=5)
    parser.add_argument("--factor", type=float, default=1.2)
    parser.add_argument("--keep", help="work in this (new) folder and keep it")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="numbench-planted-"))
    folder.mkdir(parents=True, exist_ok=bool(not args.keep))
    workflow_copy(folder)
    start = time.perf_counter()
    for i in range(1, args.runs + 1):
        one_run(folder, args.factor if i >= args.start else None)
        print(f"run {i} of {args.runs} added ({time.perf_counter() - start:.0f} s)", flush=True)
    print(run(folder, "-m", "numbench", "history", "list"))
    print(f"planted: {PLANTED.path} {args.factor}x from run {args.start}\n")
    print(run(folder, "-m", "numbench", "history", "changes"))
    print(f"Machine: {machine()}")
    if not args.keep:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
