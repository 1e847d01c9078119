"""What timing the pipelined mode costs, and what it shows (a benchmark, not a test).

Runs the grid (default: the default CPU grid) in a scratch copy of the workflow with
``--cores 1`` and prints:

- the run's wall time, and the time its workers spent on the pipelined loops
  (``pipelined_sampling_s``, summed over every process): the share of the run that the second
  mode added, measured inside the same run;
- with ``--before REV``: the same grid at an earlier commit (a scratch copy of ``git archive
  REV``), run in turn with the current code (``--rounds`` times each, alternating, the
  current code first), and the ratio of the wall times;
- latency and pipelined time per call of every asynchronous library at each operation's
  smallest size, and at ``elementwise`` 1e3 and ``matmul`` 100 when the grid has them.

    .venv/bin/python benchmarks/pipelined_cost.py [--write] [--configfile FILE]
        [--before REV] [--rounds N] [--results DIR --wall-s S]

``--results DIR --wall-s S`` reads a finished run instead of running one (its wall time given).
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pandas as pd
from _report import ROOT, publish
from workflow_cost import copy_workflow, snakemake

from numbench.formatting import format_seconds, format_size, md_table

NAMED_CELLS = (("elementwise", 1000), ("matmul", 100))


def run(wd: Path, extra: list[str]) -> float:
    t0 = time.perf_counter()
    snakemake(wd, "--cores", "1", *extra)
    return time.perf_counter() - t0


def copy_of(rev: str, dst: Path) -> Path:
    """The workflow as it was at ``rev`` (``git archive``), without results."""
    data = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    dst.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dst, filter="data")
    return dst


def cost_lines(bench: pd.DataFrame, wall: float) -> list[str]:
    pipelined = float(bench["pipelined_sampling_s"].fillna(0).sum())
    latency = float(bench["sampling_s"].fillna(0).sum())
    asynchronous = bench[bench["dispatch"] == "asynchronous"]
    return [
        f"- run: {len(bench)} cells in {wall / 60:.1f} min ({wall:.0f} s), `--cores 1`",
        f"- pipelined loops: {pipelined:.0f} s over {len(asynchronous)} asynchronous cells "
        f"({', '.join(sorted(asynchronous['library'].unique())) or 'none'}), "
        f"{100 * pipelined / wall:.1f}% of the run; per-call sampling: {latency:.0f} s",
        f"- so without the pipelined mode the run would take about {(wall - pipelined) / 60:.1f}"
        f" min: the mode adds {100 * pipelined / (wall - pipelined):.1f}%",
    ]


def figures_table(bench: pd.DataFrame) -> str:
    d = bench[(bench["status"] == "ok") & (bench["dispatch"] == "asynchronous")]
    keep = [
        (op, size)
        for op, size in NAMED_CELLS
        if ((d["operation"] == op) & (d["size"] == size)).any()
    ]
    for op, part in d.groupby("operation"):
        smallest = int(part["size"].min())
        if (op, smallest) not in keep:
            keep.append((op, smallest))
    rows = []
    for r in d.sort_values(["library", "operation", "size"]).itertuples():
        if (r.operation, int(r.size)) not in keep:
            continue
        rows.append(
            [
                f"{r.library} ({r.device}, {r.dtype}, {int(r.threads)}t)",
                r.operation,
                format_size(r.size),
                format_seconds(r.median_s),
                format_seconds(r.pipelined_median_s),
                f"{r.pipelined_speedup:.3g}× ({r.pipelined_speedup_ci_low:.3g} to "
                f"{r.pipelined_speedup_ci_high:.3g})",
            ]
        )
    header = ["cell", "operation", "n", "latency", "pipelined", "latency / pipelined (CI)"]
    return md_table(header, rows, align="lllrrr") if rows else "No asynchronous cell was ok."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", help="a smaller grid (default: config/config.yaml)")
    parser.add_argument("--before", help="also run the grid at this commit, alternating")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each side (--before)")
    parser.add_argument("--results", help="a finished run's results/ folder (no run)")
    parser.add_argument("--wall-s", type=float, help="that run's wall time in seconds")
    parser.add_argument("--keep", help="copy the (first current) run's results/ here")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    extra = ["--configfile", str(Path(args.configfile).resolve())] if args.configfile else []

    lines = ["## Pipelined mode: cost and figures", ""]
    with tempfile.TemporaryDirectory() as tmp:
        if args.results:
            if args.wall_s is None:
                parser.error("--results needs --wall-s (the run's wall time)")
            results, wall = Path(args.results), args.wall_s
        else:
            walls: dict[str, list[float]] = {"now": [], "before": []}
            results = None
            for i in range(args.rounds):
                wd = copy_workflow(Path(tmp) / f"now-{i}")
                walls["now"].append(run(wd, extra))
                print(f"current code, round {i + 1}: {walls['now'][-1]:.0f} s", flush=True)
                results = results or wd / "results"
                if args.before:
                    old = copy_of(args.before, Path(tmp) / f"before-{i}")
                    walls["before"].append(run(old, extra))
                    print(f"{args.before}, round {i + 1}: {walls['before'][-1]:.0f} s", flush=True)
            wall = walls["now"][0]
            if args.before:
                now, before = statistics.median(walls["now"]), statistics.median(walls["before"])
                lines += [
                    f"- alternating runs of the same grid, current code first: current "
                    f"{', '.join(f'{w:.0f}' for w in walls['now'])} s; {args.before} "
                    f"{', '.join(f'{w:.0f}' for w in walls['before'])} s; median ratio "
                    f"{now / before:.3f}",
                ]
        if args.keep and not args.results:
            shutil.copytree(results, Path(args.keep), dirs_exist_ok=True)
        bench = pd.read_parquet(results / "benchmarks.parquet")
        lines += cost_lines(bench, wall)
        lines += ["", figures_table(bench)]
    publish("pipelined", "pipelined_cost.py", "\n".join(lines), args.write, args.configfile)


if __name__ == "__main__":
    main()
