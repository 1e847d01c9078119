"""Entry point of rule charts: every chart as .html, .svg and .png under one folder."""

import argparse

import _path  # noqa: F401

from numbench.report.charts import write_charts

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--speedups", required=True)
parser.add_argument("--crossovers", required=True)
parser.add_argument("--baseline-library", required=True)
parser.add_argument("--baseline-device", required=True)
parser.add_argument("--precision", help="results/precision.parquet")
parser.add_argument("--scaling", help="results/scaling.parquet")
parser.add_argument("--roofs", help="results/roofs.parquet: the roofline charts")
parser.add_argument("--versions", help="results/versions.parquet: the environments' charts")
parser.add_argument("--outdir", required=True)
args = parser.parse_args()
written = write_charts(
    args.benchmarks,
    args.speedups,
    args.crossovers,
    args.outdir,
    args.baseline_library,
    args.baseline_device,
    precision=args.precision,
    scaling=args.scaling,
    roofs=args.roofs,
    versions=args.versions,
)
print(f"charts: {len(written)} files -> {args.outdir}")
