"""The README's first table ("What an answer looks like"), made from a real run.

The README shows what an answer looks like with a handful of speedups. They must come from a
run anyone can repeat, not from an experiment, so this script reads a results folder
(``speedups.parquet`` and ``benchmarks.parquet``, as ``make run`` leaves them) and prints, for
a fixed list of cells (``ROWS``), the speedup over the baseline, its 95% interval and its
verdict, as a Markdown table. Under the table it stamps what a reader needs to weigh the
figures: the dates the run's cells started, the machine (CPU model, CPUs, memory, Python, as
the cells recorded them) and the versions of the libraries shown.

The list is fixed rather than picked from the data (the largest speedups, say) so that two
runs show the same cells, each chosen for the kind of answer it illustrates (``ROWS``) and not
for the figure one run gave it. A cell the run did not measure, or measured with another status than ``ok``,
keeps its row and says so; a folder with none of the cells is refused, so that a small test
grid cannot leave the README an empty table.

With ``--write README.md`` the table replaces what lies between the two marker comments
(``START`` and ``END``) of that file; the rest of the file is left as it was.

    .venv/bin/python benchmarks/readme_table.py results [--write README.md] [--host NAME]
    make readme-table RESULTS=results
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import _report  # noqa: F401  (puts the package's src on the path)
import pandas as pd

from numbench.formatting import display, missing
from numbench.report.markdown import Markdown, md_code, md_table, md_text

START = "<!-- readme-table:start -->"
END = "<!-- readme-table:end -->"
#: the cells the README's table shows, in float64 on 1 thread of the CPU, as its text says
DEVICE, DTYPE, THREADS = "cpu", "float64", 1
#: how an operation's size is named in the README's grid table; ``n`` for the rest
SIZE_NAMES = {"linreg_gd": "d", "batched_matmul": "batch", "mlp": "batch"}
#: the stamp under the table is wrapped as the README's prose is
LINE_LENGTH = 100


@dataclass(frozen=True)
class Row:
    """One cell of the table, and what it shows beside the operation's name."""

    operation: str
    size: int
    library: str
    note: str = ""


#: The cells shown, chosen for what each kind of answer looks like, not for their figures:
ROWS = (
    # a compiler fusing an expression that NumPy evaluates one temporary array at a time
    Row("poly", 100_000, "numba", "a cubic, term by term"),
    # automatic differentiation against the NumPy builder's finite differences (n + 1 passes)
    Row("grad", 1_000, "jax", "NumPy: finite differences"),
    # the same element-wise functions in another library's kernels
    Row("elementwise", 100_000, "torch"),
    # a matrix product at two sizes, each library with its own GEMM
    Row("matmul", 250, "jax"),
    Row("matmul", 1_000, "torch"),
    # a small array, where what a call costs beyond the work itself weighs most
    Row("sort", 1_000, "jax"),
)


def parse_row(text: str) -> Row:
    """``OPERATION:SIZE:LIBRARY`` (the ``--row`` option) as a Row."""
    try:
        operation, size, library = text.split(":")
        return Row(operation, int(float(size)), library)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not OPERATION:SIZE:LIBRARY") from exc


def size_text(operation: str, size: int) -> str:
    """'n = 1e5' for powers of ten from 1000 up, 'n = 250' otherwise, as the README's grid
    table writes sizes."""
    name = SIZE_NAMES.get(operation, "n")
    power = len(str(size)) - 1
    shown = f"1e{power}" if size >= 1000 and size == 10**power else str(size)
    return f"{name} = {shown}"


def read(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(speedups, benchmarks) of a results folder, or SystemExit naming what is missing."""
    tables = []
    for name in ("speedups.parquet", "benchmarks.parquet"):
        path = results / name
        if not path.is_file():
            raise SystemExit(f"{path} does not exist: run the workflow (make run) first")
        tables.append(pd.read_parquet(path))
    return tables[0], tables[1]


def _chosen(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[
        (frame["device"] == DEVICE) & (frame["dtype"] == DTYPE) & (frame["threads"] == THREADS)
    ]


def pick_host(speedups: pd.DataFrame, host: str | None) -> str:
    """The host whose speedups the table shows: ``host``, or the only one the folder holds
    (a folder merged from several hosts must name one)."""
    hosts = sorted(_chosen(speedups)["host"].dropna().unique())
    if host is not None:
        if host not in hosts:
            raise SystemExit(f"no speedups from host {host!r}; the folder has {hosts}")
        return host
    if len(hosts) != 1:
        raise SystemExit(
            f"the folder holds speedups from {len(hosts)} hosts {hosts}: name one with --host"
        )
    return hosts[0]


def _most_common(values: pd.Series):
    values = values.dropna()
    return None if values.empty else values.mode().iloc[0]


def stamp(bench: pd.DataFrame, libraries: list[str], margin: float | None) -> str:
    """The line under the table: when the run's cells started, on what machine, with which
    library versions, and the margin of the verdicts. ``bench`` holds the host's cells."""
    started = pd.to_datetime(bench["started_at"].dropna(), utc=True, format="ISO8601")
    if started.empty:
        when = "a run of unknown date"
    else:
        first, last = started.min().date().isoformat(), started.max().date().isoformat()
        when = f"a run of {first}" if first == last else f"a run of {first} to {last}"
    machine = []
    cpu, cpus = _most_common(bench["cpu_model"]), _most_common(bench["cpu_count"])
    ram_gb, python = _most_common(bench["ram_gb"]), _most_common(bench["python_version"])
    machine.append(md_text(cpu) if cpu else "an unknown CPU")
    if cpus is not None:
        machine.append(f"{int(cpus)} CPUs")
    if ram_gb is not None:
        machine.append(f"{ram_gb * 1e9 / 2**30:.0f} GiB of memory")
    if python:
        machine.append(f"Python {md_text(python)}")
    versions = []
    for library in libraries:
        version = _most_common(bench.loc[bench["library"] == library, "library_version"])
        if version:
            versions.append(f"{display(library)} {md_text(version)}")
    text = f"From {when} on {', '.join(machine)}"
    text += f"; {', '.join(versions)}" if versions else ""
    if margin is not None:
        text += f". Verdicts at a margin of {margin:g}"
    return text + "."


def table(results: Path, rows=ROWS, host: str | None = None) -> str:
    """The Markdown table of ``rows`` from the results folder, with its stamp under it."""
    speedups, bench = read(results)
    host = pick_host(speedups, host)
    speedups = _chosen(speedups)
    speedups = speedups[speedups["host"] == host]
    bench = bench[(bench["host"] == host) & (bench["device"] == DEVICE)]
    cells = _chosen(bench)
    baselines = sorted(speedups["baseline_library"].dropna().unique())
    if len(baselines) != 1:
        raise SystemExit(f"expected one baseline library, found {baselines}")
    baseline = baselines[0]
    lines, measured = [], 0
    for row in rows:
        key = (row.operation, row.size, row.library)
        found = speedups[
            (speedups["operation"] == row.operation)
            & (speedups["size"] == row.size)
            & (speedups["library"] == row.library)
        ]
        name = Markdown(md_code(row.operation) + (f" ({md_text(row.note)})" if row.note else ""))
        shown = [name, size_text(row.operation, row.size), display(row.library)]
        if found.empty or missing(found["speedup"].iloc[0]):
            status = cells.loc[
                (cells["operation"] == key[0])
                & (cells["size"] == key[1])
                & (cells["library"] == key[2]),
                "status",
            ]
            why = "not measured" if status.empty else f"not measured ({status.iloc[0]})"
            lines.append(shown + ["–", "", why])
            continue
        s = found.iloc[0]
        settled = s.get("settled")  # null or absent in speedups from before the column
        doubt = settled is not None and not pd.isna(settled) and not bool(settled)
        verdict = str(s["verdict"]) + (", in doubt" if doubt else "")
        interval = f"{s['speedup_ci_low']:.3g} to {s['speedup_ci_high']:.3g}"
        lines.append(shown + [f"{s['speedup']:.3g}", interval, verdict])
        measured += 1
    if not measured:
        # a grid without these cells (a small test grid, say) would leave an empty table
        raise SystemExit(f"none of the {len(rows)} cells has a speedup in {results}")
    header = ["operation", "size", "library", f"speedup over {display(baseline)}"]
    header += ["95% interval", "verdict"]
    margins = speedups["margin"].dropna().unique()
    margin = float(margins[0]) if len(margins) == 1 else None
    shown_libraries = [baseline] + sorted({r.library for r in rows} - {baseline})
    body = md_table(header, lines, "lrlrll")
    note = textwrap.fill(stamp(bench, shown_libraries, margin), LINE_LENGTH, break_long_words=False)
    return f"{body}\n\n{note}\n"


def rewrite(text: str, block: str) -> str:
    """``text`` with what lies between START and END replaced by ``block``."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < 0 or end < start or text.count(START) != 1 or text.count(END) != 1:
        raise ValueError(f"the file needs one {START} line followed by one {END} line")
    head = text[: start + len(START)]
    return f"{head}\n{block.strip()}\n{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="results", type=Path)
    parser.add_argument("--write", type=Path, metavar="README", help="rewrite its marked block")
    parser.add_argument("--host", help="the host to show, where the folder holds several")
    parser.add_argument(
        "--row",
        action="append",
        type=parse_row,
        metavar="OPERATION:SIZE:LIBRARY",
        help="show these cells instead of the README's list (repeat the option)",
    )
    args = parser.parse_args(argv)
    block = table(args.results, tuple(args.row) if args.row else ROWS, args.host)
    if args.write is None:
        sys.stdout.write(block)
        return 0
    args.write.write_text(rewrite(args.write.read_text(), block))
    print(f"rewrote the table of {args.write} from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
