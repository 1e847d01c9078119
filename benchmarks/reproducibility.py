"""Do the verdicts hold on a second run? (a benchmark, not a test)

Runs the grid (default: the default CPU grid) twice, A then B, each from scratch in its own
copy of the workflow with ``--cores 1``, and compares them as a reviewer rerunning numbench
would:

- speedups: how many of B's speedups lie inside A's 95% interval; verdicts (faster / same /
  slower) that are identical, and how many A's own intervals predict would be (the sum of
  ``numbench.stats.repeat_chance``); those reversed outright (faster in one, slower in the
  other); the median relative half-width of the speedup intervals;
- cell medians within 5% of each other; crossover kinds that are identical, and whether each
  crossover size lies inside the other run's interval;
- A/A: the baseline's cells of B against A's with ``numbench.compare.runs`` (should be "same");
- cost: wall time of each run, processes per cell, and the cost of one process;
- how far the paired baseline's processes moved, between a cell's rounds and within one
  process (``baseline_spread``): what the machine did while it was measured;
- each run's headline (the summary's first line: quiet or busy machine, with its figures).

With ``--disturb-b CPU,MEMORY``, run B measures beside ``benchmarks/disturb.py``'s processes
(``1,1``: one CPU-bound, one memory-bound) and A on the machine as it is: how far a busy
machine moves the verdicts, the time and the unstable cells, and whether each run's headline
says which it was. The settled verdicts of B (those its own stopping rule settled) are
counted apart: they are the ones a disturbed run claims.

    .venv/bin/python benchmarks/reproducibility.py [--markdown] [--configfile FILE] [--keep DIR]
        [--disturb-b CPU,MEMORY]
    .venv/bin/python benchmarks/reproducibility.py --results A B [--markdown] [--configfile FILE]

``--results`` compares two results folders made already and runs nothing, so ``--disturb-b``
and ``--keep`` are refused beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _report import copy_workflow, publish, snakemake
from disturb import disturbing

from numbench.cells import KEY
from numbench.compare.runs import compare
from numbench.config import default_margin
from numbench.stats import repeat_chance

SPEEDUP_KEY = list(KEY)
GROUP_KEY = [field for field in KEY if field != "size"]


def run_once(
    root: Path, name: str, extra: list[str], disturb: tuple[int, int] | None = None
) -> tuple[Path, float]:
    """One run from scratch in its own copy, beside ``disturb`` (CPU-bound, memory-bound
    processes) where given."""
    wd = copy_workflow(root / name)
    beside = disturbing(*disturb) if disturb else contextlib.nullcontext()
    t0 = time.perf_counter()
    with beside:
        snakemake(wd, "--cores", "1", *extra)
    wall = time.perf_counter() - t0
    print(f"run {name}: {wall:.0f} s", flush=True)
    return wd / "results", wall


def speedup_figures(a: pd.DataFrame, b: pd.DataFrame, margin: float) -> dict:
    both = a.merge(b, on=SPEEDUP_KEY, suffixes=("_a", "_b")).dropna(
        subset=["speedup_a", "speedup_b"]
    )
    inside = (both["speedup_b"] >= both["speedup_ci_low_a"]) & (
        both["speedup_b"] <= both["speedup_ci_high_a"]
    )
    same = both["verdict_a"] == both["verdict_b"]
    # the verdicts the second run's stopping rule settled: the ones it claims
    settled_b = (
        both["settled_b"].astype(bool) if "settled_b" in both else pd.Series(False, both.index)
    )
    reversed_ = ((both["verdict_a"] == "faster") & (both["verdict_b"] == "slower")) | (
        (both["verdict_a"] == "slower") & (both["verdict_b"] == "faster")
    )
    half = pd.concat(
        [
            (both[f"speedup_ci_high_{s}"] - both[f"speedup_ci_low_{s}"]) / 2 / both[f"speedup_{s}"]
            for s in "ab"
        ]
    )
    changed = both[~same][SPEEDUP_KEY + ["speedup_a", "verdict_a", "speedup_b", "verdict_b"]]
    chance = np.array(
        [
            repeat_chance(p, lo, hi, margin)
            for p, lo, hi in zip(
                both["speedup_a"], both["speedup_ci_low_a"], both["speedup_ci_high_a"], strict=True
            )
        ]
    )
    chance = chance[np.isfinite(chance)]
    return {
        "n": len(both),
        "inside": int(inside.sum()),
        "same_verdict": int(same.sum()),
        "settled_b": int(settled_b.sum()),
        "settled_b_same": int((same & settled_b).sum()),
        # what A's intervals predict of that count: the sum of each verdict's chance to repeat,
        # and its standard deviation were the cells independent
        "expected_same": float(chance.sum()),
        "expected_sd": float(np.sqrt((chance * (1 - chance)).sum())),
        "reversed": int(reversed_.sum()),
        "half_width_median": float(half.median()),
        "half_width_p90": float(half.quantile(0.9)),
        "changed": changed,
    }


def crossover_figures(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    both = a.merge(b, on=GROUP_KEY, suffixes=("_a", "_b"))
    same = both["kind_a"] == both["kind_b"]
    sized = both[(both["kind_a"] == "crosses") & (both["kind_b"] == "crosses")]
    mutual = (
        (sized["crossover_size_b"] >= sized["ci_low_a"])
        & (sized["crossover_size_b"] <= sized["ci_high_a"])
        & (sized["crossover_size_a"] >= sized["ci_low_b"])
        & (sized["crossover_size_a"] <= sized["ci_high_b"])
    )
    differ = both[~same][GROUP_KEY + ["kind_a", "kind_b"]]
    return {
        "n": len(both),
        "same_kind": int(same.sum()),
        "sized": len(sized),
        "mutual": int(mutual.sum()),
        "differ": differ,
    }


def cost_figures(results: Path, wall: float | None) -> dict:
    bench = pd.read_parquet(results / "benchmarks.parquet")
    ok = bench[bench["status"] == "ok"]
    paired = ok["paired_with"].notna()
    processes = ok["replicates"] * (1 + paired.astype(int))
    return {
        "cells": len(bench),
        "wall": wall,
        "processes": int(processes.sum()),
        "replicates_mean": float(ok["replicates"].mean()),
        "replicates_max": int(ok["replicates"].max()),
        "at_min": int((ok["replicates"] == ok["replicates"].min()).sum()),
        "ok": len(ok),
        "cell_wall": float(bench["wall_s"].sum()),
        "unstable": int(ok["unstable"].sum()),
        # older results have no such column: nothing was set aside
        "set_aside": int(bench.get("set_aside", pd.Series(dtype=float)).fillna(0).sum()),
    }


def baseline_spread(samples: pd.DataFrame) -> tuple[float, float]:
    """How far the paired baseline's processes moved: (between, within), medians over cells.

    between: per paired cell with 2 or more rounds, the standard deviation of the log medians
    of its baseline processes (the same NumPy work, rounds minutes apart and in different
    jobs); within: per baseline process, the standard deviation of the log of its samples.
    Where between is far above within, what moves a process is the machine or the process's
    state, not the samples: more samples per process would not help."""
    base = samples[samples["role"] == "baseline"]
    if base.empty:
        return float("nan"), float("nan")
    cell = list(KEY)
    logs = np.log(base["seconds"])
    by_process = logs.groupby([base[c] for c in cell + ["replicate"]])
    within = by_process.std(ddof=1).dropna()
    medians = by_process.median()
    between = medians.groupby(level=list(range(len(cell)))).std(ddof=1).dropna()
    return float(between.median()), float(within.median())


def round_spans(results: Path) -> pd.Series:
    """Minutes between the first and the last own process of each ok cell with several: how
    far apart in time a cell's rounds were measured (``replicates.early_rounds``)."""
    spans = []
    for path in sorted((results / "cells").rglob("*.parquet")):
        cell = pd.read_parquet(path, columns=["role", "process_started_unix", "status"])
        own = cell[cell["role"] == "measured"]["process_started_unix"].unique()
        if (cell["status"] == "ok").all() and len(own) > 1:
            spans.append((own.max() - own.min()) / 60)
    return pd.Series(spans, dtype=float)


def aa_figures(bench_a: pd.DataFrame, bench_b: pd.DataFrame, margin: float) -> tuple[int, int]:
    """(baseline cells of B "same" as A's by ``numbench.compare.runs``, baseline cells compared)."""
    baseline = bench_a[bench_a["paired_with"].isna() & (bench_a["status"] == "ok")]
    base_names = set(zip(baseline["library"], baseline["device"], strict=True))
    aa = compare(bench_a, bench_b, margin)
    aa = aa[
        [(lib, dev) in base_names for lib, dev in zip(aa["library"], aa["device"], strict=True)]
    ]
    aa = aa[aa["ratio"].notna()]
    return int((aa["change"] == "same").sum()), len(aa)


def pct(k: int, n: int) -> str:
    return f"{k} of {n} ({100 * k / n:.0f}%)" if n else "0 of 0"


def disturb_counts(text: str) -> tuple[int, int]:
    """``--disturb-b``'s CPU,MEMORY: how many CPU-bound and memory-bound processes."""
    try:
        cpu, memory = (int(part) for part in text.split(","))
    except ValueError:
        cpu = memory = -1
    if cpu < 0 or memory < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: CPU,MEMORY: two whole numbers >= 0")
    return cpu, memory


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The script's options (see the module's docstring); ``argv``: the command line's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", help="a smaller grid (default: config/config.yaml)")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the figures as a Markdown section with command, date and machine",
    )
    parser.add_argument("--keep", help="keep both runs' results/ under this folder (a/, b/)")
    parser.add_argument(
        "--disturb-b",
        type=disturb_counts,
        metavar="CPU,MEMORY",
        help="run B beside this many CPU-bound and memory-bound processes "
        "(benchmarks/disturb.py), A as the machine is",
    )
    parser.add_argument(
        "--results",
        nargs=2,
        metavar=("A", "B"),
        help="compare two results folders made already (say, before and after a change) "
        "instead of running the grid twice; their wall times are not known here",
    )
    args = parser.parse_args(argv)
    if args.results:
        # both act on runs made here, and --results makes none
        for given, option in ((args.disturb_b, "--disturb-b"), (args.keep, "--keep")):
            if given is not None:
                parser.error(
                    f"{option} acts on the two runs this script makes; --results runs none"
                )
    return args


def margin_of(configfile: str | None) -> float:
    """The margin the runs judge verdicts with: the config file's, else the default config's."""
    margin = default_margin()
    if configfile:
        import yaml

        margin = float((yaml.safe_load(Path(configfile).read_text()) or {}).get("margin", margin))
    return margin


def run_twice(
    extra: list[str], keep: str | None, margin: float, disturb: tuple[int, int] | None = None
) -> dict:
    """Run the grid twice, A then B, each from scratch in a temporary copy of the workflow
    (kept under ``keep`` where asked), and read what the report compares before the copies
    go: the speedups both ways, the crossovers, both benchmarks tables, and each run's cost,
    round spans and baseline spread."""
    with tempfile.TemporaryDirectory() as tmp:
        res_a, wall_a = run_once(Path(tmp), "a", extra)
        res_b, wall_b = run_once(Path(tmp), "b", extra, disturb)
        if keep:
            for name, res in (("a", res_a), ("b", res_b)):
                shutil.copytree(res, Path(keep) / name, dirs_exist_ok=True)
        return read_runs(res_a, res_b, (wall_a, wall_b), margin)


def read_runs(res_a: Path, res_b: Path, walls: tuple, margin: float) -> dict:
    """What the report compares of two results folders: the speedups both ways, the
    crossovers, both benchmarks tables, and each run's cost (``walls``: the runs' wall
    seconds, or None where unknown), round spans and baseline spread."""
    wall_a, wall_b = walls
    sp_a, sp_b = (pd.read_parquet(r / "speedups.parquet") for r in (res_a, res_b))
    return {
        "sp": speedup_figures(sp_a, sp_b, margin),
        "sp_reverse": speedup_figures(sp_b, sp_a, margin),
        "floored": [int(t["floored"].sum()) if "floored" in t else 0 for t in (sp_a, sp_b)],
        "cr": crossover_figures(
            *(pd.read_parquet(r / "crossovers.parquet") for r in (res_a, res_b))
        ),
        "bench": [pd.read_parquet(r / "benchmarks.parquet") for r in (res_a, res_b)],
        "cost": [cost_figures(res_a, wall_a), cost_figures(res_b, wall_b)],
        "spans": [round_spans(res_a), round_spans(res_b)],
        "spread": [baseline_spread(pd.read_parquet(r / "samples.parquet")) for r in (res_a, res_b)],
        "headline": [headline(r) for r in (res_a, res_b)],
    }


def headline(results: Path) -> str:
    """The summary's first line of text (its machine headline), or why there is none."""
    summary = results / "summary.md"
    if not summary.is_file():
        return "no summary.md"
    for line in summary.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            return line.strip()
    return "an empty summary.md"


def medians_within(bench_a: pd.DataFrame, bench_b: pd.DataFrame, share: float) -> tuple[int, int]:
    """(cells ok in both runs whose medians lie within ``share`` of each other, cells ok in
    both)."""
    key = list(KEY)
    medians = bench_a.merge(bench_b, on=key, suffixes=("_a", "_b"))
    medians = medians[(medians["status_a"] == "ok") & (medians["status_b"] == "ok")]
    within = ((medians["median_s_b"] / medians["median_s_a"] - 1).abs() <= share).sum()
    return int(within), len(medians)


def verdict_lines(runs: dict, margin: float) -> list[str]:
    """The first table: how far run B repeats run A's speedups, verdicts, medians and
    crossovers, and the A/A comparison of the baseline's cells."""
    sp, sp_reverse, cr = runs["sp"], runs["sp_reverse"], runs["cr"]
    within5, n_medians = medians_within(*runs["bench"], 0.05)
    aa_same, aa_n = aa_figures(*runs["bench"], margin)
    return [
        "## Reproducibility: the default grid run twice",
        "",
        f"{runs.get('source', 'Two runs, A then B, each from scratch (`--cores 1`)')}, "
        f"margin {margin:g}x.",
        "",
        "| figure | run A vs run B |",
        "|---|---|",
        f"| speedups of B inside A's 95% CI | {pct(sp['inside'], sp['n'])} |",
        f"| speedups of A inside B's 95% CI | {pct(sp_reverse['inside'], sp_reverse['n'])} |",
        f"| verdicts (faster / same / slower) identical | {pct(sp['same_verdict'], sp['n'])} |",
        "| identical verdicts A's intervals predict (`numbench.stats.repeat_chance`) | "
        f"{sp['expected_same']:.1f} ± {sp['expected_sd']:.1f} |",
        f"| verdicts reversed (faster in one run, slower in the other) | {sp['reversed']} |",
        f"| B's settled verdicts identical to A's | {pct(sp['settled_b_same'], sp['settled_b'])} |",
        f"| median relative CI half-width of the speedups | {sp['half_width_median']:.1%} "
        f"(90th percentile {sp['half_width_p90']:.1%}) |",
        f"| cell medians within 5% of each other | {pct(within5, n_medians)} |",
        f"| crossover kinds identical | {pct(cr['same_kind'], cr['n'])} |",
        f"| crossover sizes each inside the other run's CI (both `crosses`) | "
        f"{pct(cr['mutual'], cr['sized'])} |",
        f'| A/A: baseline cells of B against A, "same" | {pct(aa_same, aa_n)} |',
    ]


def cost_lines(runs: dict) -> list[str]:
    """The second table: what each run cost, and how much the machine moved under it."""
    cost, floored = runs["cost"], runs["floored"]
    return [
        "| cost | run A | run B |",
        "|---|---:|---:|",
        "| wall time (`snakemake --cores 1`) | "
        + " | ".join(
            "not known" if c["wall"] is None else f"{c['wall'] / 60:.1f} min" for c in cost
        )
        + " |",
        f"| cells | {cost[0]['cells']} | {cost[1]['cells']} |",
        f"| worker processes (own and paired baseline) | {cost[0]['processes']} | "
        f"{cost[1]['processes']} |",
        f"| own processes per ok cell: mean, max | {cost[0]['replicates_mean']:.2f}, "
        f"{cost[0]['replicates_max']} | {cost[1]['replicates_mean']:.2f}, "
        f"{cost[1]['replicates_max']} |",
        f"| ok cells that stopped at the minimum | {pct(cost[0]['at_min'], cost[0]['ok'])} | "
        f"{pct(cost[1]['at_min'], cost[1]['ok'])} |",
        f"| summed cell wall time / processes = cost of one process | "
        f"{cost[0]['cell_wall'] / max(cost[0]['processes'], 1):.2f} s | "
        f"{cost[1]['cell_wall'] / max(cost[1]['processes'], 1):.2f} s |",
        f"| unstable cells | {cost[0]['unstable']} | {cost[1]['unstable']} |",
        "| rounds measured again because other programs took a worker's CPU | "
        f"{cost[0]['set_aside']} | {cost[1]['set_aside']} |",
        f"| speedup intervals widened by the round floor | {floored[0]} | {floored[1]} |",
        "| the paired baseline's processes: SD of the log between a cell's rounds, and "
        "within one process (medians) | "
        + " | ".join(f"{b:.1%}, {w:.1%}" for b, w in runs["spread"])
        + " |",
        "| minutes between a cell's first and last own process: median, 10th percentile | "
        + " | ".join(f"{s.median():.1f}, {s.quantile(0.1):.1f}" for s in runs["spans"])
        + " |",
    ]


def difference_lines(runs: dict) -> list[str]:
    """The speedups whose verdict differs and the crossover kinds that differ, one row each
    (nothing where the two runs agree)."""
    lines: list[str] = []
    if len(runs["sp"]["changed"]):
        lines += ["", "Speedups whose verdict differs:", ""]
        lines += ["| cell | A | B |", "|---|---:|---:|"]
        for r in runs["sp"]["changed"].itertuples():
            cell = f"{r.library}/{r.device}/{r.operation}/{r.size}"
            lines.append(
                f"| {cell} | {r.speedup_a:.3f} {r.verdict_a} | {r.speedup_b:.3f} {r.verdict_b} |"
            )
    if len(runs["cr"]["differ"]):
        lines += ["", "Crossover kinds that differ:", ""]
        lines += ["| group | A | B |", "|---|---|---|"]
        for r in runs["cr"]["differ"].itertuples():
            lines.append(f"| {r.library}/{r.device}/{r.operation} | {r.kind_a} | {r.kind_b} |")
    return lines


def main() -> None:
    args = arguments()
    extra = ["--configfile", str(Path(args.configfile).resolve())] if args.configfile else []
    margin = margin_of(args.configfile)
    if args.results:
        res_a, res_b = (Path(r) for r in args.results)
        runs = read_runs(res_a, res_b, (None, None), margin)
        runs["source"] = f"Two results folders made already, A ({res_a}) and B ({res_b})"
    else:
        disturb = args.disturb_b
        runs = run_twice(extra, args.keep, margin, disturb)
        if disturb:
            runs["source"] = (
                f"Two runs, A on the machine as it was, then B beside {disturb[0]} CPU-bound and "
                f"{disturb[1]} memory-bound processes (`benchmarks/disturb.py`), each from "
                "scratch (`--cores 1`)"
            )
    lines = verdict_lines(runs, margin) + [""] + cost_lines(runs) + difference_lines(runs)
    lines += ["", f"Run A's headline: {runs['headline'][0]}", ""]
    lines += [f"Run B's headline: {runs['headline'][1]}"]
    body = "\n".join(lines) + "\n"
    publish("reproducibility.py", body, args.markdown, args.configfile)


if __name__ == "__main__":
    main()
