"""Entry point of rules cell and spread_round: measure one cell, or one spread round of it,
from its spec (numbench.spec.CellSpec as JSON)."""

import argparse

import _path  # noqa: F401

from numbench.cell import keep_pandas_out, run_cell, run_round
from numbench.spec import CellSpec

keep_pandas_out()

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--spec", required=True, help="the cell's spec, as JSON")
parser.add_argument("--output", required=True)
parser.add_argument(
    "--round", type=int, help="measure only this spread round, and write it as JSON"
)
parser.add_argument(
    "--earlier", nargs="*", default=[], help="the cell's spread rounds, measured before"
)
args = parser.parse_args()
spec = CellSpec.from_json(args.spec)
if args.round is not None:
    runs = run_round(spec, args.round, args.output)
    print(f"round {args.round}: " + ", ".join(f"{r.role} {r.report.status}" for r in runs))
else:
    result = run_cell(spec, args.output, earlier=args.earlier)
    print(f"cell: {result.status}" + (f": {result.error}" if result.error else ""))
