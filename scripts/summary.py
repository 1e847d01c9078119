"""Entry point of rule summary: results/summary.md."""

import argparse

import _path  # noqa: F401

from numbench.summary import write_summary

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()
write_summary(args.benchmarks, args.output)
print(f"summary -> {args.output}")
