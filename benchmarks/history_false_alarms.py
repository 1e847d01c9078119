"""How often does `numbench history changes` find a step in unchanged code? (a benchmark,
not a test)

Synthetic series of medians (log-normal noise of a given spread, oldest first) go through
``numbench.history.changes.steps`` at the config's margin, as each cell's series does. Per
noise model and series length it prints the share of series in which any step was found
(a false alarm: nothing changed) with a one-sided 95% Clopper-Pearson upper bound, and, for
the steady models, the share of series with a planted slowdown in which the step was found
at the run where it was planted (the power). Noise models:

- ``steady``: every run's median moves by the given spread;
- ``one outlier``: the same, and one run of each series 1.6 times slower (a disturbed run);
- ``two modes``: the same, and each run 1.5 times slower with chance 0.3 (a cell whose
  processes land in one of two states, as torch ``poly`` 1e5 does here).

    .venv/bin/python benchmarks/history_false_alarms.py [--series 2000] [--seed 0]
        [--markdown]
"""

from __future__ import annotations

import argparse

import numpy as np
from _report import publish  # also puts src/ on the path
from scipy import stats

from numbench.config import default_margin
from numbench.history.changes import steps
from numbench.report.markdown import md_table

LENGTHS = (8, 20, 50, 200)
SPREADS = (0.02, 0.05)
MODELS = ("steady", "one outlier", "two modes")
#: the slowdown planted for the power, at the middle of the series
PLANTED = 1.2
#: each median's own interval, as a relative half-width
OWN_HALF_WIDTH = 0.02


def series(rng, n: int, spread: float, model: str, step: float = 1.0) -> np.ndarray:
    y = rng.normal(0.0, spread, n)
    if model == "one outlier":
        y[rng.integers(n)] += np.log(1.6)
    elif model == "two modes":
        y += np.log(1.5) * (rng.random(n) < 0.3)
    y[n // 2 :] += np.log(step)
    return 1e-3 * np.exp(y)


def found(medians: np.ndarray, margin: float) -> list:
    low, high = medians * (1 - OWN_HALF_WIDTH), medians * (1 + OWN_HALF_WIDTH)
    return steps(medians, low, high, margin)


def upper_bound(hits: int, n: int) -> float:
    return 1.0 if hits == n else float(stats.beta.ppf(0.95, hits + 1, n - hits))


def rows(count: int, seed: int, margin: float) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    out = []
    for model in MODELS:
        for spread in SPREADS:
            for n in LENGTHS:
                alarms = sum(
                    bool(found(series(rng, n, spread, model), margin)) for _ in range(count)
                )
                power = "-"
                if model == "steady":
                    hits = sum(
                        any(
                            s.index == n // 2
                            for s in found(series(rng, n, spread, model, PLANTED), margin)
                        )
                        for _ in range(count)
                    )
                    power = f"{hits / count:.1%}"
                out.append(
                    [
                        model,
                        f"{spread:.0%}",
                        str(n),
                        f"{alarms / count:.2%}",
                        f"{upper_bound(alarms, count):.2%}",
                        power,
                    ]
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=2000, help="series per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    margin = float(default_margin())
    header = ["noise", "spread", "runs", "series with a step", "95% upper bound"]
    header.append(f"{PLANTED}x found at its run")
    body = (
        f"{args.series} synthetic series per row, margin {margin:g}, each median's own "
        f"interval ±{OWN_HALF_WIDTH:.0%}.\n\n"
        + md_table(header, rows(args.series, args.seed, margin))
    )
    publish("history_false_alarms.py", body, args.markdown, None)


if __name__ == "__main__":
    main()
