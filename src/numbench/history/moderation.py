"""Each cell's run-to-run spread moderated by the other cells' (``moderate``), for the
history's gate (``numbench.history.gate``): a few runs say little of one cell's spread."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

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
    (moderated down, JAX's poly 10^6 here, whose worker processes land in one of two modes
    1.8 and 7 ms apart, was called 3.8x slower between runs of unchanged code). Fewer
    than ``min_cells`` cells, or spreads that vary more than the chi-square alone
    would: none (d0 = 0). Spreads that vary less: every cell gets the prior's (d0 capped at
    ``MAX_PRIOR_DF``)."""
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
