"""Two ways of starting workers, side by side on the same cells (a benchmark, not a test).

Reads results folders made by the workflow on one grid (``benchmarks/engine_grid.yaml``,
say), each labelled by how its workers started, and prints per run: its wall (given), the
rounds kept, the verdicts in doubt, the unstable cells, and the spread of its rounds; then,
per pair of runs, how many verdicts agree and how many reversed (faster in one, slower in
the other). The spread of a cell's rounds is read two ways from its cell file: the paired
speedup's (the standard deviation of the log of each round's baseline median over its own
median: what the verdicts rest on) and the cell's own (``process_spread``, max over min of
its processes' medians). Cells of three rounds or more also say how far their early round
(its own job, minutes before) sat from their later rounds (one job, back to back), beside
the later rounds' own spread (``round_spread``). ``--out DIR`` writes ``runs.csv`` and
``cells.csv`` (one row per cell and run, both spreads and the ``unstable`` flag), small
enough to keep as evidence.

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


def round_spread(cell_file: Path) -> dict:
    """The spread of the cell's paired rounds, from the log paired speedup of each round:
    ``paired_round_sd``, its standard deviation over every round (None with no baseline
    beside it or fewer than two rounds); and, with three rounds or more, ``early_shift``,
    round 0 (the early round's job, minutes before) less the mean of the later rounds (the
    cell's own job, back to back), beside ``later_round_sd``, the later rounds' own spread:
    a shift larger than that spread is drift between the jobs the later rounds cannot see."""
    c = pd.read_parquet(cell_file, columns=["role", "replicate", "mode", "seconds"])
    c = c[c["mode"] == "latency"]
    medians = c.groupby(["role", "replicate"])["seconds"].median().unstack("role")
    out = dict.fromkeys(("paired_round_sd", "early_shift", "later_round_sd"))
    if "baseline" not in medians or "measured" not in medians:
        return out
    logs = np.log(medians["baseline"] / medians["measured"]).dropna().sort_index()
    if len(logs) >= 2:
        out["paired_round_sd"] = float(logs.std(ddof=1))
    if len(logs) >= 3:
        out["early_shift"] = float(logs.iloc[0] - logs.iloc[1:].mean())
        out["later_round_sd"] = float(logs.iloc[1:].std(ddof=1))
    return out


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
                **(round_spread(path) if path.exists() else {}),
                "worker_start": b.get("worker_start"),
            }
        )
    table = pd.DataFrame(rows)
    # a column no cell filled holds None (object), not NaN: numbers, for the medians
    spreads = ["paired_round_sd", "early_shift", "later_round_sd"]
    table[spreads] = table.reindex(columns=spreads).astype(float)
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
        "cells_3_rounds": int(table["early_shift"].notna().sum()),
        "median_abs_early_shift": float(table["early_shift"].abs().median()),
        "median_later_round_sd": float(table["later_round_sd"].median()),
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
