"""Compare two numbench result sets cell by cell (versions, machines, before/after).

    python scripts/compare.py OLD NEW [--margin 1.1] [--output changes.md] [--fail-on-slowdown]

OLD and NEW are results/ folders or benchmarks.parquet files. Prints a Markdown table sorted
by change (largest slowdowns first). Exit status: 0; 1 with --fail-on-slowdown when a cell is
slower beyond the margin; 2 on bad input (the message names the file and the problem)."""

import argparse
import sys

import _path  # noqa: F401

from numbench.compare import EXIT_SLOWER, CompareError, counts, run
from numbench.config import default_margin
from numbench.stats import SLOWER
from numbench.tables import write_text_atomic

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("old", help="the reference: a results/ folder or a benchmarks.parquet")
parser.add_argument("new", help="the one to judge: a results/ folder or a benchmarks.parquet")
parser.add_argument(
    "--margin",
    type=float,
    default=None,
    help="same speed within this factor (default: the config's margin)",
)
parser.add_argument("--output", help="also write the Markdown table here")
parser.add_argument(
    "--fail-on-slowdown", action="store_true", help="exit 1 when any cell is slower"
)
args = parser.parse_args()
margin = args.margin if args.margin is not None else default_margin()
if margin < 1:
    print(f"compare: --margin = {margin:g} must be >= 1", file=sys.stderr)
    sys.exit(2)
try:
    table, text = run(args.old, args.new, margin)
except CompareError as exc:
    print(f"compare: {exc}", file=sys.stderr)
    sys.exit(2)
print(text)
if args.output:
    write_text_atomic(text, args.output)
if args.fail_on_slowdown and counts(table).get(SLOWER, 0):
    print(f"compare: {counts(table)[SLOWER]} cell(s) slower beyond {margin:g}x", file=sys.stderr)
    sys.exit(EXIT_SLOWER)
