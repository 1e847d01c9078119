"""How honest are the speedup intervals? (a benchmark, not a test)

Reads the two runs kept by ``reproducibility.py --keep DIR`` (DIR/a and DIR/b, each a
``results/`` folder) and, for every paired speedup, asks how often run B's speedup lies
inside run A's interval, and how wide A's interval is, for:

- the two-level bootstrap the speedups table uses (``speedups.parquet``);
- a Student t interval over the cell's own rounds (per-round log ratios of the paired
  baseline's median to the cell's);
- a moderated t: each cell's round variance shrunk toward the whole grid's, with a prior
  fitted to the grid's variances (empirical Bayes, Smyth 2004, "Linear models and empirical
  Bayes methods for assessing differential expression"), at 95% and at 90%.

It also re-aggregates both runs' speedups and crossovers with the round floor's ``s0`` taken
as the plain median of the cells' round standard deviations (the estimator before
``numbench.stats.typical_sd``), and prints the reproducibility figures both ways; and again
with each process's and each side's 25th or 10th percentile, or minimum, of the samples in
place of the median (a what-if: the stopping rule ran with the median).

    .venv/bin/python benchmarks/intervals.py DIR
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import _report  # noqa: F401  (puts the package's src on the path)
import numpy as np
import pandas as pd
from reproducibility import crossover_figures, speedup_figures
from scipy import optimize, special, stats

import numbench.analyse.speedups as speedups_module
import numbench.stats as stats_module
from numbench.analyse.crossovers import find_crossovers
from numbench.analyse.speedups import compute_speedups, in_doubt, round_log_ratios
from numbench.cells import KEY
from numbench.config import default_margin
from numbench.stats import verdict


def cell_round_ratios(results: Path) -> dict[tuple, np.ndarray]:
    """Per paired ok cell: log(median baseline / median own) of each round (latency)."""
    out = {}
    for path in sorted((results / "cells").rglob("*.parquet")):
        cell = pd.read_parquet(path)
        if (cell["status"] != "ok").any() or cell["paired_with"].isna().all():
            continue
        cell = cell[cell["mode"] == "latency"] if "mode" in cell else cell
        rounds = [rnd for _, rnd in cell.groupby("replicate")]
        base = [r[r["role"] == "baseline"]["seconds"].to_numpy() for r in rounds]
        own = [r[r["role"] == "measured"]["seconds"].to_numpy() for r in rounds]
        if not all(len(b) and len(o) for b, o in zip(base, own, strict=True)):
            continue
        ratios = round_log_ratios(base, own)
        first = cell.iloc[0]
        out[tuple(first[k] for k in KEY)] = ratios
    return out


def fit_prior(s2: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """(d0, s0^2) of a scaled inverse chi-square prior of the variances (Smyth's moments)."""
    e = np.log(np.maximum(s2, 1e-12)) - special.digamma(d / 2) + np.log(d / 2)
    excess = e.var(ddof=1) - special.polygamma(1, d / 2).mean()
    if excess <= 0:
        return float("inf"), float(np.exp(e.mean()))
    d0 = 2 * optimize.brentq(lambda x: special.polygamma(1, x) - excess, 1e-6, 1e6)
    return d0, float(np.exp(e.mean() + special.digamma(d0 / 2) - np.log(d0 / 2)))


def median_sd_floor(spreads: list[tuple[float, int]]) -> float:
    """s0 as it was: the median of the cells' round standard deviations."""
    sds = [np.sqrt(v) for v, _ in spreads if np.isfinite(v)]
    return float(np.median(sds)) if sds else 0.0


def reaggregate(results: Path, margin: float, floor) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(speedups, crossovers, s0 of each device) of one kept run, aggregated again with the
    given s0 rule."""
    table = pd.read_parquet(results / "speedups.parquet")
    library, device = table[["baseline_library", "baseline_device"]].iloc[0]
    kept, seen = speedups_module.round_floor, []

    def recorded(spreads):
        seen.append(floor(spreads))
        return seen[-1]

    speedups_module.round_floor = recorded
    try:
        sp = compute_speedups(
            pd.read_parquet(results / "benchmarks.parquet"),
            pd.read_parquet(results / "samples.parquet"),
            library,
            device,
            margin,
        )
    finally:
        speedups_module.round_floor = kept
    return sp, find_crossovers(sp), "/".join(f"{v:.4f}" for v in seen)


def estimators(root: Path, margin: float) -> None:
    """The reproducibility figures with s0 from typical_sd (today) and the median SD (before)."""
    print(
        "\n| s0 of the round floor | s0 in A, B | B inside A | A inside B | median half-width "
        "| identical verdicts | reversed | identical crossover kinds | sizes inside |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, floor in (
        ("typical_sd (chi-square scaled median of variances)", speedups_module.round_floor),
        ("median of the cells' round SDs (before)", median_sd_floor),
    ):
        (sp_a, cr_a, s0_a), (sp_b, cr_b, s0_b) = (
            reaggregate(root / s, margin, floor) for s in "ab"
        )
        ab, ba = speedup_figures(sp_a, sp_b, margin), speedup_figures(sp_b, sp_a, margin)
        cr = crossover_figures(cr_a, cr_b)
        print(
            f"| {label} | {s0_a}, {s0_b} | {ab['inside'] / ab['n']:.0%} | {ba['inside'] / ba['n']:.0%} "
            f"| {ab['half_width_median']:.1%} | {ab['same_verdict']} of {ab['n']} "
            f"| {ab['reversed']} | {cr['same_kind']} of {cr['n']} | {cr['mutual']} of {cr['sized']} |"
        )


class _LowQuantile:
    """numpy, with ``median`` and ``nanmedian`` taking the quantile ``q`` instead."""

    def __init__(self, q: float):
        self.q = q

    def __getattr__(self, name):
        return getattr(np, name)

    def median(self, x, axis=None):
        return np.quantile(x, self.q, axis=axis)

    def nanmedian(self, x, axis=None):
        return np.nanquantile(x, self.q, axis=axis)


@contextlib.contextmanager
def statistic(q: float):
    """Speedups of each process's and each side's quantile ``q`` of the samples, not the
    median: the point, the bootstrap and the rounds' log ratios (``typical_sd`` keeps its
    median of the cells' variances)."""
    kept = stats_module.np, speedups_module.np, speedups_module.round_floor
    real_floor = speedups_module.round_floor

    def floor(spreads):
        stats_module.np = np
        try:
            return real_floor(spreads)
        finally:
            stats_module.np = _LowQuantile(q)

    stats_module.np = speedups_module.np = _LowQuantile(q)
    speedups_module.round_floor = floor
    try:
        yield
    finally:
        stats_module.np, speedups_module.np, speedups_module.round_floor = kept


def quantiles(root: Path, margin: float) -> None:
    """The reproducibility figures with a low quantile of the samples in place of the median:
    the minimum resists a machine that slows a process's samples now and then (Chen and
    Revels, 2016, "Robust benchmarking in noisy environments"), at the cost of the median's
    meaning. Re-aggregated offline: the stopping rule ran with the median."""
    print(
        "\n| statistic | B inside A | A inside B | median half-width | identical verdicts "
        "| reversed | identical crossover kinds | sizes inside | verdicts in doubt in A, B |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, q in (
        ("median", 0.5),
        ("25th percentile", 0.25),
        ("10th percentile", 0.1),
        ("minimum", 0.0),
    ):
        runs = []
        with statistic(q):
            for side in "ab":
                bench = pd.read_parquet(root / side / "benchmarks.parquet")
                samples = pd.read_parquet(root / side / "samples.parquet")
                sp = compute_speedups(bench, samples, "numpy", "cpu", margin)
                runs.append((sp, find_crossovers(sp)))
        (sp_a, cr_a), (sp_b, cr_b) = runs
        ab, ba = speedup_figures(sp_a, sp_b, margin), speedup_figures(sp_b, sp_a, margin)
        cr = crossover_figures(cr_a, cr_b)
        doubt = [int(in_doubt(sp).sum()) for sp in (sp_a, sp_b)]
        print(
            f"| {label} | {ab['inside'] / ab['n']:.0%} | {ba['inside'] / ba['n']:.0%} "
            f"| {ab['half_width_median']:.1%} | {ab['same_verdict']} of {ab['n']} "
            f"| {ab['reversed']} | {cr['same_kind']} of {cr['n']} | {cr['mutual']} of {cr['sized']} "
            f"| {doubt[0]}, {doubt[1]} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kept", help="the --keep folder of reproducibility.py (a/, b/)")
    root = Path(parser.parse_args().kept)
    margin = default_margin()
    rounds = cell_round_ratios(root / "a")
    a, b = (pd.read_parquet(root / s / "speedups.parquet").set_index(list(KEY)) for s in "ab")
    keys = [k for k in rounds if k in a.index and k in b.index and len(rounds[k]) >= 2]
    a, b = a.loc[keys], b.loc[keys]
    log_a, log_b = np.log(a["speedup"].to_numpy()), np.log(b["speedup"].to_numpy())
    print(f"{len(keys)} paired speedups with 2 or more rounds in A")
    print(f"median |log A - log B|: {np.median(np.abs(log_a - log_b)):.3f}")

    rows = []
    inside = (b["speedup"] >= a["speedup_ci_low"]) & (b["speedup"] <= a["speedup_ci_high"])
    half = (a["speedup_ci_high"] - a["speedup_ci_low"]) / 2 / a["speedup"]
    label = "speedups.parquet (two-level bootstrap, and the round floor where it has one)"
    rows.append((label, inside.mean(), half.median()))
    s2 = np.array([rounds[k].var(ddof=1) for k in keys])
    d = np.array([len(rounds[k]) - 1 for k in keys])
    d0, s02 = fit_prior(s2, d)
    print(f"prior: d0 {d0:.2f}, s0 {np.sqrt(s02):.3f} (median cell s {np.sqrt(np.median(s2)):.3f})")
    moderated = (d0 * s02 + d * s2) / (d0 + d) if np.isfinite(d0) else np.full(len(d), s02)
    for label, var, df, level in (
        ("Student t over the cell's rounds, 95%", s2, d, 0.95),
        ("moderated t, 95%", moderated, d0 + d, 0.95),
        ("moderated t, 90%", moderated, d0 + d, 0.90),
    ):
        h = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(var / (d + 1))
        rows.append((label, np.mean(np.abs(log_b - log_a) <= h), np.median(np.expm1(h))))
    # verdicts with moderated 95% intervals in both runs, against the table's
    rounds_b = cell_round_ratios(root / "b")
    both = [i for i, k in enumerate(keys) if len(rounds_b.get(k, [])) >= 2]
    verdicts = []
    for rr, log in ((rounds, log_a), (rounds_b, log_b)):
        ks = [keys[i] for i in both]
        v2 = np.array([rr[k].var(ddof=1) for k in ks])
        dd = np.array([len(rr[k]) - 1 for k in ks])
        p0, q0 = fit_prior(v2, dd)
        mod = (p0 * q0 + dd * v2) / (p0 + dd) if np.isfinite(p0) else np.full(len(dd), q0)
        h = stats.t.ppf(0.975, p0 + dd) * np.sqrt(mod / (dd + 1))
        verdicts.append(
            [
                verdict(np.exp(x), np.exp(x - w), np.exp(x + w), margin)
                for x, w in zip(log[both], h, strict=True)
            ]
        )
    same = sum(x == y for x, y in zip(*verdicts, strict=True))
    table = int((a["verdict"].to_numpy()[both] == b["verdict"].to_numpy()[both]).sum())
    print(
        f"identical verdicts of {len(both)}: {table} with the table's intervals, "
        f"{same} with moderated 95% intervals in both runs (margin {margin:g})"
    )
    print("\n| speedup interval | B inside A's interval | median half-width |\n|---|---|---|")
    for label, share, width in rows:
        print(f"| {label} | {share:.0%} | {width:.1%} |")
    estimators(root, margin)
    quantiles(root, margin)


if __name__ == "__main__":
    main()
