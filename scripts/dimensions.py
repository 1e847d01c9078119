"""Entry point of rule dimensions: float32 against float64, and N threads against 1."""

import argparse

import _path  # noqa: F401

from numbench.analyse.dimensions import write_dimensions

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--samples", required=True)
parser.add_argument("--margin", type=float, required=True, help="the config's margin")
parser.add_argument("--precision", required=True)
parser.add_argument("--scaling", required=True)
args = parser.parse_args()
prec, scal = write_dimensions(args.samples, args.precision, args.scaling, args.margin)
print(f"dimensions: {len(prec)} precision rows -> {args.precision}")
print(f"dimensions: {len(scal)} scaling rows -> {args.scaling}")
