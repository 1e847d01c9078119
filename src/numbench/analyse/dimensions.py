"""results/precision.parquet and results/scaling.parquet: what the dtype and threads
dimensions of the grid show, from every cell's own measured samples (results/samples.parquet).

* **precision**: float32 time / float64 time per (library, device, threads, operation, size,
  host); below 1, float32 is faster. Empty when the grid has one dtype.
* **scaling**: median time at 1 thread / median time at the largest thread count N, per
  (library, device, dtype, operation, size, host), and the parallel efficiency speedup / N.
  Empty when the grid has one thread count.

Each ratio comes with a 95% two-level bootstrap interval (``numbench.stats.ratio_ci``, the
two sides' processes drawn on their own: they ran in different cells) and its verdict against
the config's margin (``numbench.stats.verdict``, where above 1 is "faster").

``precision_gaps`` and ``scaling_gaps`` are the findings of each (``numbench.contract.facts``): per
operation, the largest size where the two sides clearly differ; ``numbench.report`` words them.

``settings`` splits the grid along the same two dimensions, so that the other findings (the
fastest library, the pipelining gaps) compare libraries only like with like.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from numbench import cells
from numbench.analyse.speedups import cell_seed
from numbench.cells import FIELDS, SORT_BY_SIZE
from numbench.contract import MEASURED, write_atomic
from numbench.contract.conclusions import PRECISION_COLUMNS, SCALING_COLUMNS
from numbench.contract.facts import PrecisionGap, ScalingGap
from numbench.stats import FASTER, SLOWER, ratio_ci, verdict

#: a cell on its host, in the order of its path's fields (the bootstrap's seed is made of it)
CELL = [*FIELDS, "host"]
SORT = list(cells.SORT)


def measured_groups(samples: pd.DataFrame) -> dict[tuple, list[np.ndarray]]:
    """cell key (CELL order) -> the cell's own samples, one array per replicate process."""
    own = samples[samples["role"] == MEASURED]
    out: dict[tuple, list[np.ndarray]] = {}
    if own.empty:
        return out
    own = own.sort_values(CELL + ["replicate"], kind="stable")
    for key, part in own.groupby(CELL + ["replicate"], sort=False):
        cell = (*key[:3], int(key[3]), key[4], int(key[5]), key[6])
        out.setdefault(cell, []).append(part["seconds"].to_numpy())
    return out


def _ratio(num: list[np.ndarray], den: list[np.ndarray], key: tuple) -> tuple[float, ...]:
    return ratio_ci(num, den, paired=False, seed=cell_seed(key))


def _inverse(value: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(1.0) / np.float64(value))


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    return frame.sort_values([c for c in SORT if c in columns], kind="stable").reset_index(
        drop=True
    )


def precision(samples: pd.DataFrame, margin: float) -> pd.DataFrame:
    """float32 time / float64 time for every cell measured in both dtypes (PRECISION_COLUMNS)."""
    groups = measured_groups(samples)
    rows = []
    for key, f64 in groups.items():
        lib, dev, dtype, threads, op, size, host = key
        f32 = groups.get((lib, dev, "float32", threads, op, size, host))
        if dtype != "float64" or f32 is None:
            continue
        ratio, lo, hi = _ratio(f32, f64, key)
        rows.append(
            {
                "library": lib,
                "device": dev,
                "threads": threads,
                "operation": op,
                "size": size,
                "host": host,
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                # a time ratio: below 1 is float32 faster, so the verdict is read on 1 / ratio
                "verdict": verdict(_inverse(ratio), _inverse(hi), _inverse(lo), margin),
                "margin": margin,
            }
        )
    return _frame(rows, PRECISION_COLUMNS)


def scaling(samples: pd.DataFrame, margin: float) -> pd.DataFrame:
    """Speedup of the largest thread count over 1 thread per cell (SCALING_COLUMNS)."""
    groups = measured_groups(samples)
    most = max((k[3] for k in groups), default=1)
    rows = []
    for key, one in groups.items():
        lib, dev, dtype, threads, op, size, host = key
        many = groups.get((lib, dev, dtype, most, op, size, host))
        if threads != 1 or most == 1 or many is None:
            continue
        speedup, lo, hi = _ratio(one, many, key)
        rows.append(
            {
                "library": lib,
                "device": dev,
                "dtype": dtype,
                "operation": op,
                "size": size,
                "host": host,
                "threads": most,
                "speedup": speedup,
                "ci_low": lo,
                "ci_high": hi,
                "efficiency": speedup / most,
                "verdict": verdict(speedup, lo, hi, margin),
                "margin": margin,
            }
        )
    return _frame(rows, SCALING_COLUMNS)


def write_dimensions(
    samples: str | os.PathLike,
    precision_output: str | os.PathLike,
    scaling_output: str | os.PathLike,
    margin: float,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    import pyarrow as pa

    data = pd.read_parquet(samples)
    prec, scal = precision(data, margin), scaling(data, margin)
    for frame, path in ((prec, precision_output), (scal, scaling_output)):
        write_atomic(pa.Table.from_pandas(frame, preserve_index=False), path)
    return prec, scal


# -- the findings ------------------------------------------------------------------------------
def _largest_per_operation(frame: pd.DataFrame) -> pd.DataFrame:
    """Per operation, the clear row (verdict not "same") of the largest size, then library."""
    clear = frame[frame["verdict"].isin([FASTER, SLOWER])]
    if clear.empty:
        return clear
    clear = clear.sort_values(list(SORT_BY_SIZE[:3]), ascending=[True, False, True])
    return clear.groupby("operation", sort=True).head(1)


def precision_gaps(prec: pd.DataFrame) -> tuple[PrecisionGap, ...]:
    """One fact per operation where float32 and float64 clearly differ."""
    return tuple(
        PrecisionGap(r.operation, r.library, int(r.size), int(r.threads), float(r.ratio))
        for r in _largest_per_operation(prec).itertuples(index=False)
    )


def scaling_gaps(scal: pd.DataFrame) -> tuple[ScalingGap, ...]:
    """One fact per operation where the largest thread count clearly differs from 1."""
    return tuple(
        ScalingGap(
            r.operation,
            r.library,
            int(r.size),
            int(r.threads),
            r.dtype,
            float(r.speedup),
            float(r.efficiency),
        )
        for r in _largest_per_operation(scal).itertuples(index=False)
    )


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
