"""Selections of results/benchmarks.parquet that more than one stage makes alike."""

from __future__ import annotations

import pandas as pd


def pipelined_cells(bench: pd.DataFrame) -> pd.DataFrame:
    """The ok cells timed both ways (asynchronous libraries): per-call latency and pipelined."""
    if "pipelined_n_samples" not in bench:
        return bench.iloc[0:0]
    ok = (bench["status"] == "ok") & (bench["pipelined_n_samples"].fillna(0) > 0)
    return bench[ok]
