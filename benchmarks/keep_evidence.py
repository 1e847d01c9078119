"""Keep a run's small tables as evidence: ``docs/evidence/NAME/`` (a benchmark helper, not a
test).

A figure in the docs rests on a run; results folders are never committed, so the tables it
was computed from are copied here, small as they are (with the measuring machine's folders
cut from the paths they record): the run's ``benchmarks.parquet``,
``speedups.parquet``, ``crossovers.parquet``, ``roofs.parquet`` and ``summary.md``, those it
has. A GPU run is kept as ``docs/evidence/<date>-<gpu>/`` (``--name`` is made from the
run's first cell's start date and device name where not given), and a line for
``docs/evidence/README.md``'s table is printed to paste there.

    .venv/bin/python benchmarks/keep_evidence.py RESULTS [--name NAME] [--into docs/evidence]
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from _report import ROOT

#: the run's files kept, those it has; benchmarks.parquet is required
KEPT = (
    "benchmarks.parquet",
    "speedups.parquet",
    "crossovers.parquet",
    "roofs.parquet",
    "summary.md",
)
#: columns that hold a path of the machine that measured; kept as their last parts only
PATH_COLUMNS = ("python_executable",)
#: the parts of such a path kept: the interpreter and its folder (``.venv/bin/python``)
PATH_PARTS = 3
#: the most a kept folder may weigh: evidence is tables, not raw samples
MAX_BYTES = 4 * 2**20


class EvidenceError(ValueError):
    """A results folder that cannot be kept; the message says why."""


def default_name(bench: pd.DataFrame) -> str:
    """``<date>-<device>``: the first cell's start date and its GPU's name (or the host's
    CPU model on a CPU run), as a folder name."""
    started = str(bench["started_at"].dropna().min())[:10] if "started_at" in bench else ""
    gpu = bench[bench["device"] == "gpu"] if "device" in bench else bench.iloc[0:0]
    column = "device_name" if len(gpu) and "device_name" in gpu else "cpu_model"
    rows = gpu if len(gpu) else bench
    named = (
        str(rows[column].dropna().iloc[0])
        if column in rows and rows[column].notna().any()
        else "host"
    )
    slug = re.sub(r"[^a-z0-9]+", "-", named.lower()).strip("-")[:40] or "host"
    return f"{started or 'undated'}-{slug}"


def short_path(value: object) -> object:
    """An absolute path cut to its last ``PATH_PARTS`` parts (``.venv/bin/python``): which
    interpreter measured says as much, and the folders above it name the machine's layout,
    which committed evidence does not keep."""
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    return "/".join(value.split("/")[-PATH_PARTS:])


def without_machine_paths(path: Path) -> bool:
    """Rewrite a Parquet table in place with its path columns shortened; whether it changed."""
    table = pq.read_table(path)
    changed = False
    for column in PATH_COLUMNS:
        if column not in table.column_names:
            continue
        values = table.column(column).to_pylist()
        short = [short_path(v) for v in values]
        if short != values:
            index = table.column_names.index(column)
            field = table.schema.field(index)
            table = table.set_column(index, field, pa.array(short, type=field.type))
            changed = True
    if changed:
        pq.write_table(table, path)
    return changed


def measured_on(bench: pd.DataFrame) -> str:
    """Where and when the run measured, from its own cells: dates, devices, CPU."""
    dates = bench["started_at"].dropna().astype(str).str[:10] if "started_at" in bench else []
    when = f"{min(dates)} to {max(dates)}" if len(dates) else "undated"
    devices = sorted({str(d) for d in bench.get("device_name", pd.Series(dtype=str)).dropna()})
    cpu = str(bench["cpu_model"].dropna().iloc[0]) if "cpu_model" in bench else "a CPU"
    return f"{when}, {' and '.join(devices) or cpu} (host CPU {cpu})"


def keep(results: Path, into: Path, name: str | None) -> tuple[Path, list[str]]:
    """Copy ``results``'s kept tables into ``into/NAME`` (a new folder): its path and the
    files copied."""
    if not (results / "benchmarks.parquet").is_file():
        raise EvidenceError(f"{results} has no benchmarks.parquet: name a numbench results folder")
    bench = pd.read_parquet(results / "benchmarks.parquet")
    name = name or default_name(bench)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise EvidenceError(f"--name {name!r}: letters, digits, '.', '_' and '-' only")
    out = into / name
    if out.exists():
        raise EvidenceError(f"{out} exists: evidence is never overwritten, choose another --name")
    present = [f for f in KEPT if (results / f).is_file()]
    size = sum((results / f).stat().st_size for f in present)
    if size > MAX_BYTES:
        raise EvidenceError(
            f"the tables weigh {size / 2**20:.1f} MiB, over {MAX_BYTES // 2**20} MiB"
        )
    out.mkdir(parents=True)
    for f in present:
        shutil.copy2(results / f, out / f)
        if f.endswith(".parquet"):
            without_machine_paths(out / f)
    return out, present


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results folder after the workflow's analysis")
    parser.add_argument("--name", help="the evidence folder's name (default: <date>-<device>)")
    parser.add_argument("--into", default=str(ROOT / "docs" / "evidence"))
    args = parser.parse_args(argv)
    try:
        out, present = keep(Path(args.results), Path(args.into), args.name)
    except EvidenceError as exc:
        raise SystemExit(f"error: {exc}") from None
    bench = pd.read_parquet(out / "benchmarks.parquet")
    print(f"kept {', '.join(present)} in {out}")
    print(f"| `{out.name}/` | WHAT THE RUN WAS FOR | {measured_on(bench)}, quiet or not |")


if __name__ == "__main__":
    main()
