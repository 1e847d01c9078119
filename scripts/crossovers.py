"""Entry point of rule crossovers: the size where each library starts to beat the baseline."""

import argparse

import _path  # noqa: F401

from numbench.analyse.speedups import write_crossovers

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--speedups", required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()
result = write_crossovers(args.speedups, args.output)
print(f"crossovers: {len(result)} rows -> {args.output}")
