"""Entry point of rule speedups: every non-baseline ok cell against the baseline."""

import argparse

import _path  # noqa: F401

from numbench.analyse.speedups import write_speedups

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--samples", required=True)
parser.add_argument("--baseline-library", required=True)
parser.add_argument("--baseline-device", required=True)
parser.add_argument("--margin", type=float, required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()
result = write_speedups(
    args.benchmarks,
    args.samples,
    args.output,
    args.baseline_library,
    args.baseline_device,
    args.margin,
)
print(f"speedups: {len(result)} rows -> {args.output}")
