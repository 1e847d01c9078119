"""A regression gate that knows each cell's noise: ``numbench compare OLD NEW --history H``.

With a history, each cell is judged against its own run-to-run series in the store, not by
the two runs' own intervals alone, in two stages: a loose screen and a strict decision.

**What is judged.** Absolute times move with the machine (a shared host runs a whole run
slower than the next, and drifts within one). What lockstep measured does not: each round of
a paired cell is its own process beside a NumPy process, milliseconds apart, so the
machine's day falls on both. So a cell paired with the baseline (``speedups.parquet`` gives
its speedup) is judged by its *paired* log time over the baseline's, ``-log(speedup)``; the
baseline's own cells and unpaired ones, which have no partner, by their log median
*shifted* by the run's level (``run_levels`` over every cell of the host and device), so a
day that moves every cell moves none. A shifted cell cannot tell a change of every cell
alike from the machine's day: the common shift beside the history's run levels is printed
for that. Where the baseline's version differs between OLD and NEW, a paired statistic
would carry the baseline's change, so every cell paired with it is judged shifted, and the
gate says so; so is a cell that OLD or NEW has no speedup for (``statistic``).

1. **The cell's spread.** The standard deviation of its statistic over the store's runs on
   the same host (OLD's and NEW's left out, known by their content's id), at least
   ``NOISE_FLOOR``, moderated by the other cells' of its host, device and kind of statistic
   (``moderate``). Below ``MIN_HISTORY`` such runs it is not judged.
2. **The test.** A run's value is the cell's level between runs (variance ``tau^2``: the
   spread's square less the history's mean squared standard error, at least the floor's)
   plus its own run's error, whose standard error ``se`` its 95% interval gives: a run whose
   rounds disagreed says so, and its stray value is not taken for a change. ``d = x_new -
   x_old`` against ``sqrt(2 tau^2 + se_old^2 + se_new^2)``; and NEW must also be out of
   line with the history itself, ``e = x_new - m`` (m: the history's mean of n runs)
   against ``sqrt(tau^2 + se_new^2 + s^2 / n)``, each with Student's t. A cell is slower
   only where both say so (an intersection-union test: the larger p-value), so an OLD that
   was a fast outlier does not make a NEW at the history's usual level a slowdown. Here
   each side's ``se^2`` is at least the history's mean one: a run's few rounds may agree by
   chance (a cell whose processes land in one of two modes, both drawn from the slower),
   and such a run is no surer than the cell's usual ones. The screen keeps each side's own.
3. **Screen loose.** Every cell whose NEW is out of line with the history at
   ``SCREEN_ALPHA`` is *suspect*: a level that lets a 1.2x slowdown of the median cell
   through on a shared machine, and one cell in five of unchanged code too. It is the second
   test alone (``--confirm`` measures OLD against NEW), with OLD as one more run of the
   history (``screen_test``).
4. **Decide strict.** A cell is *slower* where Holm's step-down over every cell judged
   rejects it at ``ALPHA`` (the family-wise rate: the chance that a pair of unchanged runs
   fails anywhere) and its ratio is past the margin. Without ``--confirm`` the gate fails on
   those (and on *broken* cells: ok in OLD, not in NEW) and names the suspects it could not
   confirm. With ``--confirm`` every suspect and slower cell is measured again, old against
   new in lockstep, and judged at the family-wise level over those cells
   (``numbench.compare.confirm``), independent of the screen: unchanged code fails there at
   ``ALPHA`` or less.
5. **Its false-alarm rate, measured** on the store's own past pairs of consecutive runs on
   one host with the same grid, each left out of its own history. What it could catch: each
   cell's smallest slowdown the screen (``screenable``) and the decision (``detectable``, at
   least the margin) flag on its own.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from numbench.history.store import SERIES_KEY, read_benchmarks, run_id, runs_of
from numbench.stats import Z95

#: the family-wise false-alarm rate the gate is set to over all the cells it judges
ALPHA = 0.05
#: the per-cell level of the screen, by default (``compare --screen-level``): a suspect is
#: measured again with ``--confirm``; a looser screen catches more and sends more to confirm.
#: Chosen so that a 1.2x in the median cell is screened in most pairs of runs of the default
#: grid on a shared 2-core VM (``benchmarks/gate_power.py``; docs/history.md, "The history
#: gate"), where 0.05 screened it about half the time
SCREEN_ALPHA = 0.2
#: runs of a cell in the history (OLD and NEW left out) before it is judged by them
MIN_HISTORY = 4
#: the smallest run-to-run spread assumed (log units: 1%)
NOISE_FLOOR = 0.01
#: the past pairs the false-alarm rate is measured on, the latest first
MAX_PAIRS = 50
#: cells of one host and device the run levels and the common shift are taken over: over
#: fewer, one changed cell would move the median
MIN_LEVEL_CELLS = 10
#: what the run levels and the common shift are taken per
LEVEL_KEY = ["host", "device"]
#: the alternating fit's rounds (cell means, then run medians): a few settle it
LEVEL_ROUNDS = 5
#: the slowdown the gate's text counts the judged cells that could show
REFERENCE_SLOWDOWN = 1.2
#: the two kinds of statistic (module doc)
PAIRED, SHIFTED = "paired", "shifted"
#: ``GateResult.shifts``'s columns
SHIFT_COLUMNS = [*LEVEL_KEY, "cells", "common", "history_runs", "level_low", "level_high"]
SLOWER, SUSPECT, FASTER, SAME, BROKEN = "slower", "suspect", "faster", "same", "broken"
NO_HISTORY = "no history"
#: the order the table lists its cells in: what fails the gate first
ORDER = (BROKEN, SLOWER, SUSPECT, FASTER, NO_HISTORY, SAME)
#: what a side's and the history's rows need
COLUMNS = [*SERIES_KEY, "run_id", "status", "median_s", "ci_low_s", "ci_high_s", "speedup"]
COLUMNS += ["speedup_ci_low", "speedup_ci_high", "paired_with"]


@dataclass(frozen=True)
class GateResult:
    """One row per cell of OLD ok or NEW (``table``), one per host and device with the pair's
    common shift beside the history's run levels (``shifts``), and the gate's own figures;
    ``baseline_changes``: per host, the baseline whose version changed between OLD and NEW."""

    table: pd.DataFrame
    shifts: pd.DataFrame
    judged: int
    failed: bool
    past_pairs: int
    past_failed: int
    baseline_changes: dict[str, str] = field(default_factory=dict)
    screen_level: float = SCREEN_ALPHA


def side(where: str | os.PathLike) -> pd.DataFrame:
    """A side's cells as the store keeps them, with their run's id (per host): from a results
    folder with each paired cell's speedup (its speedups.parquet), or from a benchmarks
    table of any name (no speedups: every cell is judged shifted)."""
    path = Path(where)
    if path.is_file():
        bench = read_benchmarks(path)
        parts = []
        for _, cells in bench.groupby("host", sort=True):
            cells = cells.reset_index(drop=True)
            parts.append(cells.assign(run_id=run_id(cells)))
        out = pd.concat(parts, ignore_index=True)
    else:
        out = pd.concat([cells.to_pandas() for _, cells in runs_of(path)], ignore_index=True)
    for column in [*COLUMNS, "library_version"]:
        if column not in out.columns:
            out[column] = None
    return out


def history_ok(cells: pd.DataFrame, leave_out: set[str]) -> pd.DataFrame:
    """The history's ``ok`` cells with a median, the runs in ``leave_out`` left out."""
    ok = cells[(cells["status"] == "ok") & (cells["median_s"] > 0)]
    return ok[~ok["run_id"].isin(leave_out)]


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


def log_medians(cells: pd.DataFrame) -> pd.DataFrame:
    """A row a cell, a column a run: the log medians of ``cells`` (ok, with a median)."""
    ok = cells[(cells["status"] == "ok") & (cells["median_s"] > 0)]
    return ok.assign(log_median=np.log(ok["median_s"].astype(float))).pivot_table(
        index=SERIES_KEY, columns="run_id", values="log_median", aggfunc="first"
    )


def shifted(cells: pd.DataFrame) -> pd.Series:
    """Each ok row's log median less its run's level over every ok cell of its host and
    device (``run_levels``); NaN elsewhere."""
    out = pd.Series(np.nan, index=cells.index)
    ok = cells[(cells["status"] == "ok") & (cells["median_s"] > 0)]
    for _, group in ok.groupby(LEVEL_KEY, sort=False):
        level = run_levels(log_medians(group))
        logs = np.log(group["median_s"].astype(float))
        out.loc[group.index] = logs - group["run_id"].map(level).astype(float)
    return out


def paired(cells: pd.DataFrame) -> pd.Series:
    """Each ok row's paired statistic, ``-log(speedup)`` (its log time over its lockstep
    baseline's); NaN where it has no speedup."""
    speedup = pd.to_numeric(cells["speedup"], errors="coerce")
    good = (cells["status"] == "ok") & (speedup > 0)
    return pd.Series(np.where(good, -np.log(speedup.where(good, 1.0)), np.nan), index=cells.index)


def baseline_changes(old: pd.DataFrame, new: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (host, baseline as ``LIBRARY/DEVICE``) paired with in NEW, where the baseline's
    version differs between OLD and NEW: ``"numpy 2.4.6 to 2.5.0"``."""
    changed = {}
    for (host, partner), _ in new.dropna(subset=["paired_with"]).groupby(
        ["host", "paired_with"], sort=True
    ):
        library, _, device = str(partner).partition("/")
        versions = []
        for frame in (old, new):
            rows = frame[
                (frame["host"] == host)
                & (frame["library"] == library)
                & (frame["device"] == device)
            ]
            found = rows["library_version"].dropna()
            versions.append(str(found.iloc[0]) if len(found) else None)
        if None not in versions and versions[0] != versions[1]:
            changed[(host, str(partner))] = f"{library} {versions[0]} to {versions[1]}"
    return changed


def statistics(old, new, history, leave_out) -> tuple[pd.DataFrame, dict]:
    """The rows of the history (``leave_out`` left out), OLD and NEW, each with its
    statistic ``x`` and the kind its cell is judged by (``kind``: module doc)."""
    hist = history_ok(history, leave_out)
    every = pd.concat(
        [hist.assign(part="history"), old.assign(part="old"), new.assign(part="new")],
        ignore_index=True,
    )
    every["x_shifted"] = shifted(every)
    every["x_paired"] = paired(every)
    changed = baseline_changes(old, new)
    sides = every[every["part"] != "history"]
    has = sides["x_paired"].notna().groupby([sides[k] for k in SERIES_KEY]).sum() == 2
    every = every.merge(has.rename("has_pair").reset_index(), on=SERIES_KEY, how="left")
    moved = pd.Series(list(zip(every["host"], every["paired_with"].astype(str)))).isin(changed)
    moved = moved.to_numpy()
    every["kind"] = np.where(every["has_pair"].fillna(False) & ~moved, PAIRED, SHIFTED)
    every["x"] = np.where(every["kind"] == PAIRED, every["x_paired"], every["x_shifted"])
    every["se"] = standard_errors(every)
    return every, {host: text for (host, _), text in changed.items()}


def standard_errors(every: pd.DataFrame) -> pd.Series:
    """Each row's own standard error of ``x``, from its run's 95% interval: of the speedup
    where it is judged paired, of the median where shifted; 0 where it has none."""
    low, high = "speedup_ci_low", "speedup_ci_high"
    paired_ = every["kind"] == PAIRED
    lo = pd.to_numeric(every[low].where(paired_, every["ci_low_s"]), errors="coerce")
    hi = pd.to_numeric(every[high].where(paired_, every["ci_high_s"]), errors="coerce")
    good = (lo > 0) & (hi >= lo)
    width = np.log(hi.where(good, 1.0) / lo.where(good, 1.0))
    return pd.Series(np.where(good, width / (2 * Z95), 0.0), index=every.index)


def spreads(hist: pd.DataFrame) -> pd.DataFrame:
    """Per cell on its host, over the history's rows with a statistic: runs
    (``history_runs``), the standard deviation of ``x`` (``raw_spread``, at least
    ``NOISE_FLOOR``), moderated by the other cells' of its host, device and kind (``spread``,
    with ``df``: ``moderate``), and the mean (``x_mean``)."""
    hist = hist.dropna(subset=["x"]).assign(se2=lambda h: h["se"] ** 2)
    grouped = hist.groupby([*SERIES_KEY, "kind"])
    out = pd.DataFrame(
        {
            "history_runs": grouped["x"].size(),
            "raw_spread": grouped["x"].std(ddof=1).fillna(0.0).clip(lower=NOISE_FLOOR),
            "x_mean": grouped["x"].mean(),
            "mean_se2": grouped["se2"].mean(),
        }
    ).reset_index()
    key = [*LEVEL_KEY, "kind"]
    parts = [moderate(group, MIN_LEVEL_CELLS) for _, group in out.groupby(key, sort=False)]
    columns = [*out.columns, "spread", "df"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


# -- each cell's run-to-run spread moderated by the other cells': a few runs say little of one
# cell's spread

#: the most degrees of freedom the other cells' spreads lend a cell (``moderate``): where
#: the cells' spreads vary no more than chance, the prior alone would be taken as exact
MAX_PRIOR_DF = 100.0


def moderate(group: pd.DataFrame, min_cells: int) -> pd.DataFrame:
    """Each cell's variance moderated by the others' of one host and device (Smyth's empirical
    Bayes, as limma's ``squeezeVar``): the log variances of cells with d = runs - 1 >= 1
    degrees of freedom give a scaled inverse-chi-square prior, ``s0^2`` with ``d0`` degrees
    of freedom, fitted by moments; each cell's variance becomes ``(d0 s0^2 + d s^2) / (d0 +
    d)`` with ``d0 + d`` degrees of freedom. A few runs say little of a cell's variance: four
    runs of a cell in one of its two modes look steady, and Student's t with 3 degrees of
    freedom asks for a huge ratio of every cell. Moderation draws the lucky small spreads up
    and gives every cell the degrees of freedom that the other cells' spreads lend. It only
    ever raises a spread: a cell whose own runs spread wider than the prior keeps its own
    (moderated down, a cell whose worker processes land in one of two modes far apart was
    called slower between runs of unchanged code: docs/history.md, "Versions and the
    regression gate"). Fewer than ``min_cells`` cells, or spreads that vary more than the
    chi-square alone would: none (d0 = 0). Spreads that vary less: every cell gets the
    prior's (d0 capped at ``MAX_PRIOR_DF``)."""
    from scipy import special

    group = group.copy()
    d = (group["history_runs"] - 1).astype(float)
    var = group["raw_spread"].astype(float) ** 2
    usable = d >= 1
    d0, s0 = 0.0, 0.0
    if int(usable.sum()) >= min_cells:
        half = d[usable] / 2
        e = np.log(var[usable]) - special.digamma(half) + np.log(half)
        excess = e.var(ddof=1) - special.polygamma(1, half).mean()
        d0 = MAX_PRIOR_DF if excess <= 0 else min(2 * trigamma_inverse(excess), MAX_PRIOR_DF)
        s0 = math.exp(e.mean() + special.digamma(d0 / 2) - math.log(d0 / 2))
    moderated = np.sqrt((d0 * s0 + d * var) / (d0 + d).clip(lower=1e-12))
    # only ever up: a cell whose own runs spread wider than the prior keeps its own spread
    group["spread"] = np.maximum(moderated, group["raw_spread"])
    group["df"] = (d0 + d).clip(lower=1)
    return group


def trigamma_inverse(x: float) -> float:
    """The y with trigamma(y) = x, by Newton's method from limma's starting point."""
    from scipy import special

    y = 0.5 + 1 / x
    for _ in range(50):
        tri = special.polygamma(1, y)
        step = tri * (1 - tri / x) / special.polygamma(2, y)
        y += step
        if -step / y < 1e-8:
            break
    return float(y)


def common_shifts(both: pd.DataFrame, history: pd.DataFrame, leave_out: set[str]) -> pd.DataFrame:
    """Per host and device of the cells compared (``both``, with ``time_ratio``): how many
    cells are ok on both sides, their median ratio of absolute times (``common``; NaN below
    ``MIN_LEVEL_CELLS``), and the history's runs there (``leave_out`` left out): how many,
    and their levels' range as ratios to the median level (NaN below two runs or
    ``MIN_LEVEL_CELLS`` cells)."""
    ok = history_ok(history, leave_out)
    rows = []
    for (host, device), group in both.groupby(LEVEL_KEY, sort=True):
        ratios = group["time_ratio"].dropna().astype(float)
        logs = log_medians(ok[(ok["host"] == host) & (ok["device"] == device)])
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


def paired_sides(every: pd.DataFrame) -> pd.DataFrame:
    """OLD's ok cells beside NEW's, with both statistics, their history's spread and the
    ratios new / old of the statistic (``ratio``) and of the absolute times
    (``time_ratio``)."""
    keep = [*SERIES_KEY, "kind", "status", "median_s", "x", "se"]
    old = every.loc[every["part"] == "old", keep]
    new = every.loc[every["part"] == "new", keep].drop(columns="kind")
    both = old.merge(new, on=SERIES_KEY, suffixes=("_old", "_new"))
    both = both[both["status_old"] == "ok"]
    key = [*SERIES_KEY, "kind"]
    both = both.merge(spreads(every[every["part"] == "history"]), on=key, how="left")
    # the screen's history: OLD is one more run of it (NEW is judged against them all)
    screen = spreads(every[every["part"].isin(["history", "old"])])
    screen = screen.rename(columns={c: f"screen_{c}" for c in screen.columns if c not in key})
    both = both.merge(screen, on=key, how="left")
    for column in ("history_runs", "screen_history_runs"):
        both[column] = both[column].fillna(0).astype(int)
    ok = (both["status_new"] == "ok") & both["x_new"].notna() & both["x_old"].notna()
    both["ok_new"] = ok
    both["ratio"] = np.where(ok, np.exp(both["x_new"] - both["x_old"]), np.nan)
    times_ok = both["status_new"] == "ok"
    both["time_ratio"] = np.where(times_ok, both["median_s_new"] / both["median_s_old"], np.nan)
    return both


def screen_test(both: pd.DataFrame):
    """The screen's (cells it judges, t, degrees of freedom, standard deviation): NEW against
    the mean of the history and OLD (``screen_*``), as the decision's second test."""
    runs = both["screen_history_runs"]
    screened = both["ok_new"] & (runs >= MIN_HISTORY)
    spread2 = both["screen_spread"].astype(float) ** 2
    tau2 = np.maximum(spread2 - both["screen_mean_se2"].fillna(0.0), NOISE_FLOOR**2)
    sd = np.sqrt(tau2 + both["se_new"] ** 2 + spread2 / runs.clip(lower=1))
    t = (both["x_new"] - both["screen_x_mean"]) / sd
    return screened, t, both["screen_df"].fillna(1.0).astype(float).clip(lower=1), sd


def judge(
    old: pd.DataFrame,
    new: pd.DataFrame,
    history: pd.DataFrame,
    margin: float,
    screen_level: float = SCREEN_ALPHA,
):
    """(table, baseline changes) of ``GateResult`` for OLD against NEW, with ``history``
    (the store's cells) giving each cell's series, screened at ``screen_level`` a cell."""
    from scipy import stats

    leave_out = set(old["run_id"]) | set(new["run_id"])
    every, changed = statistics(old, new, history, leave_out)
    both = paired_sides(every)
    ok = both["ok_new"]
    judged = ok & (both["history_runs"] >= MIN_HISTORY)
    runs = both["history_runs"].clip(lower=1)
    df = both["df"].fillna(1.0).astype(float).clip(lower=1)
    # NEW against OLD, and NEW against the history's mean: both must say so (module doc)
    # each run's value is the cell's level between runs (tau) plus its own run's error (se):
    # the history's spread holds both; a side's own interval says how far its run may stray
    spread2 = both["spread"].astype(float) ** 2
    usual = both["mean_se2"].fillna(0.0)
    tau2 = np.maximum(spread2 - usual, NOISE_FLOOR**2)
    # the decision takes a side's own error as at least the cell's usual one in the history:
    # two rounds that agree by chance (a cell whose processes land in one of two modes) are
    # no surer than its usual runs; the screen keeps each side's own, and --confirm decides
    se_old2 = np.maximum(both["se_old"] ** 2, usual)
    se_new2 = np.maximum(both["se_new"] ** 2, usual)
    pair_sd = np.sqrt(2 * tau2 + se_old2 + se_new2)
    mean_sd = np.sqrt(tau2 + se_new2 + spread2 / runs)
    t_pair = (both["x_new"] - both["x_old"]) / pair_sd
    t_mean = (both["x_new"] - both["x_mean"]) / mean_sd
    p_slower = np.maximum(stats.t.sf(t_pair, df), stats.t.sf(t_mean, df))
    p_faster = np.maximum(stats.t.cdf(t_pair, df), stats.t.cdf(t_mean, df))
    both["p_slower"] = np.where(judged, p_slower, np.nan)
    both["p_faster"] = np.where(judged, p_faster, np.nan)
    # the slowdown new / old each judged cell would be flagged at on its own, by the screen
    # and by Holm's first step: NEW past the history's mean by its bound, from where OLD lies
    old_off = both["x_old"] - both["x_mean"]
    first = stats.t.isf(ALPHA / max(int(judged.sum()), 1), df)
    strict = np.exp(np.maximum(first * pair_sd, first * mean_sd - old_off))
    both["detectable"] = np.where(judged, np.maximum(strict, margin), np.nan)
    slower, faster = np.zeros(len(both), bool), np.zeros(len(both), bool)
    slower[judged.to_numpy()] = holm(both.loc[judged, "p_slower"].to_numpy())
    faster[judged.to_numpy()] = holm(both.loc[judged, "p_faster"].to_numpy())
    # the screen asks NEW against the history and OLD: --confirm measures OLD against NEW
    screened, t_screen, screen_df, screen_sd = screen_test(both)
    suspect = screened & (stats.t.sf(t_screen, screen_df) < screen_level)
    loose = np.exp(stats.t.isf(screen_level, screen_df) * screen_sd)
    both["screenable"] = np.where(screened, loose, np.nan)
    both["change"] = np.select(
        [
            both["status_new"] != "ok",
            ~screened,
            judged & slower & (both["ratio"] > margin),
            judged & faster & (both["ratio"] < 1 / margin),
            suspect,
        ],
        [BROKEN, NO_HISTORY, SLOWER, FASTER, SUSPECT],
        SAME,
    )
    both["statistic"] = both.pop("kind")
    both["rank"] = both["change"].map(ORDER.index)
    both = both.sort_values(["rank", "ratio"], ascending=[True, False], kind="stable")
    return both.drop(columns=["rank", "ok_new", "status_old"]), changed


#: ``past_pairs``' answers in this process, by the store's content and the margin: they
#: depend on nothing else, and a script that gates many pairs against one store (the
#: benchmarks' gate_pairs, gate_power) would judge the same past pairs again on every call
_PAST_PAIRS: dict[tuple[str, float], tuple[int, int]] = {}


def past_pairs(store, margin: float) -> tuple[int, int]:
    """(pairs, failed): the gate's decision without ``--confirm`` on the store's own
    consecutive pairs of runs on one host with the same grid, the latest ``MAX_PAIRS``, each
    left out of its own history. Answered once a process for a store's content."""
    try:
        digest = hashlib.sha256(repr(list(store.cells.columns)).encode())
        for frame in (store.cells, store.runs):
            digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    except TypeError:  # a column pandas cannot hash: judged afresh
        return _judge_past_pairs(store, margin)
    key = (digest.hexdigest(), margin)
    if key not in _PAST_PAIRS:
        if len(_PAST_PAIRS) >= 16:
            _PAST_PAIRS.clear()
        _PAST_PAIRS[key] = _judge_past_pairs(store, margin)
    return _PAST_PAIRS[key]


def _judge_past_pairs(store, margin: float) -> tuple[int, int]:
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
        table, _ = judge(old, new, store.cells, margin)
        failed += bool(table["change"].isin([SLOWER]).any())
    return len(pairs), failed


def gate(
    old_where, new_where, store, margin: float, screen_level: float = SCREEN_ALPHA
) -> GateResult:
    """OLD against NEW with the history ``store`` (``numbench.history.read``)."""
    if not 0 < screen_level < 1:
        raise ValueError(f"the screen's level must lie between 0 and 1, not {screen_level}")
    old, new = side(old_where), side(new_where)
    table, changed = judge(old, new, store.cells, margin, screen_level)
    shifts = common_shifts(table, store.cells, set(old["run_id"]) | set(new["run_id"]))
    pairs, failed = past_pairs(store, margin)
    judged = int((~table["change"].isin([NO_HISTORY, BROKEN])).sum())
    fails = bool(table["change"].isin([SLOWER, BROKEN]).any())
    table = table.reset_index(drop=True)
    return GateResult(table, shifts, judged, fails, pairs, failed, changed, screen_level)
