"""Entry point of rule summary: results/summary.md (and its HTML twin for the report)."""

import argparse

import _path  # noqa: F401

from numbench.report.summary import write_summary

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--speedups", required=True)
parser.add_argument("--findings", required=True, help="results/findings.parquet")
parser.add_argument("--precision", help="results/precision.parquet")
parser.add_argument("--scaling", help="results/scaling.parquet")
parser.add_argument("--roofs", help="results/roofs.parquet: the roofline section")
parser.add_argument("--versions", help="results/versions.parquet: the versions section")
parser.add_argument("--charts-dir", required=True, help="where the charts are, for the links")
parser.add_argument("--output", required=True)
parser.add_argument("--html-output")
args = parser.parse_args()
write_summary(
    args.benchmarks,
    args.speedups,
    args.findings,
    args.output,
    args.charts_dir,
    html_output=args.html_output,
    precision=args.precision,
    scaling=args.scaling,
    roofs=args.roofs,
    versions=args.versions,
)
print(f"summary -> {args.output}")
