"""Entry point of rules roofs and roofs_at_end: this host's roofs (memory bandwidth at each
cache level, DRAM, compute; on a GPU the transfers too) for every (device, dtype, threads) of
the grid, measured under the host's timing lock, into results/roofs.parquet; at the end of the
run after the start's rows (``--earlier``), each row saying its ``--round``."""

import argparse
import json
import sys
import time

import _path  # noqa: F401

from numbench.errors import MachineryFault
from numbench.roofline.measure import measure_roofs

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--dims", required=True, help='JSON: [["cpu", "float64", 1], ...]')
parser.add_argument(
    "--libraries",
    required=True,
    help='JSON: each device\'s libraries, {"cpu": ["numpy", ...], ...}',
)
parser.add_argument("--allocator", required=True, help="the config's allocator")
parser.add_argument("--lock-timeout-s", type=float, default=None)
parser.add_argument(
    "--max-cpu-taken",
    type=float,
    default=None,
    help="measure a job again while other programs took more than this share of its CPUs",
)
parser.add_argument("--round", choices=("start", "end"), default="start")
parser.add_argument("--earlier", default=None, help="the roofs measured before, kept ahead")
parser.add_argument("--output", required=True)
args = parser.parse_args()
t0 = time.perf_counter()
dims = [(device, dtype, int(threads)) for device, dtype, threads in json.loads(args.dims)]
try:
    table = measure_roofs(
        dims,
        json.loads(args.libraries),
        args.allocator,
        args.output,
        lock_timeout_s=args.lock_timeout_s,
        max_cpu_taken=args.max_cpu_taken,
        round_name=args.round,
        earlier=args.earlier,
    )
except MachineryFault as exc:
    print(f"roofs: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"roofs: {table.num_rows} rows -> {args.output} in {time.perf_counter() - t0:.1f} s")
