"""results/speedups.parquet: every non-baseline ``ok`` cell against the baseline cell.

speedup = baseline median / library median, for the same host, operation, size and dtype.
Its confidence interval is a percentile bootstrap of that ratio: each resample draws the
baseline's samples and the library's samples independently, with replacement, and takes the
ratio of the two medians. ``significant`` is true when the interval excludes 1.

A cell whose baseline cell is missing or not ``ok`` (mismatch, failed, ...) keeps its row
with a null speedup: no claim can be made, and the summary says why.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa

from numbench.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE, bootstrap_medians
from numbench.tables import SPEEDUPS_SCHEMA, read_cell, write_atomic

# The key of one measured cell: (library, device, operation, size, dtype, host).
SampleKey = tuple[str, str, str, int, str, str]


def speedup_ci(
    baseline_samples,
    library_samples,
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(speedup, ci_low, ci_high) of ``median(baseline) / median(library)``.

    Both sample sets are resampled independently; the interval is the percentile interval of
    the resampled ratios. With one sample on both sides the interval collapses to the point.
    """
    base = np.asarray(baseline_samples, dtype=float)
    lib = np.asarray(library_samples, dtype=float)
    base, lib = base[np.isfinite(base)], lib[np.isfinite(lib)]
    if base.size == 0 or lib.size == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(np.median(base) / np.median(lib))
    rng = np.random.default_rng(seed)
    ratios = bootstrap_medians(base, resamples, rng) / bootstrap_medians(lib, resamples, rng)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)


def is_significant(ci_low: float, ci_high: float) -> bool:
    """True when the interval lies wholly above or wholly below 1."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return False
    return bool(ci_low > 1.0 or ci_high < 1.0)


def cell_seed(key: SampleKey) -> int:
    """A stable seed per cell, so the same samples always give the same interval."""
    return zlib.crc32("/".join(map(str, key)).encode())


def load_samples(cell_paths: Iterable[str | os.PathLike]) -> dict[SampleKey, np.ndarray]:
    """Per-call seconds of every cell file, keyed by (library, device, operation, size,
    dtype, host). Cells without samples (not measured) are left out."""
    samples: dict[SampleKey, np.ndarray] = {}
    for path in cell_paths:
        table = read_cell(path)
        seconds = np.array(
            [s for s in table.column("seconds").to_pylist() if s is not None], dtype=float
        )
        if seconds.size == 0:
            continue
        row = {c: table.column(c)[0].as_py() for c in ("library", "device", "operation")}
        row.update({c: table.column(c)[0].as_py() for c in ("size", "dtype", "host")})
        key = (
            row["library"],
            row["device"],
            row["operation"],
            int(row["size"]),
            row["dtype"],
            row["host"],
        )
        samples[key] = seconds
    return samples


def compute_speedups(
    benchmarks: pd.DataFrame,
    samples: dict[SampleKey, np.ndarray],
    baseline_library: str = "numpy",
    baseline_device: str = "cpu",
) -> pd.DataFrame:
    """One row per non-baseline ``ok`` cell of ``benchmarks``, in SPEEDUPS_SCHEMA order."""
    ok = benchmarks[benchmarks["status"] == "ok"]
    is_base = (ok["library"] == baseline_library) & (ok["device"] == baseline_device)
    rows = []
    for r in ok[~is_base].itertuples(index=False):
        key = (r.library, r.device, r.operation, int(r.size), r.dtype, r.host)
        base_key = (baseline_library, baseline_device, *key[2:])
        lib_s, base_s = samples.get(key), samples.get(base_key)
        if lib_s is None or base_s is None:
            point = lo = hi = float("nan")
        else:
            point, lo, hi = speedup_ci(base_s, lib_s, seed=cell_seed(key))
        rows.append(
            {
                "library": r.library,
                "device": r.device,
                "operation": r.operation,
                "size": int(r.size),
                "dtype": r.dtype,
                "host": r.host,
                "baseline_library": baseline_library,
                "baseline_device": baseline_device,
                "speedup": None if np.isnan(point) else point,
                "speedup_ci_low": None if np.isnan(lo) else lo,
                "speedup_ci_high": None if np.isnan(hi) else hi,
                "significant": is_significant(lo, hi),
            }
        )
    table = pa.Table.from_pylist(rows, schema=SPEEDUPS_SCHEMA)
    return table.to_pandas().sort_values(["operation", "library", "device", "size"], kind="stable")


def write_speedups(
    benchmarks: str | os.PathLike,
    cell_paths: Iterable[str | os.PathLike],
    output: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
) -> pd.DataFrame:
    df = pd.read_parquet(benchmarks)
    result = compute_speedups(df, load_samples(cell_paths), baseline_library, baseline_device)
    write_atomic(pa.Table.from_pandas(result, schema=SPEEDUPS_SCHEMA, preserve_index=False), output)
    return result


def check_baseline(baseline_library: str, baseline_device: str, *tables: pd.DataFrame) -> None:
    """Raise ValueError unless every row of ``tables`` (speedups, crossovers) was computed
    against this baseline: a report must not name one baseline and show another's numbers."""
    found = set()
    for table in tables:
        found |= set(zip(table["baseline_library"], table["baseline_device"], strict=True))
    if found - {(baseline_library, baseline_device)}:
        against = ", ".join(f"{lib} on {dev}" for lib, dev in sorted(found))
        raise ValueError(
            f"the tables were computed against {against}, not the baseline given "
            f"({baseline_library} on {baseline_device}): recompute them"
        )
