"""Entry point of rule inputs: seeded arrays and the float64 reference output."""

import argparse
import json
import sys

import _path  # noqa: F401

from numbench.measure import inputs

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--operation", required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--output", required=True)
parser.add_argument("--params", default="", help="the operation's parameters as JSON")
args = parser.parse_args()
params = json.loads(args.params) if args.params else {}
try:
    inputs.write(args.operation, args.size, args.seed, args.output, params)
except OSError as exc:  # a full disk, a folder that is not writable: the job fails, named
    sys.exit(f"inputs: cannot write {args.output}: {exc.strerror or exc}")
print(f"inputs: {args.operation} n={args.size} seed={args.seed} params={params} -> {args.output}")
