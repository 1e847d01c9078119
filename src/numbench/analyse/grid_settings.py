"""The grid split by its dtype and thread count: libraries are only compared like with like."""

from __future__ import annotations

import pandas as pd


def settings(bench: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The grid split by (dtype, threads), each part named ("float32, 2 threads"); one
    unnamed part when the grid has one of each. Libraries are only compared like with like."""
    dims = [c for c in ("dtype", "threads") if c in bench and bench[c].nunique() > 1]
    if not dims:
        return [("", bench)]
    parts = []
    for key, part in bench.groupby(dims, sort=True):
        values = key if isinstance(key, tuple) else (key,)
        words = [
            str(v) if d == "dtype" else f"{int(v)} thread" + ("" if int(v) == 1 else "s")
            for d, v in zip(dims, values, strict=True)
        ]
        parts.append((", ".join(words), part))
    return parts
