"""What Snakemake's own main process costs while cells are measured (a benchmark, not a test).

Runs a grid (default: the tiny grid of the end-to-end tests) in scratch copies of the
workflow with ``--cores 1``, once with numbench's fix for Snakemake's multiplying scheduler
timers (``numbench.snakemake_timers``) and once without it
(``NUMBENCH_KEEP_SNAKEMAKE_TIMERS=1``), in the order given by ``--order``. While each runs it
reads the main Snakemake process's own CPU time (``/proc/PID/stat``: user + system, without
its children, the workers) and thread count every half second, and prints, per run: wall
time, jobs, the main process's CPU seconds and its share of the wall time (over the whole
run and over its last quarter), its most threads, and, from the cells' files, the rounds set
aside because other programs took a worker's CPU and the median ``cpu_taken``.

    .venv/bin/python benchmarks/scheduler_cpu.py [--configfile FILE] [--order fix own] [--keep DIR] [--write]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _report import ROOT, publish
from workflow_cost import copy_workflow, snakemake_env

TICK = os.sysconf("SC_CLK_TCK")
VARIANTS = {"fix": {}, "own": {"NUMBENCH_KEEP_SNAKEMAKE_TIMERS": "1"}}


def own_cpu_and_threads(pid: int) -> tuple[float, int] | None:
    """The process's own CPU seconds (user + system, children excluded) and its threads."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)
    threads = next(
        int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:")
    )
    return cpu, threads


def run(wd: Path, extra_env: dict[str, str], args: list[str]) -> dict:
    env = snakemake_env(wd)
    env.pop("NUMBENCH_KEEP_SNAKEMAKE_TIMERS", None)
    env.update(extra_env)
    samples: list[tuple[float, float, int]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", *args],
        cwd=wd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def poll() -> None:
        while proc.poll() is None:
            got = own_cpu_and_threads(proc.pid)
            if got:
                samples.append((time.perf_counter() - t0, *got))
            time.sleep(0.5)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    poller.join()
    if proc.returncode != 0:
        sys.exit(f"snakemake failed in {wd}:\n{stderr[-4000:]}")
    jobs = stderr.count("Finished jobid")
    cpu = samples[-1][1] if samples else float("nan")
    quarter = [s for s in samples if s[0] >= 0.75 * wall]
    late = (
        (quarter[-1][1] - quarter[0][1]) / (quarter[-1][0] - quarter[0][0])
        if len(quarter) > 1
        else float("nan")
    )
    return {
        "wall": wall,
        "jobs": jobs,
        "cpu": cpu,
        "share": cpu / wall,
        "late_share": late,
        "threads": max((s[2] for s in samples), default=0),
    }


def cell_figures(results: Path) -> tuple[int, float]:
    import pandas as pd

    bench = pd.read_parquet(results / "benchmarks.parquet")
    set_aside = int(bench["set_aside"].fillna(0).sum()) if "set_aside" in bench else 0
    taken = float(bench["cpu_taken"].median()) if "cpu_taken" in bench else float("nan")
    return set_aside, taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", default=str(ROOT / "tests" / "tiny.yaml"))
    parser.add_argument("--order", nargs="+", choices=sorted(VARIANTS), default=["fix", "own"])
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    parser.add_argument("--keep", help="copy each run's results/ into this folder")
    args = parser.parse_args()
    extra = ["--configfile", str(Path(args.configfile).resolve())]

    lines = [
        "| run | wall | jobs | Snakemake's CPU | share of wall | share, last quarter | most threads | rounds set aside | median cpu_taken |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(args.order):
            wd = copy_workflow(Path(tmp) / f"{i}-{name}")
            r = run(wd, VARIANTS[name], extra)
            set_aside, taken = cell_figures(wd / "results")
            if args.keep:
                shutil.copytree(wd / "results", Path(args.keep) / f"{i}-{name}")
            label = (
                "one pending timer (numbench's fix)" if name == "fix" else "Snakemake's own timers"
            )
            line = (
                f"| {label} | {r['wall']:.0f} s | {r['jobs']} | {r['cpu']:.1f} s | {r['share']:.0%} "
                f"| {r['late_share']:.0%} | {r['threads']} | {set_aside} | {taken:.3f} |"
            )
            lines.append(line)
            print(line, flush=True)
    body = "## Snakemake's own CPU while cells are measured\n\n" + "\n".join(lines)
    configfile = (
        None
        if Path(args.configfile).resolve() == (ROOT / "tests" / "tiny.yaml")
        else args.configfile
    )
    publish("scheduler-cpu", "scheduler_cpu.py", body, args.write, configfile)


if __name__ == "__main__":
    main()
