"""A regression gate that knows each cell's noise: ``numbench compare OLD NEW --history H``.

``compare`` alone judges a cell by the two runs' own intervals, with one stated drift between
runs for every cell; that is too wide for a steady cell and too narrow for one with two
modes. With a history, each cell is judged against its own run-to-run spread in the store:

1. **The cell's spread.** The standard deviation of the log of its ``ok`` medians over the
   store's runs on the same host, the runs of OLD and NEW left out (their ids are made from
   their content, as the store makes them), at least ``NOISE_FLOOR``. A cell with fewer than
   ``MIN_HISTORY`` such runs is not judged by the history (it is counted and named).
2. **The test.** ``d = log(new / old)``; if nothing changed, d is the difference of two draws
   of the cell's series, so ``t = d / (s * sqrt(2))`` follows Student's t with ``n - 1``
   degrees of freedom (n: the cell's runs). NEW must also be out of line with the history
   itself: ``e = log(new) - m`` (m: the mean of the history's log medians) is one draw less
   the mean of n, ``t = e / (s * sqrt(1 + 1/n))``. A cell is slower only where both say so
   (an intersection-union test: its p-value is the larger of the two, and the rate stays at
   most ALPHA), so an OLD that was itself a fast outlier, a two-mode cell's rarer mode, does
   not make a NEW at the history's usual level a slowdown. On six runs of unchanged code
   here, that was 10 of the 11 cells flagged by the first test alone. Likewise for faster.
3. **All cells at once.** Holm's step-down correction over every cell judged keeps the chance
   that a pair of unchanged runs fails anywhere at ``ALPHA`` or less (the family-wise rate),
   and a cell is *slower* only when it is also past the margin, as ``compare``'s verdicts.
   A cell ``ok`` in OLD and not in NEW is *broken*, as in ``compare``.
4. **Its false-alarm rate, measured.** The same gate is run on the store's own past pairs of
   consecutive runs on one host with the same grid (each pair left out of its own history);
   the share of pairs that would have failed is printed beside ``ALPHA``.

Two figures say what the gate could and could not see; neither changes its verdict:

- **What it could catch.** Each judged cell's slowdown the gate would flag on its own
  (``detectable``): the ratio new / old whose p-value passes Holm's first step, ``ALPHA``
  over the cells judged, with the cell's spread and degrees of freedom, in both tests (where
  OLD was faster than the history's mean, NEW must also clear that), and at least the margin
  (a ratio must be above it). Where other cells are flagged too, Holm's later steps can flag a
  cell a little below it. With a short history of a noisy cell it is far above 1.2.
- **The machine's day.** A shared host can run a whole run slower than the next with
  nothing changed (other guests take memory bandwidth and clock; every cell moves alike,
  the roofs with them). The pair's *common shift* (the median new / old of the cells ok on
  both sides of a host and device, where at least ``MIN_LEVEL_CELLS``) is printed beside
  how far the history's own runs there differed as a whole (each run's level: its median
  cell against the others, fitted alternately; the span is the highest level over the
  lowest), so that a slowdown of every cell alike can be read against the machine's days.
  It is not taken out of each cell before judging: that would make the gate more
  sensitive, and, with a short history, too eager on a cell with two modes whose few runs
  in the store showed one.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from numbench.history.ingest import load_benchmarks, read_benchmarks, run_id
from numbench.history.moderation import moderate
from numbench.history.schema import SERIES_KEY

#: the family-wise false-alarm rate the gate is set to over all the cells it judges
ALPHA = 0.05
#: runs of a cell in the history (OLD and NEW left out) before it is judged by them
MIN_HISTORY = 4
#: the smallest run-to-run spread assumed (log units: 1%)
NOISE_FLOOR = 0.01
#: the past pairs the false-alarm rate is measured on, the latest first
MAX_PAIRS = 50
#: cells of one host and device the common shift and the runs' levels are taken over: over
#: fewer, one changed cell would move the median
MIN_LEVEL_CELLS = 10
#: what the common shift is taken per
LEVEL_KEY = ["host", "device"]
#: the alternating fit's rounds (cell means, then run medians): a few settle it
LEVEL_ROUNDS = 5
#: the slowdown the gate's text counts the judged cells that could show (the one the docs
#: and benchmarks/gate_pairs.py plant)
REFERENCE_SLOWDOWN = 1.2
#: ``GateResult.shifts``'s columns
SHIFT_COLUMNS = [*LEVEL_KEY, "cells", "common", "history_runs", "level_low", "level_high"]
SLOWER, FASTER, SAME, BROKEN, NO_HISTORY = "slower", "faster", "same", "broken", "no history"
#: the order the table lists its cells in: what fails the gate first
ORDER = (BROKEN, SLOWER, FASTER, NO_HISTORY, SAME)


@dataclass(frozen=True)
class GateResult:
    """One row per cell of OLD ok or NEW (``table``), one per host and device with the pair's
    common shift beside the history's run levels (``shifts``), and the gate's own figures."""

    table: pd.DataFrame
    shifts: pd.DataFrame
    judged: int
    failed: bool
    past_pairs: int
    past_failed: int


def side(where: str | os.PathLike) -> pd.DataFrame:
    """A side's cells with their run's id (per host), from a results folder or its
    benchmarks.parquet."""
    path = Path(where)
    bench = read_benchmarks(path) if path.is_file() else load_benchmarks(path)
    parts = []
    for _, cells in bench.groupby("host", sort=True):
        cells = cells.copy()
        cells["run_id"] = run_id(cells.reset_index(drop=True))
        parts.append(cells)
    return pd.concat(parts, ignore_index=True)


def history_ok(cells: pd.DataFrame, leave_out: set[str]) -> pd.DataFrame:
    """The history's ``ok`` cells with a median, the runs in ``leave_out`` left out."""
    ok = cells[(cells["status"] == "ok") & (cells["median_s"] > 0)]
    return ok[~ok["run_id"].isin(leave_out)]


def spreads(cells: pd.DataFrame, leave_out: set[str]) -> pd.DataFrame:
    """Per cell on its host: runs in the history (those in ``leave_out`` left out), the
    standard deviation of its log medians (``raw_spread``, at least ``NOISE_FLOOR``), that
    spread moderated by the other cells' of its host and device (``spread``, with ``df``
    degrees of freedom: ``moderate``) and the mean of its log medians (``log_mean``)."""
    ok = history_ok(cells, leave_out)
    logs = ok.assign(log_median=np.log(ok["median_s"].astype(float)))
    grouped = logs.groupby(SERIES_KEY)["log_median"]
    out = pd.DataFrame(
        {
            "history_runs": grouped.size(),
            "raw_spread": grouped.std(ddof=1).fillna(0.0).clip(lower=NOISE_FLOOR),
            "log_mean": grouped.mean(),
        }
    ).reset_index()
    parts = [moderate(group, MIN_LEVEL_CELLS) for _, group in out.groupby(LEVEL_KEY, sort=False)]
    columns = [*out.columns, "spread", "df"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def run_levels(logs: pd.DataFrame) -> pd.Series:
    """Each run's level in a table of log medians (a row a cell, a column a run, NaN where the
    run lacks the cell): the median over its cells of the log median less the cell's mean
    over the runs (each less its level), fitted alternately; the levels' median is 0. All 0
    below ``MIN_LEVEL_CELLS`` cells."""
    level = pd.Series(0.0, index=logs.columns)
    if len(logs) < MIN_LEVEL_CELLS:
        return level
    for _ in range(LEVEL_ROUNDS):
        effect = logs.sub(level, axis=1).mean(axis=1)
        level = logs.sub(effect, axis=0).median(axis=0).fillna(0.0)
        level -= level.median()
    return level


def common_shifts(both: pd.DataFrame, history: pd.DataFrame, leave_out: set[str]) -> pd.DataFrame:
    """Per host and device of the cells compared (``both``, with ``ratio``): how many cells
    are ok on both sides, their median ratio (``common``; NaN below ``MIN_LEVEL_CELLS``), and
    the history's runs there (``leave_out`` left out): how many, and their levels' range as
    ratios to the median level (NaN below two runs or ``MIN_LEVEL_CELLS`` cells)."""
    ok = history_ok(history, leave_out)
    rows = []
    for (host, device), group in both.groupby(LEVEL_KEY, sort=True):
        ratios = group["ratio"].dropna().astype(float)
        there = ok[(ok["host"] == host) & (ok["device"] == device)]
        logs = there.assign(log_median=np.log(there["median_s"].astype(float))).pivot_table(
            index=SERIES_KEY, columns="run_id", values="log_median", aggfunc="first"
        )
        ranged = len(logs) >= MIN_LEVEL_CELLS and logs.shape[1] >= 2
        level = run_levels(logs) if ranged else pd.Series(dtype=float)
        rows.append(
            {
                "host": host,
                "device": device,
                "cells": len(ratios),
                "common": float(ratios.median()) if len(ratios) >= MIN_LEVEL_CELLS else math.nan,
                "history_runs": int(logs.shape[1]),
                "level_low": math.exp(level.min()) if ranged else math.nan,
                "level_high": math.exp(level.max()) if ranged else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=SHIFT_COLUMNS)


def holm(p: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Holm's step-down: which of the p-values are rejected at family-wise rate ``alpha``."""
    rejected = np.zeros(len(p), dtype=bool)
    for rank, i in enumerate(np.argsort(p)):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected[i] = True
    return rejected


def judge(old: pd.DataFrame, new: pd.DataFrame, history: pd.DataFrame, margin: float):
    """The table of ``GateResult`` for OLD against NEW, with ``history`` (the store's cells)
    giving each cell's spread."""
    from scipy import stats

    leave_out = set(old["run_id"]) | set(new["run_id"])
    keep = [*SERIES_KEY, "status", "median_s"]
    both = old[keep].merge(new[keep], on=SERIES_KEY, suffixes=("_old", "_new"))
    both = both[both["status_old"] == "ok"]
    both = both.merge(spreads(history, leave_out), on=SERIES_KEY, how="left")
    both["history_runs"] = both["history_runs"].fillna(0).astype(int)
    ok = both["status_new"] == "ok"
    both["ratio"] = np.where(ok, both["median_s_new"] / both["median_s_old"], np.nan)
    judged = ok & (both["history_runs"] >= MIN_HISTORY)
    runs = both["history_runs"].clip(lower=1)
    df = both["df"].fillna(1.0).clip(lower=1)
    # NEW against OLD, and NEW against the history's mean: both must say so (module doc)
    pair_sd = both["spread"] * math.sqrt(2)
    mean_sd = both["spread"] * np.sqrt(1 + 1 / runs)
    t_pair = np.log(both["ratio"]) / pair_sd
    t_mean = (np.log(both["median_s_new"].astype(float)) - both["log_mean"]) / mean_sd
    both["p_slower"] = np.where(
        judged, np.maximum(stats.t.sf(t_pair, df), stats.t.sf(t_mean, df)), np.nan
    )
    both["p_faster"] = np.where(
        judged, np.maximum(stats.t.cdf(t_pair, df), stats.t.cdf(t_mean, df)), np.nan
    )
    # the slowdown new / old the gate would flag in each judged cell on its own: Holm's first
    # step in both tests (NEW past the history's mean by its bound, from where OLD lies)
    first = stats.t.isf(ALPHA / max(int(judged.sum()), 1), df)
    old_off = np.log(both["median_s_old"].astype(float)) - both["log_mean"]
    needed = np.maximum(first * pair_sd, first * mean_sd - old_off)
    smallest = np.maximum(np.exp(needed), margin)
    both["detectable"] = np.where(judged, smallest, np.nan)
    slower, faster = np.zeros(len(both), bool), np.zeros(len(both), bool)
    slower[judged.to_numpy()] = holm(both.loc[judged, "p_slower"].to_numpy())
    faster[judged.to_numpy()] = holm(both.loc[judged, "p_faster"].to_numpy())
    both["change"] = np.select(
        [
            ~ok,
            ~judged,
            slower & (both["ratio"] > margin),
            faster & (both["ratio"] < 1 / margin),
        ],
        [BROKEN, NO_HISTORY, SLOWER, FASTER],
        SAME,
    )
    both["rank"] = both["change"].map(ORDER.index)
    both = both.sort_values(["rank", "ratio"], ascending=[True, False], kind="stable")
    return both.drop(columns=["rank"])


def past_pairs(store, margin: float) -> tuple[int, int]:
    """(pairs, failed): the gate run on the store's own consecutive pairs of runs on one host
    with the same grid, the latest ``MAX_PAIRS``, each left out of its own history."""
    runs = store.runs.sort_values(["started_at", "run_id"], kind="stable")
    pairs = []
    for _, same in runs.groupby(["host", "config_hash"], sort=False):
        ids = list(same["run_id"])
        pairs += [(same["started_at"].iloc[i], a, b) for i, (a, b) in enumerate(zip(ids, ids[1:]))]
    pairs = sorted(pairs, reverse=True)[:MAX_PAIRS]
    failed = 0
    for _, a, b in pairs:
        old = store.cells[store.cells["run_id"] == a]
        new = store.cells[store.cells["run_id"] == b]
        table = judge(old, new, store.cells, margin)
        failed += bool(table["change"].isin([SLOWER]).any())
    return len(pairs), failed


def gate(old_where, new_where, store, margin: float) -> GateResult:
    """OLD against NEW with the history ``store`` (``numbench.history.read``)."""
    old, new = side(old_where), side(new_where)
    table = judge(old, new, store.cells, margin)
    shifts = common_shifts(table, store.cells, set(old["run_id"]) | set(new["run_id"]))
    pairs, failed = past_pairs(store, margin)
    judged = int((~table["change"].isin([NO_HISTORY, BROKEN])).sum())
    fails = bool(table["change"].isin([SLOWER, BROKEN]).any())
    return GateResult(table.reset_index(drop=True), shifts, judged, fails, pairs, failed)


def gate_text(result: GateResult, store_runs: int, margin: float) -> str:
    """The gate's verdict as Markdown: what it judged, its measured false-alarm rate, and
    every cell that is not the same speed."""
    table = result.table
    lines = [
        "## Against the history",
        "",
        f"{result.judged} cells judged against their own run-to-run spread in the history "
        f"({store_runs} runs, the two compared left out), at a family-wise false-alarm rate "
        f"of {ALPHA:g} over all of them (Holm) and a margin of {margin:g}; "
        f"{int((table['change'] == NO_HISTORY).sum())} cells have fewer than {MIN_HISTORY} "
        "runs in it and are not judged by it.",
    ]
    lines += detectable_text(table, margin)
    lines += [shift_text(row) for _, row in result.shifts.iterrows()]
    if result.past_pairs:
        lines.append(
            f"On the history's own {result.past_pairs} past pairs of consecutive runs, the gate "
            f"failed {result.past_failed} ({result.past_failed / result.past_pairs:.0%}; "
            f"set to {ALPHA:.0%})."
        )
    else:
        lines.append(
            "The history holds no past pair of runs to measure the gate's false alarms on."
        )
    shown = table[~table["change"].isin([SAME])]
    if len(shown):
        lines += [
            "",
            "| cell | host | change | new / old | history runs | spread |",
            "|---" * 6 + "|",
        ]
        for _, r in shown.iterrows():
            cell = f"{r['library']}/{r['device']} {r['operation']} {r['size']} {r['dtype']} t{r['threads']}"
            ratio = "-" if pd.isna(r["ratio"]) else f"{r['ratio']:.3f}"
            lines.append(
                f"| {_safe(cell)} | {_safe(r['host'])} | {r['change']} | {ratio} | "
                f"{r['history_runs']} | {'-' if pd.isna(r['spread']) else format(r['spread'], '.1%')} |"
            )
    verdict = "fails" if result.failed else "passes"
    lines += ["", f"The gate {verdict}."]
    return "\n".join(lines) + "\n"


def detectable_text(table: pd.DataFrame, margin: float) -> list[str]:
    """What the judged cells could show, in a sentence (none where none is judged)."""
    smallest = table["detectable"].dropna()
    if smallest.empty:
        return []
    # a ratio must be above the margin: where the margin is the bound, it is never reached
    within = int((smallest <= REFERENCE_SLOWDOWN).sum()) if REFERENCE_SLOWDOWN > margin else 0
    return [
        f"With this history, {within} of the {len(smallest)} cells judged could be flagged "
        f"at {REFERENCE_SLOWDOWN:g}x: the slowdown a judged cell would be flagged at on its "
        f"own (Holm's first step, and above the margin) is {smallest.min():.3f}x at best, "
        f"{smallest.median():.3f}x for the median cell and {smallest.quantile(0.9):.3f}x for "
        "the noisiest tenth (`detectable`)."
    ]


def shift_text(row: pd.Series) -> str:
    """A host and device's common shift beside the history's run levels, in a sentence."""
    where = f"{_safe(row['host'])}/{_safe(row['device'])}"
    if pd.isna(row["common"]):
        return (
            f"On {where}, {row['cells']} cells are ok on both sides, fewer than "
            f"{MIN_LEVEL_CELLS}: no common shift is given."
        )
    said = (
        f"On {where}, NEW read {row['common']:.3f}x OLD over its {row['cells']} cells ok on "
        "both sides (the median cell): the machine's day, or a change to every cell alike"
    )
    if pd.isna(row["level_low"]):
        return f"{said}; the history holds too few runs there to say how far its days move."
    return (
        f"{said}. The history's {row['history_runs']} runs there differed as a whole by up "
        f"to {row['level_high'] / row['level_low']:.3f}x (their levels from "
        f"{row['level_low']:.3f}x to {row['level_high']:.3f}x of the median level)."
    )


def _safe(text) -> str:
    """Text from a results folder, safe in a Markdown table cell."""
    return "".join(c if c.isprintable() and c not in "|<>`" else " " for c in str(text))


def gate_json(result: GateResult, comparison_json: str) -> str:
    """``compare --history --json``: compare's own JSON and the gate's, one document."""
    cells = json.loads(result.table.to_json(orient="records", double_precision=15))
    gated = {
        "comparison": json.loads(comparison_json),
        "history": {
            "cells_judged": result.judged,
            "failed": result.failed,
            "past_pairs": result.past_pairs,
            "past_pairs_failed": result.past_failed,
            "shifts": json.loads(result.shifts.to_json(orient="records", double_precision=15)),
            "cells": cells,
        },
    }
    return json.dumps(gated, indent=1)
