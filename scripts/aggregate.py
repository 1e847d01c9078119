"""Entry point of rule aggregate: one row per cell with its statistics."""

import argparse
import sys

import _path  # noqa: F401

from numbench.aggregate import aggregate
from numbench.tables import CorruptFile

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--output", required=True)
parser.add_argument("cells", nargs="+")
args = parser.parse_args()
try:
    table = aggregate(args.cells, args.output)
except CorruptFile as exc:
    print(f"aggregate: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"aggregate: {table.num_rows} cells -> {args.output}")
