"""What the workflow itself costs (a benchmark, not a test).

Runs the grid (default: the default CPU grid) in a scratch copy of the workflow with
``--cores 1`` and then ``--cores 2``, and prints: wall time; the summed in-cell time (import,
first call, calibration and samples); the fixed cost per cell (process starts, supervisor,
input loading, Snakemake's scheduling); a no-op rerun of the finished grid; a single-cell
rerun; and, per cell, the ratio of the medians measured with --cores 2 and --cores 1 (timing
cells never overlap, so they should agree).

    .venv/bin/python benchmarks/workflow_cost.py [--markdown] [--configfile FILE] [--cores 1 2]
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

from _report import ROOT, publish

from numbench.cells import FIELDS, Cell

PARTS = ("Snakefile", "config", "workflow", "scripts", "src", "profiles", "envs")


def copy_workflow(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in PARTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst / name)
    return dst


def snakemake_env(wd: Path) -> dict[str, str]:
    """The environment of a Snakemake run in the scratch copy ``wd``: this Python's tools
    first on PATH, and a timing lock of the copy's own."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["NUMBENCH_TIMING_LOCK"] = str(wd / ".timing.lock")
    return env


def snakemake(wd: Path, *args: str) -> float:
    env = snakemake_env(wd)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=wd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return wall


def in_cell_seconds(bench) -> tuple[float, float]:
    """Summed in-cell time (import + first call + sampling, both modes) and summed worker
    wall time."""
    parts = bench["import_s"].fillna(0) + bench["first_call_s"].fillna(0)
    for name in ("sampling_s", "pipelined_sampling_s"):
        if name in bench:
            parts = parts + bench[name].fillna(0)
    return float(parts.sum()), float(bench["wall_s"].fillna(0).sum())


def main() -> None:
    import pandas as pd

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", help="a smaller grid (default: config/config.yaml)")
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the figures as a Markdown section with command, date and machine",
    )
    parser.add_argument("--keep", help="copy the first run's results/ and logs/ into this folder")
    args = parser.parse_args()
    extra = ["--configfile", str(Path(args.configfile).resolve())] if args.configfile else []

    rows, medians = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for cores in args.cores:
            wd = copy_workflow(Path(tmp) / f"cores{cores}")
            wall = snakemake(wd, "--cores", str(cores), *extra)
            bench = pd.read_parquet(wd / "results" / "benchmarks.parquet")
            n = len(bench)
            in_cell, worker = in_cell_seconds(bench)
            noop = snakemake(wd, "--cores", str(cores), *extra)
            target = bench[bench["status"] == "ok"].iloc[0]
            cell = Cell.from_fields(target).path
            (wd / cell).unlink()
            single = snakemake(wd, cell, "--cores", str(cores), *extra)
            key = list(FIELDS)
            medians[cores] = bench.set_index(key)["median_s"]
            rows.append((cores, n, wall, in_cell, worker, noop, single, cell))
            if args.keep and len(rows) == 1:
                for part in ("results", "logs"):
                    shutil.copytree(wd / part, Path(args.keep) / part, dirs_exist_ok=True)
            print(
                f"--cores {cores}: {n} cells, wall {wall:.1f} s, in-cell {in_cell:.1f} s "
                f"(ratio {wall / in_cell:.2f}), worker processes {worker:.1f} s, "
                f"fixed cost per cell {(wall - in_cell) / n:.2f} s, no-op rerun {noop:.2f} s, "
                f"single-cell rerun {single:.2f} s",
                flush=True,
            )

    lines = [
        "| --cores | cells | wall | summed in-cell time | wall / in-cell | summed worker wall | fixed cost per cell | no-op rerun | single-cell rerun |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cores, n, wall, in_cell, worker, noop, single, _ in rows:
        lines.append(
            f"| {cores} | {n} | {wall:.0f} s ({wall / 60:.1f} min) | {in_cell:.0f} s | "
            f"{wall / in_cell:.2f} | {worker:.0f} s | {(wall - in_cell) / n:.2f} s | {noop:.2f} s | {single:.2f} s |"
        )
    body = "## Workflow cost\n\n" + "\n".join(lines) + "\n"
    if len(medians) == 2:
        a, b = (medians[c] for c in sorted(medians))
        both = pd.concat([a, b], axis=1, keys=["one", "two"]).dropna()
        ratio = both["two"] / both["one"]
        long = ratio[both["one"] > 10e-6]
        inside = ((long > 0.95) & (long < 1.05)).sum()
        body += (
            f"\n## --cores 2 against --cores 1\n\nPer-cell ratio of medians (--cores {max(medians)} / "
            f"--cores {min(medians)}), {len(ratio)} ok cells: median {ratio.median():.3f}, "
            f"5th to 95th percentile {ratio.quantile(0.05):.3f} to {ratio.quantile(0.95):.3f}; "
            f"cells longer than 10 µs within 0.95 to 1.05: {inside} of {len(long)}.\n"
        )
        worst = (ratio - 1).abs().sort_values(ascending=False).head(8)
        body += "\nLargest deviations:\n\n| cell | ratio |\n|---|---:|\n"
        for key in worst.index:
            body += f"| {'/'.join(map(str, key))} | {ratio[key]:.3f} |\n"
    publish("workflow_cost.py", body, args.markdown, args.configfile)


if __name__ == "__main__":
    main()
