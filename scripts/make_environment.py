"""Entry point of rule environment: one of the config's environments, made once and reused."""

import argparse
import json
import sys
from pathlib import Path

import _path  # noqa: F401

from numbench.config.environments import EnvironmentBuildError, build

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--name", required=True)
parser.add_argument("--pins", required=True, help="the pins, as a JSON list")
parser.add_argument("--folder", required=True, help="where the virtual environment goes")
parser.add_argument("--output", required=True, help="written last, once it works")
args = parser.parse_args()
try:
    record = build(args.name, json.loads(args.pins), args.folder, args.output, Path(_path.SRC))
except EnvironmentBuildError as exc:
    print(f"environment: {exc}", file=sys.stderr)
    sys.exit(1)
versions = ", ".join(f"{k} {v}" for k, v in sorted(record["versions"].items()))
print(f"environment {args.name}: {versions} -> {args.folder}")
