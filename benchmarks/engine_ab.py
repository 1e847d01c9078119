"""Two ways of starting workers, side by side on the same cells (a benchmark, not a test).

Reads results folders made by the workflow on one grid (``benchmarks/engine_grid.yaml``,
say), each labelled by how its workers started, and prints per run: its wall (given), the
rounds kept, the verdicts in doubt, the unstable cells, and the spread of its rounds; then,
per pair of runs, how many verdicts agree and how many reversed (faster in one, slower in
the other). The spread of a cell's rounds is read two ways from its cell file: the paired
speedup's (the standard deviation of the log of each round's baseline median over its own
median: what the verdicts rest on) and the cell's own (``process_spread``, max over min of
its processes' medians). ``--out DIR`` writes ``runs.csv`` and ``cells.csv`` (one row per
cell and run, both spreads and the ``unstable`` flag), small enough to keep as evidence.

    .venv/bin/python benchmarks/engine_ab.py LABEL=RESULTS[@WALL_S] ... [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

KEY = ["library", "device", "operation", "size", "dtype"]


def round_spread(cell_file: Path) -> float | None:
    """The standard deviation of the log paired speedup over the cell's rounds; None for a
    cell with no baseline beside it or fewer than two rounds."""
    c = pd.read_parquet(cell_file, columns=["role", "replicate", "mode", "seconds"])
    c = c[c["mode"] == "latency"]
    medians = c.groupby(["role", "replicate"])["seconds"].median().unstack("role")
    if "baseline" not in medians or "measured" not in medians:
        return None
    logs = np.log(medians["baseline"] / medians["measured"]).dropna()
    return float(logs.std(ddof=1)) if len(logs) >= 2 else None


def cells(label: str, results: Path) -> pd.DataFrame:
    bench = pd.read_parquet(results / "benchmarks.parquet")
    speed = pd.read_parquet(results / "speedups.parquet")
    rows = []
    for _, b in bench.iterrows():
        path = results / "cells" / b["library"] / b["device"] / b["dtype"]
        path = path / f"t{int(b['threads'])}" / b["operation"] / f"{int(b['size'])}.parquet"
        rows.append(
            {
                **{k: b[k] for k in KEY},
                "run": label,
                "rounds": int(b["replicates"]),
                "unstable": bool(b["unstable"]),
                "process_spread": float(b["process_spread"]),
                "paired_round_sd": round_spread(path) if path.exists() else None,
                "worker_start": b.get("worker_start"),
            }
        )
    table = pd.DataFrame(rows)
    verdicts = speed[KEY + ["verdict", "settled", "speedup"]]
    return table.merge(verdicts, on=KEY, how="left")


def run_row(label: str, table: pd.DataFrame, wall_s: float | None) -> dict:
    paired = table[table["verdict"].notna()]
    return {
        "run": label,
        "wall_s": wall_s,
        "cells": len(table),
        "rounds_kept": int(table["rounds"].sum()),
        "verdicts": len(paired),
        "in_doubt": int((~paired["settled"].astype(bool)).sum()),
        "unstable": int(table["unstable"].sum()),
        "median_paired_round_sd": float(table["paired_round_sd"].median()),
        "median_process_spread": float(table["process_spread"].median()),
    }


def agreement(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    both = a.merge(b, on=KEY, suffixes=("_a", "_b")).dropna(subset=["verdict_a", "verdict_b"])
    opposite = {("faster", "slower"), ("slower", "faster")}
    pairs = list(zip(both["verdict_a"], both["verdict_b"]))
    return {
        "verdicts": len(both),
        "identical": sum(x == y for x, y in pairs),
        "reversed": sum((x, y) in opposite for x, y in pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RESULTS[@WALL_S]")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tables, rows = {}, []
    for text in args.runs:
        label, rest = text.split("=", 1)
        folder, _, wall = rest.partition("@")
        tables[label] = cells(label, Path(folder))
        rows.append(run_row(label, tables[label], float(wall) if wall else None))
    runs = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(runs.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        print()
        for x, y in itertools.combinations(tables, 2):
            agree = agreement(tables[x], tables[y])
            share = agree["identical"] / agree["verdicts"] if agree["verdicts"] else math.nan
            print(
                f"{x} against {y}: {agree['identical']} of {agree['verdicts']} verdicts "
                f"identical ({share:.0%}), {agree['reversed']} reversed"
            )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        runs.to_csv(args.out / "runs.csv", index=False)
        pd.concat(tables.values()).to_csv(args.out / "cells.csv", index=False)


if __name__ == "__main__":
    main()
