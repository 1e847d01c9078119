"""The columns of results/precision.parquet and results/scaling.parquet, in their order
(``numbench.analyse.dimensions`` writes them; the charts draw an empty frame of them)."""

from __future__ import annotations

PRECISION_COLUMNS = [
    "library",
    "device",
    "threads",
    "operation",
    "size",
    "host",
    "ratio",
    "ci_low",
    "ci_high",
    "verdict",
    "margin",
]
SCALING_COLUMNS = [
    "library",
    "device",
    "dtype",
    "operation",
    "size",
    "host",
    "threads",
    "speedup",
    "ci_low",
    "ci_high",
    "efficiency",
    "verdict",
    "margin",
]
