"""Entry point of rule history: the finished run added to the history store."""

import argparse
import json

import _path  # noqa: F401

from numbench.contract import write_text_atomic
from numbench.history import add_results

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--results", required=True, help="the results folder")
parser.add_argument("--store", required=True, help="the history's folder")
parser.add_argument("--output", required=True, help="what was added, as JSON")
args = parser.parse_args()
done = add_results(args.results, args.store)
for run in done:
    what = "added" if run["added"] else "already in the history"
    print(f"history: run {run['run_id']} ({run['host']}) {what} -> {args.store}")
write_text_atomic(json.dumps({"store": args.store, "runs": done}, indent=1) + "\n", args.output)
