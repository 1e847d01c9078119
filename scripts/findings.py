"""Entry point of rule findings: results/findings.parquet, what the summary will say."""

import argparse

import _path  # noqa: F401

from numbench.analyse.findings import write_findings

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--speedups", required=True)
parser.add_argument("--crossovers", required=True)
parser.add_argument("--baseline-library", required=True)
parser.add_argument("--baseline-device", required=True)
parser.add_argument("--margin", type=float, required=True, help="the config's margin")
parser.add_argument("--precision", help="results/precision.parquet")
parser.add_argument("--scaling", help="results/scaling.parquet")
parser.add_argument("--roofs", help="results/roofs.parquet: the roofline findings")
parser.add_argument("--output", required=True)
args = parser.parse_args()
write_findings(
    args.benchmarks,
    args.speedups,
    args.crossovers,
    args.output,
    args.baseline_library,
    args.baseline_device,
    args.margin,
    precision=args.precision,
    scaling=args.scaling,
    roofs=args.roofs,
)
print(f"findings -> {args.output}")
