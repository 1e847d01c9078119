"""Where each cell's series stepped: change points over the runs of the store.

A cell's series is its ``ok`` medians on one host, run after run (oldest first). As asv does
(``asv.step_detect``), the series is fitted with piecewise-constant segments under a penalty
per segment, here by ruptures' ``KernelCPD`` with the linear kernel (the squared-error cost,
searched exactly by PELT, in C) on the log of the medians, so a step is a factor:

1. **Scale.** The log medians are divided by the series' noise: the larger of the spread of
   successive differences (median absolute difference / (0.6745 * sqrt 2): robust to the
   steps themselves and to a single outlier), the cells' own intervals (the median of their
   half-widths / 1.96), and ``NOISE_FLOOR``. A noisy cell needs a larger step to show one.
2. **Outliers capped.** Each point is held within ``OUTLIER_CAP`` noise units of the running
   median of five: one disturbed run cannot make a segment of its own, while a real step
   (two runs or more) moves the running median with it.
3. **Fit.** Segments of at least ``MIN_SEGMENT`` runs (a step is named once three runs show
   it), penalty ``penalty(n)`` per step. Where the scatter left around the fitted segments
   is larger than the noise of 1 (a cell with two modes), the series is scaled by that
   scatter and fitted again.
4. **Keep what matters.** A step is kept only when the ratio of the segments' geometric means
   passes the margin (as ``compare``'s verdicts) and its 95% interval (the noise over the
   two segments' lengths) excludes 1.

A cell paired with the baseline has a second series, its *paired* one: its time over its
lockstep NumPy partner's (``1 / speedup``), which the machine's days do not move, so a step
hidden in its times by the machine's days can show there. Its steps are found the same way,
on that series and its intervals, and say ``measure: paired``.

Unchanged code should show no step: the constants are tuned for that on synthetic noise and
the false-alarm rate measured by ``benchmarks/history_false_alarms.py`` (docs/results-history.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from numbench.history.store import SERIES_KEY
from numbench.stats import Z95

#: runs on each side of a step, at least: two runs out of line and back (a busy spell) are no
#: step (seen on a busy 2-core machine, docs/history.md "The history store")
MIN_SEGMENT = 3
#: the smallest noise assumed (log units: 1%), so that a series of near-equal medians does
#: not make every wobble a step
NOISE_FLOOR = 0.01
#: how far a point may lie from its running median, in noise units
OUTLIER_CAP = 4.0
#: the running median's window (runs)
RUNNING_WINDOW = 5
#: PELT's penalty per step on the standardised series: ``PENALTY_PER_LOG * log(n)``, at least
#: ``PENALTY_MIN`` (a BIC-like penalty raised until unchanged series show none)
PENALTY_PER_LOG = 4.0
PENALTY_MIN = 16.0
#: what sets the runs of a host apart (``run_differences``)
FINGERPRINT = ("cpu_model", "cpu_count", "ram_gb", "kernel", "governor", "python_version")
MAD_TO_SD = 0.6745


def penalty(n: int) -> float:
    return max(PENALTY_MIN, PENALTY_PER_LOG * math.log(n))


@dataclass(frozen=True)
class Step:
    """A step at position ``index`` of a series (the first point after it): the geometric
    means before and after, their ratio (after / before) and its 95% interval."""

    index: int
    before_s: float
    after_s: float
    ratio: float
    ratio_low: float
    ratio_high: float


def noise(log_medians: np.ndarray, half_widths: np.ndarray) -> float:
    """The series' noise in log units (see the module's notes, 1)."""
    diffs = np.abs(np.diff(log_medians))
    successive = float(np.median(diffs)) / (MAD_TO_SD * math.sqrt(2)) if len(diffs) else 0.0
    own = np.nanmedian(half_widths) / Z95 if np.isfinite(half_widths).any() else 0.0
    return max(successive, float(own), NOISE_FLOOR)


def _capped(z: np.ndarray) -> np.ndarray:
    running = pd.Series(z).rolling(RUNNING_WINDOW, center=True, min_periods=1).median()
    return np.clip(z, running - OUTLIER_CAP, running + OUTLIER_CAP).to_numpy()


def _fit(y: np.ndarray, sd: float) -> list[int]:
    """The segments' bounds ([0, ..., n]) of the PELT fit of ``y`` in units of ``sd``."""
    import ruptures

    z = _capped(y / sd)
    fit = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT).fit(z.reshape(-1, 1))
    return [0, *fit.predict(pen=penalty(len(y)))]


def _scatter(y: np.ndarray, bounds: list[int]) -> float:
    """The standard deviation of ``y`` around its segments' means (segments' means taken
    out of the degrees of freedom)."""
    residuals = np.concatenate([y[a:b] - y[a:b].mean() for a, b in zip(bounds, bounds[1:])])
    free = len(y) - (len(bounds) - 1)
    return float(math.sqrt((residuals**2).sum() / free)) if free > 0 else 0.0


def steps(medians, ci_low=None, ci_high=None, margin: float = 1.1) -> list[Step]:
    """The steps of one series of medians (seconds, oldest first); ``ci_low``/``ci_high``:
    each median's interval, for the noise (optional)."""
    y = np.log(np.asarray(medians, dtype=float))
    n = len(y)
    if n < 2 * MIN_SEGMENT:
        return []
    half = np.full(n, np.nan)
    if ci_low is not None and ci_high is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            half = (np.log(np.asarray(ci_high, float)) - np.log(np.asarray(ci_low, float))) / 2
    sd = noise(y, half)
    bounds = _fit(y, sd)
    # the scatter left around the fitted segments: a series with two modes, or noisier
    # than its successive differences said, needs larger steps (fitted again with it)
    scatter = _scatter(y, bounds)
    if scatter > sd:
        sd = scatter
        bounds = _fit(y, sd)
    found = []
    for start, at, end in zip(bounds, bounds[1:], bounds[2:], strict=False):
        before, after = y[start:at], y[at:end]
        diff = float(after.mean() - before.mean())
        se = sd * math.sqrt(1 / len(before) + 1 / len(after))
        ratio, low, high = math.exp(diff), math.exp(diff - Z95 * se), math.exp(diff + Z95 * se)
        if max(ratio, 1 / ratio) > margin and (low > 1 or high < 1):
            b, a = math.exp(before.mean()), math.exp(after.mean())
            found.append(Step(at, b, a, ratio, low, high))
    return found


def _versions(row) -> dict:
    try:
        return json.loads(row["library_versions"] or "{}")
    except (TypeError, ValueError):
        return {}


def run_differences(before: pd.Series | None, after: pd.Series) -> list[str]:
    """What changed from one run to the next: numbench's commit, library versions, the grid's
    settings, the host and its fingerprint ("numpy 2.4.0 -> 2.5.0", ...)."""
    if before is None:
        return []
    said = []
    if before["host"] != after["host"]:
        said.append(f"host {before['host']} -> {after['host']}")
    old, new = before["numbench_commit"], after["numbench_commit"]
    if old != new and not (pd.isna(old) and pd.isna(new)):
        said.append(f"numbench {str(old)[:7]} -> {str(new)[:7]}")
    old_v, new_v = _versions(before), _versions(after)
    for library in sorted(set(old_v) | set(new_v)):
        if old_v.get(library) != new_v.get(library):
            said.append(f"{library} {old_v.get(library, '-')} -> {new_v.get(library, '-')}")
    if before["config_hash"] != after["config_hash"]:
        said.append("grid settings")
    for name in FINGERPRINT:
        a, b = before[name], after[name]
        if a != b and not (pd.isna(a) and pd.isna(b)):
            said.append(f"{name} {a} -> {b}")
    return said


def numbered_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with their number on their host (1 = the host's first run, oldest first)."""
    out = runs.sort_values(["started_at", "run_id"], kind="stable").copy()
    out["run_number"] = out.groupby("host").cumcount() + 1
    return out


def measures(series: pd.DataFrame):
    """A cell's series to look for steps in, as (name, values, interval low, high): its
    times, and, where it has a speedup in every run, its paired series (``1 / speedup``)."""
    yield "time", series["median_s"], series["ci_low_s"], series["ci_high_s"]
    speedup = pd.to_numeric(series["speedup"], errors="coerce")
    if len(series) and (speedup > 0).all():
        low = pd.to_numeric(series["speedup_ci_high"], errors="coerce")
        high = pd.to_numeric(series["speedup_ci_low"], errors="coerce")
        yield "paired", 1 / speedup, 1 / low, 1 / high


def changes(store, margin: float = 1.1) -> pd.DataFrame:
    """Every step of every cell's series in ``store`` (``numbench.history.read``), its times
    and its paired series (``measures``): the cell, which series, the run it appeared in (its
    id, number on its host, date), before -> after with the ratio's interval, and what
    changed between that run and the one before it."""
    runs = numbered_runs(store.runs).set_index("run_id", drop=False)
    ok = store.cells[(store.cells["status"] == "ok") & (store.cells["median_s"] > 0)]
    ok = ok.merge(runs[["run_id", "run_number"]].reset_index(drop=True), on="run_id")
    rows = []
    for key, series in ok.sort_values("run_number").groupby(SERIES_KEY, sort=True):
        for name, values, low, high in measures(series):
            for step in steps(values, low, high, margin):
                here, previous = series.iloc[step.index], series.iloc[step.index - 1]
                after_run, before_run = runs.loc[here["run_id"]], runs.loc[previous["run_id"]]
                timed = name == "time"
                rows.append(
                    {
                        **dict(zip(SERIES_KEY, key, strict=True)),
                        "measure": name,
                        "run_id": here["run_id"],
                        "run_number": int(here["run_number"]),
                        "started_at": after_run["started_at"],
                        "previous_run_id": previous["run_id"],
                        "before_s": step.before_s if timed else math.nan,
                        "after_s": step.after_s if timed else math.nan,
                        "before_paired": math.nan if timed else step.before_s,
                        "after_paired": math.nan if timed else step.after_s,
                        "ratio": step.ratio,
                        "ratio_low": step.ratio_low,
                        "ratio_high": step.ratio_high,
                        "changed": "; ".join(run_differences(before_run, after_run)),
                    }
                )
    columns = [*SERIES_KEY, "measure", "run_id", "run_number", "started_at", "previous_run_id"]
    columns += ["before_s", "after_s", "before_paired", "after_paired", "ratio", "ratio_low"]
    columns += ["ratio_high", "changed"]
    return pd.DataFrame(rows, columns=columns)
