"""Entry point of rule cell: measure one (library, device, operation, size) cell."""

import argparse
import json

import _path  # noqa: F401

from numbench.cell import CellSpec, keep_pandas_out, run_cell

keep_pandas_out()

parser = argparse.ArgumentParser(description=__doc__)
for name in ("library", "device", "operation", "dtype", "inputs", "output"):
    parser.add_argument(f"--{name}", required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--timeout-s", type=float, default=600.0)
parser.add_argument("--memory-limit-mb", type=float, default=0.0, help="0: no limit")
parser.add_argument("--min-sample-time-s", type=float, default=0.02)
parser.add_argument("--min-samples", type=int, default=5)
parser.add_argument("--max-samples", type=int, default=50)
parser.add_argument("--budget-s", type=float, default=0.4)
parser.add_argument("--params", default="", help="the operation's parameters as JSON")
args = parser.parse_args()

spec = CellSpec(
    library=args.library,
    device=args.device,
    operation=args.operation,
    size=args.size,
    dtype=args.dtype,
    threads=args.threads,
    inputs=args.inputs,
    params=json.loads(args.params) if args.params else {},
    timeout_s=args.timeout_s,
    memory_limit_mb=args.memory_limit_mb or None,
    timing={
        "min_sample_time_s": args.min_sample_time_s,
        "min_samples": args.min_samples,
        "max_samples": args.max_samples,
        "budget_s": args.budget_s,
    },
)
meta = run_cell(spec, args.output)
print(f"cell: {meta['status']}" + (f": {meta.get('error')}" if meta.get("error") else ""))
