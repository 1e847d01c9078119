"""Do two separate runs of the same cells agree? (a benchmark, not a test)

Measures each cell twice, each time the workflow's way (a fresh supervised worker process),
with the other cells in between, and prints the ratio of the two medians.

    .venv/bin/python benchmarks/repeatability.py [--write] [library:operation:size ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _report import cell_median, write_section
from accuracy import DEFAULT_CELLS, TIMING

from numbench import inputs


def median_of(cell: str, tmp: Path, run: int) -> float:
    library, operation, size = cell.split(":")
    path = tmp / f"{operation}-{size}.npz"
    if not path.exists():
        inputs.write(operation, int(size), 20261121, path)
    out = tmp / f"{run}-{library}-{operation}-{size}.parquet"
    return cell_median(library, operation, size, path, out, TIMING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cells", nargs="*", default=DEFAULT_CELLS)
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        first = {c: median_of(c, tmp, 1) for c in args.cells}
        second = {c: median_of(c, tmp, 2) for c in args.cells}
    lines = ["| cell | run 1 | run 2 | ratio |", "|---|---:|---:|---:|"]
    for c in args.cells:
        lines.append(
            f"| {c} | {first[c] * 1e6:.2f} µs | {second[c] * 1e6:.2f} µs | {second[c] / first[c]:.3f} |"
        )
    body = "## Repeatability: the same cells in two separate runs\n\n" + "\n".join(lines)
    print(body)
    if args.write:
        write_section("repeatability", "python benchmarks/repeatability.py --write", body)


if __name__ == "__main__":
    main()
