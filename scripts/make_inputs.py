"""Entry point of rule inputs: seeded arrays and the float64 reference output."""

import argparse
import json

import _path  # noqa: F401

from numbench import inputs

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--operation", required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--output", required=True)
parser.add_argument("--params", default="", help="the operation's parameters as JSON")
args = parser.parse_args()
params = json.loads(args.params) if args.params else {}
inputs.write(args.operation, args.size, args.seed, args.output, params)
print(f"inputs: {args.operation} n={args.size} seed={args.seed} params={params} -> {args.output}")
