"""Entry point of rule versions: every cell of the config's environments against the base."""

import argparse

import _path  # noqa: F401

from numbench.analyse.versions import write_versions

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--cells", nargs="+", required=True, help="the environments' cell files")
parser.add_argument("--margin", type=float, required=True, help="the config's margin")
parser.add_argument(
    "--benchmarks",
    help="results/benchmarks.parquet: the base cells' status and version, for environment "
    "cells whose file does not hold their base processes (optional)",
)
parser.add_argument("--output", required=True)
args = parser.parse_args()
result = write_versions(args.cells, args.output, args.margin, benchmarks=args.benchmarks)
changed = int(result["change"].isin(["slower", "faster", "broken"]).sum())
print(f"versions: {len(result)} rows, {changed} changed -> {args.output}")
