"""Entry point of rule site: the results site built from the history store."""

import argparse

import _path  # noqa: F401

from numbench.site import build_site

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--history", required=True, help="the history's folder")
parser.add_argument("--out", required=True, help="the site's folder")
args = parser.parse_args()
built = build_site(args.history, args.out)
for skipped in built.skipped:
    print(f"history: skipped {skipped}")
print(f"site: {len(built.pages)} pages -> {args.out}; open {built.pages[0]}")
