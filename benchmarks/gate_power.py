"""How often does the history's screen catch a slowdown, cell by cell, at each screen level?
(a benchmark, not a test)

``gate_pairs.py`` plants one cell and runs the whole gate on every ordered pair of runs; this
asks the same of every cell at once, at several screen levels (``compare --screen-level``),
so that the level can be chosen by what it catches and what it costs: for each cell, the
share of the ordered pairs in which a slowdown planted in NEW (``gate_pairs.plant``'s way:
the cell's times multiplied, its speedup divided) makes it a suspect or slower with no other
cell flagged (``gate_pairs.screened``); and for each level, the suspects per pair of
unchanged runs (what ``--confirm`` measures again) and the unchanged pairs that fail.

Each pair's store holds every run but the two compared, as in ``gate_pairs.py``, and each
pair is judged by the gate's own ``judge`` (its false-alarm rate on past pairs and the common
shifts are left out: neither changes a cell's verdict). A paired cell is judged by its own
values and the history's alone, so every paired cell is planted at once in NEW and each one's
row then put into the unchanged pair's table, with Holm's step redone with only that cell
moved: exactly what planting it alone gives. A NumPy cell is judged against its run's level,
which a plant moves, so each is planted alone.

The cells are ranked by the slowdown the screen flags at 0.05 (their median over the pairs):
the *median cell* is the middle one, the *steadier half* it and every cell below it. The
screen tests NEW against the history with OLD as one more run, the same seven runs whatever
OLD is, so each cell's rate over 56 pairs rests on eight outcomes (one per NEW).

    .venv/bin/python benchmarks/gate_power.py RUN1 ... RUN8 [--levels 0.05 0.1 0.2 0.3]
        [--factors 1.2 1.1]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import gate_pairs as gp
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats

from numbench.compare import gate as G
from numbench.config import default_margin
from numbench.history import add, read

#: what each cell's row carries from a planted pair's table into the unchanged one's
ROW_COLUMNS = [
    "status_new",
    "x_new",
    "se_new",
    "ratio",
    "p_slower",
    "p_faster",
    "p_screen",
    "screened",
    "judged",
]


def plant_many(results: str, out: Path, cells: set, factor: float) -> Path:
    """``gate_pairs.plant`` for several cells at once: the same columns, the same arithmetic."""
    out.mkdir(parents=True)
    for name, columns, scale in (
        ("benchmarks.parquet", gp.TIME_COLUMNS, factor),
        ("speedups.parquet", gp.SPEEDUP_COLUMNS, 1 / factor),
    ):
        path = Path(results) / name
        if not path.exists():
            continue
        table = pq.read_table(path)
        frame = table.to_pandas()
        rows = np.array([gp.key_of(r) in cells for _, r in frame.iterrows()], dtype=bool)
        for column in columns:
            if column in frame:
                frame.loc[rows, column] = frame.loc[rows, column] * scale
        if name == "benchmarks.parquet" and gp.PROCESS_MEDIANS in frame:
            scaled = [gp._scaled(t, factor) for t in frame.loc[rows, gp.PROCESS_MEDIANS]]
            frame.loc[rows, gp.PROCESS_MEDIANS] = pd.Series(
                scaled, index=frame.index[rows], dtype=object
            )
        pq.write_table(
            pa.Table.from_pandas(frame, schema=table.schema, preserve_index=False), out / name
        )
    return out


def evaluate(old, new, store, margin: float) -> pd.DataFrame:
    """The gate's table of one pair, indexed by cell, with the screen's p-value beside it."""
    tab, _ = G.judge(old, new, store, margin)
    tab = tab.copy()
    tab["ok_new"] = (tab["status_new"] == "ok") & tab["x_new"].notna() & tab["x_old"].notna()
    screened, t, df, _ = G.screen_test(tab)
    tab["screened"] = screened.to_numpy()
    tab["judged"] = (tab["ok_new"] & (tab["history_runs"] >= G.MIN_HISTORY)).to_numpy()
    tab["p_screen"] = stats.t.sf(t, df)
    tab.index = pd.MultiIndex.from_tuples([gp.key_of(r) for _, r in tab.iterrows()])
    return tab


def changes(tab: pd.DataFrame, level: float, margin: float) -> pd.Series:
    """The gate's change column from the table's columns at screen ``level`` (as ``judge``)."""
    judged, screened = tab["judged"].to_numpy(), tab["screened"].to_numpy()
    slower, faster = np.zeros(len(tab), bool), np.zeros(len(tab), bool)
    slower[judged] = G.holm(tab["p_slower"].to_numpy()[judged])
    faster[judged] = G.holm(tab["p_faster"].to_numpy()[judged])
    ratio = tab["ratio"].to_numpy()
    out = np.select(
        [
            tab["status_new"].to_numpy() != "ok",
            ~screened,
            judged & slower & (ratio > margin),
            judged & faster & (ratio < 1 / margin),
            screened & (tab["p_screen"].to_numpy() < level),
        ],
        [G.BROKEN, G.NO_HISTORY, G.SLOWER, G.FASTER, G.SUSPECT],
        G.SAME,
    )
    return pd.Series(out, index=tab.index)


def caught(change: pd.Series, cell) -> bool:
    """``gate_pairs.screened``: the cell suspect or flagged, and no other cell flagged."""
    flagged = change.isin(gp.FAILS)
    return change[cell] in (G.SUSPECT, *gp.FAILS) and not flagged.drop(cell).any()


class Pairs:
    """Every ordered pair of ``runs`` with its store (the other runs) and unchanged table."""

    def __init__(self, runs: list[str], work: Path, margin: float) -> None:
        self.runs, self.work, self.margin = runs, work, margin
        self.pairs = list(itertools.permutations(range(len(runs)), 2))
        ingested = gp.ingest(runs)
        self.stores = {}
        for a, b in itertools.combinations(range(len(runs)), 2):
            store = work / f"store-{a}-{b}"
            for k, tables in enumerate(ingested):
                if k not in (a, b):
                    for run, cells in tables:
                        add(store, run, cells)
            self.stores[(a, b)] = read(store).cells
        self.sides = [G.side(r) for r in runs]
        self.unchanged = {p: self.judge(p, self.sides[p[1]]) for p in self.pairs}

    def judge(self, pair: tuple[int, int], new) -> pd.DataFrame:
        return evaluate(self.sides[pair[0]], new, self.stores[tuple(sorted(pair))], self.margin)

    def planted(self, cells: list, factor: float, tag: str) -> dict:
        """NEW's side of each run with ``cells`` planted ``factor`` times slower."""
        return {
            j: G.side(plant_many(run, self.work / f"{tag}-{j}", set(cells), factor))
            for j, run in enumerate(self.runs)
        }


def catch_rates(pairs: Pairs, factor: float, levels: list[float]) -> pd.DataFrame:
    """cell x level: the share of pairs in which the planted ``factor`` is caught."""
    kinds = pairs.unchanged[pairs.pairs[0]]["statistic"]
    paired = [c for c in kinds.index if kinds[c] == G.PAIRED]
    shifted = [c for c in kinds.index if kinds[c] != G.PAIRED]
    hits: dict[tuple, list[bool]] = {}
    mass = pairs.planted(paired, factor, f"paired-{factor}")
    for pair in pairs.pairs:
        planted = pairs.judge(pair, mass[pair[1]])
        for cell in paired:
            tab = pairs.unchanged[pair].copy()
            for column in ROW_COLUMNS:
                tab.at[cell, column] = planted.at[cell, column]
            for level in levels:
                hits.setdefault((cell, level), []).append(
                    caught(changes(tab, level, pairs.margin), cell)
                )
    for n, cell in enumerate(shifted):
        alone = pairs.planted([cell], factor, f"shifted-{factor}-{n}")
        for pair in pairs.pairs:
            tab = pairs.judge(pair, alone[pair[1]])
            for level in levels:
                hits.setdefault((cell, level), []).append(
                    caught(changes(tab, level, pairs.margin), cell)
                )
        print(f"  {factor}x: {n + 1} of {len(shifted)} NumPy cells", file=sys.stderr, flush=True)
    rates = pd.Series({k: float(np.mean(v)) for k, v in hits.items()})
    return rates.unstack(level=-1)


def screenable(pairs: Pairs, level: float) -> pd.Series:
    """Each cell's median over the unchanged pairs of the slowdown the screen flags at it."""
    per = []
    for tab in pairs.unchanged.values():
        screened, _, df, sd = G.screen_test(tab)
        flags = pd.Series(np.exp(stats.t.isf(level, df) * sd).to_numpy(), index=tab.index)
        per.append(flags[screened.to_numpy()])
    return pd.concat(per, axis=1).median(axis=1)


def report(pairs: Pairs, rates: dict[float, pd.DataFrame], levels: list[float]) -> str:
    threshold = screenable(pairs, 0.05)
    order = sorted(threshold.index, key=lambda c: (threshold[c], c))
    median_cell = order[(len(order) - 1) // 2]
    steadier = order[: (len(order) - 1) // 2 + 1]
    middle = order[int(0.45 * len(order)) : int(0.55 * len(order)) + 1]
    lines = [
        f"{len(pairs.runs)} runs, {len(pairs.pairs)} ordered pairs, {len(order)} cells judged. "
        f"The median cell (by the slowdown the screen flags at 0.05, its median over the "
        f"pairs): {gp.cell_name(median_cell)}, {threshold[median_cell]:.3f}x; the steadier "
        f"half: {len(steadier)} cells, up to {threshold[steadier[-1]]:.3f}x; the middle tenth: "
        f"{len(middle)} cells, {threshold[middle[0]]:.3f}x to {threshold[middle[-1]]:.3f}x.",
        "",
    ]
    factors = sorted(rates, reverse=True)
    head = ["level"]
    for f in factors:
        head += [f"{f}x: median cell", f"{f}x: middle tenth, median", f"{f}x: steadier half"]
    head += ["suspects a pair of unchanged runs, mean / most", "unchanged pairs failing"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for level in levels:
        counts = [pairs_change_counts(pairs, pair, level) for pair in pairs.pairs]
        suspects = [s for s, _ in counts]
        row = [f"{level:g}"]
        for f in factors:
            at = rates[f][level]
            row += [
                f"{at[median_cell]:.0%}",
                f"{at[middle].median():.0%} ({(at[middle] >= 0.8).mean():.0%} of them at 80% or more)",
                f"{at[steadier].median():.0%} ({(at[steadier] >= 0.8).mean():.0%} at 80% or more)",
            ]
        row += [
            f"{np.mean(suspects):.1f} / {max(suspects)}",
            f"{sum(failed for _, failed in counts)} of {len(counts)}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def pairs_change_counts(pairs: Pairs, pair: tuple[int, int], level: float) -> tuple[int, bool]:
    """(suspects, failed) of an unchanged pair at screen ``level``."""
    change = changes(pairs.unchanged[pair], level, pairs.margin)
    return int((change == G.SUSPECT).sum()), bool(change.isin(gp.FAILS).any())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="results/ folders of runs of the same code")
    parser.add_argument("--levels", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3])
    parser.add_argument("--factors", type=float, nargs="+", default=[1.2, 1.1])
    args = parser.parse_args(argv)
    if len(args.runs) < G.MIN_HISTORY + 2:
        parser.error(
            f"give at least {G.MIN_HISTORY + 2} runs: each pair's store needs {G.MIN_HISTORY}"
        )
    with tempfile.TemporaryDirectory(prefix="gate-power-") as work:
        pairs = Pairs(args.runs, Path(work), float(default_margin()))
        rates = {f: catch_rates(pairs, f, args.levels) for f in args.factors}
        print(report(pairs, rates, args.levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
