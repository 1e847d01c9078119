"""Entry point of rule inputs: seeded arrays and the float64 reference output."""

import argparse

import _path  # noqa: F401

from numbench import inputs

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--operation", required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()
inputs.write(args.operation, args.size, args.seed, args.output)
print(f"inputs: {args.operation} n={args.size} seed={args.seed} -> {args.output}")
