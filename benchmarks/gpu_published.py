"""numbench's GPU figures beside the published ones, point by point, as a Markdown table.

Two published comparisons ask what numbench answers on a GPU: from which size on a library
on the GPU pays off, and by how much (their figures, and where they come from, are in
``published_gpu.csv`` beside this script). This script reads a GPU run's results folder
(``speedups.parquet`` and ``crossovers.parquet``, as ``snakemake --config device=gpu``, or
an ``offsite import`` followed by it, leaves them) and prints one row per published figure:
the figure as published, and numbench's at the same operation, size and dtype.

* A speedup over the run's baseline (NumPy on the CPU, as the published ones are where they
  name NumPy) is the row's own, with its 95% interval.
* A speedup over another library or device (PyTorch CUDA over PyTorch CPU, say) is the ratio
  of the two speedups over the baseline at that size: the baseline cancels. It has no
  interval of its own, and says so.
* A crossover is the run's crossover row: its kind, and for ``crosses`` the size with its
  interval.
* A size left empty in the file is the operation's largest size in the run (the post's "large
  size"). A figure the run does not have (a library not installed, a cell not ``ok``) says
  ``not measured``.

The hardware differs (a T4 and an RTX 4060 there): the rows compare kinds and crossovers, not
absolute speed.

    .venv/bin/python benchmarks/gpu_published.py RESULTS [--threads 1] [--host NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

PUBLISHED = Path(__file__).with_name("published_gpu.csv")
COLUMNS = ["source", "operation", "dtype", "size", "compared", "published", "numbench"]


def read_published(path: str | Path = PUBLISHED) -> pd.DataFrame:
    """The published figures, one a row (``published_gpu.csv``'s columns)."""
    table = pd.read_csv(path, comment="#", dtype={"size": "Int64"})
    missing = {"source", "kind", "operation", "dtype", "library", "published"} - set(table)
    if missing:
        raise ValueError(f"{path} lacks the columns {sorted(missing)}")
    return table


def one_host(speedups: pd.DataFrame, host: str | None) -> pd.DataFrame:
    """The rows of ``host``, or of the run's one host; a run of several needs ``host``."""
    hosts = sorted(set(speedups["host"].dropna()))
    if host is None and len(hosts) > 1:
        raise ValueError(f"the run holds several hosts ({', '.join(hosts)}): name one with --host")
    return speedups if host is None else speedups[speedups["host"] == host]


def _rows(table: pd.DataFrame, library: str, device: str, row) -> pd.DataFrame:
    return table[
        (table["library"] == library)
        & (table["device"] == device)
        & (table["operation"] == row.operation)
        & (table["dtype"] == row.dtype)
    ]


def _speedup_at(speedups: pd.DataFrame, library: str, device: str, row, size: int):
    """(speedup, low, high) of ``library`` on ``device`` over the baseline at ``size``; the
    baseline itself is 1; None where the run has no speedup there."""
    if library == _baseline(speedups)[0] and device == _baseline(speedups)[1]:
        return 1.0, 1.0, 1.0
    found = _rows(speedups, library, device, row)
    found = found[(found["size"] == size) & found["speedup"].notna()]
    if found.empty:
        return None
    first = found.iloc[0]
    return float(first["speedup"]), first["speedup_ci_low"], first["speedup_ci_high"]


def _baseline(speedups: pd.DataFrame) -> tuple[str, str]:
    first = speedups.iloc[0]
    return str(first["baseline_library"]), str(first["baseline_device"])


def size_of(speedups: pd.DataFrame, row) -> int | None:
    """The row's size, or the operation's largest size with a speedup of the row's library."""
    if not pd.isna(row.size):
        return int(row.size)
    found = _rows(speedups, row.library, row.device, row)
    found = found[found["speedup"].notna()]
    return None if found.empty else int(found["size"].max())


def speedup_text(speedups: pd.DataFrame, row, size: int | None) -> str:
    """numbench's figure for a published speedup, in words."""
    if size is None:
        return "not measured"
    mine = _speedup_at(speedups, row.library, row.device, row, size)
    over = _speedup_at(speedups, row.over_library, row.over_device, row, size)
    if mine is None or over is None:
        return "not measured"
    if (row.over_library, row.over_device) == _baseline(speedups):
        point, low, high = mine
        interval = "" if pd.isna(low) or pd.isna(high) else f" [{low:.2f}, {high:.2f}]"
        return f"{point:.2f}x{interval}"
    return f"{mine[0] / over[0]:.2f}x (ratio of two speedups over the baseline; no interval)"


def crossover_text(crossovers: pd.DataFrame, row) -> str:
    """numbench's crossover for a published one, in words."""
    found = _rows(crossovers, row.library, row.device, row)
    if found.empty:
        return "not measured"
    first = found.iloc[0]
    if first["kind"] != "crosses":
        return str(first["kind"]).replace("_", " ")
    low, high = first["ci_low"], first["ci_high"]
    interval = "" if pd.isna(low) or pd.isna(high) else f" [{low:.0f}, {high:.0f}]"
    return f"crosses at batch {first['crossover_size']:.0f}{interval}"


def table(
    published: pd.DataFrame, speedups: pd.DataFrame, crossovers: pd.DataFrame, threads: int = 1
) -> str:
    """The Markdown table: one row per published figure, numbench's beside it."""
    speedups = speedups[speedups["threads"] == threads]
    crossovers = crossovers[crossovers["threads"] == threads]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in published.itertuples(index=False):
        compared = f"{row.library} {row.device} over {row.over_library} {row.over_device}"
        if row.kind == "crossover":
            size, mine = "", crossover_text(crossovers, row)
        else:
            at = size_of(speedups, row)
            size = "" if at is None else str(at) + (" (largest)" if pd.isna(row.size) else "")
            mine = speedup_text(speedups, row, at)
        cells = [row.source, row.operation, row.dtype, size, compared, row.as_published, mine]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a GPU run's results folder")
    parser.add_argument("--published", default=str(PUBLISHED), help="the published figures")
    parser.add_argument("--threads", type=int, default=1, help="the cells' threads (default 1)")
    parser.add_argument("--host", help="the host, where the run holds several")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    folder = Path(args.results)
    try:
        speedups = one_host(pd.read_parquet(folder / "speedups.parquet"), args.host)
        crossovers = one_host(pd.read_parquet(folder / "crossovers.parquet"), args.host)
        if speedups.empty:
            raise ValueError(f"{folder / 'speedups.parquet'} has no speedups of that host")
        published = read_published(args.published)
    except (OSError, ValueError) as exc:
        print(f"gpu_published: {exc}", file=sys.stderr)
        return 2
    print(table(published, speedups, crossovers, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
