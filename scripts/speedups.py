"""Entry point of rule speedups: every non-baseline ok cell against the baseline."""

import argparse
import sys

import _path  # noqa: F401

from numbench.speedups import write_speedups
from numbench.tables import CorruptFile

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--benchmarks", required=True)
parser.add_argument("--baseline-library", required=True)
parser.add_argument("--baseline-device", required=True)
parser.add_argument("--output", required=True)
parser.add_argument("cells", nargs="+")
args = parser.parse_args()
try:
    result = write_speedups(
        args.benchmarks, args.cells, args.output, args.baseline_library, args.baseline_device
    )
except CorruptFile as exc:
    print(f"speedups: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"speedups: {len(result)} rows -> {args.output}")
