"""Entry point of rule site: the results site built from the history store, steps found with
the config's margin (as ``numbench history changes`` finds them)."""

import argparse
import sys

import _path  # noqa: F401

from numbench.history import HistoryError
from numbench.site import SiteError, build_site

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--history", required=True, help="the history's folder")
parser.add_argument("--out", required=True, help="the site's folder")
parser.add_argument("--margin", required=True, type=float, help="a step passes this factor")
args = parser.parse_args()
try:
    built = build_site(args.history, args.out, args.margin)
except (HistoryError, SiteError) as exc:
    print(f"site: {exc}", file=sys.stderr)
    sys.exit(1)
for skipped in built.skipped:
    print(f"history: skipped {skipped}")
print(f"site: {len(built.pages)} pages -> {args.out}; open {built.pages[0]}")
