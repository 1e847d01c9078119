"""Compare two numbench result sets cell by cell (versions, machines, before/after).

    python scripts/compare.py OLD NEW [--margin 1.1] [--output changes.md] [--json]
                              [--fail-on-slowdown]

OLD and NEW are results/ folders or benchmarks.parquet files. Prints what differs between the
two environments, then a Markdown table sorted by change (broken cells first, then the largest
slowdowns); with --json, the same as one JSON document. Exit status: 0; 1 with
--fail-on-slowdown when a cell is slower beyond the margin or was ok and is not any more;
2 on bad input (the message names the file or the option and the problem)."""

import argparse
import sys

import _path  # noqa: F401

from numbench.compare import BROKEN, EXIT_SLOWER, CompareError, counts, regressions, run
from numbench.config import default_margin
from numbench.stats import SLOWER
from numbench.tables import write_text_atomic

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("old", help="the reference: a results/ folder or a benchmarks.parquet")
parser.add_argument("new", help="the one to judge: a results/ folder or a benchmarks.parquet")
parser.add_argument(
    "--margin",
    default=None,
    help="same speed within this factor, a finite number >= 1 (default: the config's margin)",
)
parser.add_argument("--output", help="also write the table (Markdown, or JSON) here")
parser.add_argument("--json", action="store_true", help="write JSON instead of Markdown")
parser.add_argument(
    "--fail-on-slowdown",
    action="store_true",
    help="exit 1 when any cell is slower, or was ok and is not any more",
)
args = parser.parse_args()
margin = args.margin if args.margin is not None else default_margin()
try:
    table, text = run(args.old, args.new, margin, as_json=args.json)
except CompareError as exc:
    print(f"compare: {exc}", file=sys.stderr)
    sys.exit(2)
print(text)
if args.output:
    write_text_atomic(text.rstrip("\n") + "\n", args.output)
if args.fail_on_slowdown and len(regressions(table)):
    c = counts(table)
    print(
        f"compare: {c.get(SLOWER, 0)} cell(s) slower beyond {float(margin):g}x, "
        f"{c.get(BROKEN, 0)} cell(s) broken (ok before, not now)",
        file=sys.stderr,
    )
    sys.exit(EXIT_SLOWER)
