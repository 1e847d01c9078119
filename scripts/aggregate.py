"""Entry point of rule aggregate: one row per cell with its statistics.

The cells' inputs files are checked too: a corrupt cell or inputs file stops it with a
message naming the file and the command that remakes it."""

import argparse
import sys

import _path  # noqa: F401

from numbench.analyse.aggregate import aggregate
from numbench.contract import CorruptFile

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--output", required=True)
parser.add_argument("--samples", required=True, help="where every sample of the ok cells goes")
parser.add_argument("--inputs", nargs="+", required=True, help="the cells' inputs files")
parser.add_argument("--cells", nargs="+", required=True)
parser.add_argument("--roofs", help="results/roofs.parquet: place each cell on its roofline")
args = parser.parse_args()
try:
    table = aggregate(
        args.cells, args.output, inputs=args.inputs, samples_output=args.samples, roofs=args.roofs
    )
except CorruptFile as exc:
    print(f"aggregate: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"aggregate: {table.num_rows} cells -> {args.output}")
