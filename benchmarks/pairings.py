"""Every pairing of several kept runs of the same code (a benchmark, not a test)

``reproducibility.py --keep DIR`` keeps the two runs of one pair (DIR/a, DIR/b). One pair is
one draw: its figures move by several points from pair to pair. Given the ``results/``
folders of several runs of the same code on the same kind of machine (for instance two kept
pairs, four runs), this compares every pairing of them, earlier run as A, with the figures
``reproducibility.py`` prints, and the least, mean and most of each over the pairings.

    .venv/bin/python benchmarks/pairings.py RUN1 RUN2 [RUN3 ...]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pandas as pd
from reproducibility import SPEEDUP_KEY, aa_figures, crossover_figures, speedup_figures

from numbench.config import default_margin
from numbench.stats import verdict_settled

COLUMNS = [
    ("B inside A", "inside"),
    ("A inside B", "inside_ba"),
    ("identical verdicts", "same_verdict"),
    ("predicted from A", "expected_same"),
    ("reversed", "reversed"),
    ("median half-width", "half_width"),
    ("identical crossover kinds", "same_kind"),
    ("sizes inside", "mutual"),
    ("A/A same", "aa"),
    ("settled in A: identical in B", "settled_same"),
    ("in doubt in A: identical in B", "doubt_same"),
]


def load(run: Path) -> dict:
    tables = {}
    for name in ("speedups", "crossovers", "benchmarks"):
        path = run / f"{name}.parquet"
        if not path.is_file():
            raise SystemExit(f"error: {run} has no {name}.parquet: is it a kept results/ folder?")
        tables[name] = pd.read_parquet(path)
    return tables


def settled_figures(
    a: pd.DataFrame, b: pd.DataFrame, margin: float
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Of A's settled verdicts (interval holding neither margin edge, ``settled``; computed
    from the interval for results from before the column), and of its verdicts in doubt, how
    many B repeats."""
    both = a.merge(b, on=SPEEDUP_KEY, suffixes=("_a", "_b")).dropna(
        subset=["speedup_a", "speedup_b"]
    )
    settled = [
        verdict_settled(p, lo, hi, margin, 0.0)
        for p, lo, hi in zip(
            both["speedup_a"], both["speedup_ci_low_a"], both["speedup_ci_high_a"], strict=True
        )
    ]
    settled = pd.Series(settled, index=both.index, dtype=bool)
    same = both["verdict_a"] == both["verdict_b"]
    return (
        (int(same[settled].sum()), int(settled.sum())),
        (int(same[~settled].sum()), int((~settled).sum())),
    )


def figures(a: dict, b: dict, margin: float) -> dict:
    sp = speedup_figures(a["speedups"], b["speedups"], margin)
    back = speedup_figures(b["speedups"], a["speedups"], margin)
    cr = crossover_figures(a["crossovers"], b["crossovers"])
    aa_same, aa_n = aa_figures(a["benchmarks"], b["benchmarks"], margin)
    settled_same, doubt_same = settled_figures(a["speedups"], b["speedups"], margin)
    return {
        "settled_same": settled_same,
        "doubt_same": doubt_same,
        "inside": sp["inside"] / sp["n"],
        "inside_ba": back["inside"] / back["n"],
        "same_verdict": sp["same_verdict"] / sp["n"],
        "expected_same": sp["expected_same"] / sp["n"],
        "reversed": sp["reversed"],
        "half_width": sp["half_width_median"],
        "same_kind": cr["same_kind"] / cr["n"],
        "mutual": cr["mutual"] / cr["sized"] if cr["sized"] else float("nan"),
        "aa": aa_same / aa_n if aa_n else float("nan"),
        "counts": {
            "same_verdict": (sp["same_verdict"], sp["n"]),
            "same_kind": (cr["same_kind"], cr["n"]),
            "mutual": (cr["mutual"], cr["sized"]),
        },
    }


#: figures that are counts "k of n", not shares
COUNTED = ("settled_same", "doubt_same")


def cell(key: str, value) -> str:
    if key in COUNTED:
        return f"{value[0]} of {value[1]}"
    if key == "reversed":
        return f"{value:.2g}"
    return f"{value:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="kept results/ folders, in the order they ran")
    parser.add_argument("--margin", type=float, default=default_margin())
    args = parser.parse_args()
    if len(args.runs) < 2:
        parser.error("need at least two runs")
    runs = [Path(r) for r in args.runs]
    tables = [load(r) for r in runs]
    for n, run in enumerate(runs, 1):
        print(f"run {n}: {run}")
    print()
    rows = []
    print("| A | B | " + " | ".join(label for label, _ in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for i, j in itertools.combinations(range(len(runs)), 2):
        f = figures(tables[i], tables[j], args.margin)
        rows.append(f)
        counts = {key: f"{k} of {n}" for key, (k, n) in f["counts"].items()}
        print(
            f"| {i + 1} | {j + 1} | "
            + " | ".join(
                cell(key, f[key]) + (f" ({counts[key]})" if key in counts else "")
                for _, key in COLUMNS
            )
            + " |"
        )
    frame = pd.DataFrame(rows)
    numeric = [key for _, key in COLUMNS if key not in COUNTED]
    for stat in ("min", "mean", "max"):
        values = getattr(frame[numeric], stat)()
        print(
            f"| {stat} | | "
            + " | ".join(cell(k, values[k]) if k in numeric else "" for _, k in COLUMNS)
            + " |"
        )
    labels = {key: label for label, key in COLUMNS}
    for key in COUNTED:
        same, total = (sum(r[key][i] for r in rows) for i in (0, 1))
        label = labels[key]
        print(f"\n{label}, over every pairing: {same} of {total} ({same / max(total, 1):.1%})")


if __name__ == "__main__":
    main()
