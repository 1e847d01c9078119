"""Entry point of rule cell: measure one cell from its spec (numbench.spec.CellSpec as JSON)."""

import argparse

import _path  # noqa: F401

from numbench.cell import keep_pandas_out, run_cell
from numbench.spec import CellSpec

keep_pandas_out()

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--spec", required=True, help="the cell's spec, as JSON")
parser.add_argument("--output", required=True)
args = parser.parse_args()
result = run_cell(CellSpec.from_json(args.spec), args.output)
print(f"cell: {result.status}" + (f": {result.error}" if result.error else ""))
