"""Entry point of rules cell and early_round: measure one cell, or one early round of it,
from its spec (numbench.spec.CellSpec as JSON).

Every outcome of the library is written as the cell's status, and the script exits 0. A
fault of numbench's machinery or of the host (the timing lock, a file that cannot be
written, a worker that cannot start) writes no file and exits with FAILED_EXIT, so that
Snakemake's --retries and the next run measure the cell again. A job stopped by SIGTERM
unwinds (the workflow's processes get their CPUs back, the lock is let go) and exits 143.

The job takes the host's timing lock before it imports anything heavy (the supervisor, and
with it pyarrow, NumPy and the operation's code): a job that waits for the lock beside a
cell being timed sleeps in it and takes no CPU time (numbench.measure.host_lock).
"""

import argparse
import sys
import traceback

import _path  # noqa: F401

from numbench.errors import MachineryFault
from numbench.measure.host_lock import cell_label, exit_on_sigterm, keep_pandas_out, timing_lock
from numbench.spec import CellSpec

#: the exit status of a job that failed for the machinery or the host
FAILED_EXIT = 1

keep_pandas_out()
exit_on_sigterm()

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--spec", required=True, help="the cell's spec, as JSON")
parser.add_argument("--output", required=True)
parser.add_argument("--round", type=int, help="measure only this early round, and write it as JSON")
parser.add_argument(
    "--earlier", nargs="*", default=[], help="the cell's early rounds, measured before"
)
parser.add_argument(
    "--lock-timeout-s",
    type=float,
    help="give up waiting for the host's timing lock after this long (default: no limit)",
)
parser.add_argument(
    "--quiet-below",
    type=float,
    default=0.1,
    help="wait, lock held, until others take at most this share of all CPUs' time",
)
parser.add_argument(
    "--quiet-wait-s", type=float, default=0.0, help="wait for quiet at most this long (0: never)"
)
args = parser.parse_args()
spec = CellSpec.from_json(args.spec)
try:
    # the supervisor's own block of the lock enters within this one (host_lock.timing_lock)
    with timing_lock(holder=cell_label(spec, args.round), timeout_s=args.lock_timeout_s):
        from numbench.measure.quiet import QuietSettings
        from numbench.measure.supervisor import run_cell, run_round

        quiet = QuietSettings(args.quiet_below, args.quiet_wait_s)
        if args.round is not None:
            runs = run_round(
                spec, args.round, args.output, lock_timeout_s=args.lock_timeout_s, quiet=quiet
            )
            done = ", ".join(f"{r.role} {r.report.status}" for r in runs)
            print(f"round {args.round}: {done}")
        else:
            result = run_cell(
                spec,
                args.output,
                earlier=args.earlier,
                lock_timeout_s=args.lock_timeout_s,
                quiet=quiet,
            )
            print(f"cell: {result.status}" + (f": {result.error}" if result.error else ""))
except Exception as exc:  # noqa: BLE001 - the job fails, with the reason and no cell file
    if not isinstance(exc, MachineryFault):
        traceback.print_exc()  # a bug of numbench's: the trace is what to report
    print(
        f"cell job failed: {exc}\n"
        f"This is a fault of numbench or of this host, not of {spec.library}: no file was "
        f"written for {args.output}, so Snakemake's --retries or the next run measures it "
        "again.",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(FAILED_EXIT)
