"""What a cell cost, from the logs of ``offsite run`` (one ``part-NN.log`` per lease call):
each cell's seconds (its rounds run ahead, ``round N PATH  S s``, and its own job,
``[i/n] PATH  STATUS  S s``), per library and in all, for one run or more side by side
(docs/gpu.md, "What a GPU cell costs"). A cell counts once its own job's line is there.

    python benchmarks/gpu_cell_cost.py --run before B/part-01.log B/part-02.log \
        --run after A/part-01.log A/part-02.log

With two runs or more, the cells they all finished are compared: each run's median cell and
total over those cells, and each later run's total against the first's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROUND = re.compile(r"^round \d+ (results/cells/\S+\.parquet)\s+([0-9.]+) s$")
CELL = re.compile(r"^\[\s*\d+/\d+\] (results/cells/\S+\.parquet)\s+(\S+)\s+([0-9.]+) s$")


def cell_costs(logs: list[Path]) -> dict[str, float]:
    """{cell path: seconds} of the cells whose own job ended in these logs."""
    rounds: dict[str, float] = {}
    done: dict[str, float] = {}
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if m := ROUND.match(line):
                rounds[m[1]] = rounds.get(m[1], 0.0) + float(m[2])
            elif m := CELL.match(line):
                done[m[1]] = done.get(m[1], 0.0) + float(m[3])
    return {cell: s + rounds.get(cell, 0.0) for cell, s in done.items()}


def library(cell: str) -> str:
    """``jax/gpu`` of ``results/cells/jax/gpu/float32/t1/OP/SIZE.parquet``."""
    parts = cell.split("/")
    return f"{parts[2]}/{parts[3]}"


def summary(costs: dict[str, float], cells: list[str]) -> dict[str, tuple[int, float, float]]:
    """{library or "all": (cells, median s, total s)} over ``cells``."""
    groups: dict[str, list[float]] = {"all": [costs[c] for c in cells]}
    for c in cells:
        groups.setdefault(library(c), []).append(costs[c])
    return {k: (len(v), statistics.median(v), sum(v)) for k, v in groups.items() if v}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run",
        nargs="+",
        action="append",
        required=True,
        metavar=("NAME", "LOG"),
        help="a run's name and its part logs",
    )
    args = parser.parse_args(argv)
    runs = {}
    for name, *logs in args.run:
        if not logs:
            parser.error(f"--run {name}: no logs")
        missing = [log for log in logs if not Path(log).is_file()]
        if missing:
            parser.error(f"--run {name}: no such log: {', '.join(missing)}")
        runs[name] = cell_costs([Path(log) for log in logs])
    common = sorted(set.intersection(*(set(c) for c in runs.values())))
    if not common:
        print("no cell finished in every run", file=sys.stderr)
        return 1
    names = list(runs)
    print(f"{len(common)} cells finished in every run ({', '.join(names)})")
    print("\ncell | " + " | ".join(f"{n} s" for n in names))
    for cell in common:
        short = cell.removeprefix("results/cells/").removesuffix(".parquet")
        print(f"{short} | " + " | ".join(f"{runs[n][cell]:.1f}" for n in names))
    tables = {n: summary(runs[n], common) for n in names}
    print("\nlibrary | " + " | ".join(f"{n}: cells, median, total" for n in names))
    for key in tables[names[0]]:
        cols = [
            f"{tables[n][key][0]}, {tables[n][key][1]:.1f} s, {tables[n][key][2]:.0f} s"
            for n in names
        ]
        print(f"{key} | " + " | ".join(cols))
    first = tables[names[0]]["all"]
    for n in names[1:]:
        this = tables[n]["all"]
        print(
            f"\n{n} against {names[0]}: median cell {this[1]:.2f} s against {first[1]:.2f} s "
            f"({this[1] / first[1]:.2f}x), total {this[2]:.0f} s against {first[2]:.0f} s "
            f"({this[2] / first[2]:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
