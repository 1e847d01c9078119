"""A timing job (rules ``cell`` and ``early_round``, through ``scripts/run_cell.py``): measure
one cell, or one early round of it, from its spec (``numbench.spec.CellSpec`` as JSON).

Every outcome of the library is written as the cell's status, and the job exits 0. A fault of
numbench's machinery or of the host (the timing lock, a file that cannot be written, a worker
that cannot start) writes no file and exits with ``FAILED_EXIT``, so that Snakemake's
``--retries`` and the next run measure the cell again. A job stopped by SIGTERM unwinds (the
workflow's processes get their CPUs back, the lock is let go) and exits 143.

The job takes the host's timing lock before it imports anything heavy (the supervisor, and
with it pyarrow, NumPy and the operation's code): a job that waits for the lock beside a cell
being timed sleeps in it and takes no CPU time (``numbench.measure.host_lock``).

**A supervisor forked from a zygote** (``run``, with ``worker_start: fork``). A job's process
is started by Snakemake for every early round and every cell, and importing the supervisor
was most of what it did besides measuring. So, as workers are forked from a zygote that has
imported their library (``numbench.measure.zygote``), a job hands itself to a zygote that has
imported the supervisor (``zygote.JOB``): the zygote forks a process that runs the job
(``main``) with the job's arguments, its log for output, its folder and its environment,
while the job's own process waits for it, passes a SIGTERM on to it and exits as it did. The
forked job takes the timing lock itself, as a job in its own process does, and is a process
of its own: its own heap, its workers its own. It knows the job's process and that one's
parent (``zygote.JOB_PID_ENV``, ``zygote.JOB_PARENT_ENV``), so that the workflow's processes are
still found above the job (``numbench.measure.activity.job_parent``). The zygote's key holds
a digest of numbench's own files (``package_digest``): code edited during a run is
what the next job runs. Where no zygote serves yet, the job runs in its own process and,
before it lets go of the lock, starts one for the jobs after it (so its import never runs
beside a cell being timed); where the zygote refuses to fork (a thread left running by its
import), every job runs in its own process, as with ``worker_start: exec``. A job that Slurm
runs starts none: it is the only job of its Snakemake, whose end would end the zygote.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys

from numbench.errors import MachineryFault
from numbench.measure import zygote

#: the exit status of a job that failed for the machinery or the host
FAILED_EXIT = 1
#: how long a job that starts the zygote waits for it to serve
LAUNCH_TIMEOUT_S = 120.0
#: set in a job that Slurm runs: it starts no zygote
SLURM_JOB = "SLURM_JOB_ID"


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--spec", required=True, help="the cell's spec, as JSON")
    parse.add_argument("--output", required=True)
    parse.add_argument(
        "--round", type=int, help="measure only this early round, and write it as JSON"
    )
    parse.add_argument(
        "--earlier", nargs="*", default=[], help="the cell's early rounds, measured before"
    )
    parse.add_argument(
        "--lock-timeout-s",
        type=float,
        help="give up waiting for the host's timing lock after this long (default: no limit)",
    )
    parse.add_argument(
        "--quiet-below",
        type=float,
        default=0.1,
        help="wait, lock held, until others take at most this share of all CPUs' time",
    )
    parse.add_argument(
        "--quiet-wait-s",
        type=float,
        default=0.0,
        help="wait for quiet at most this long (0: never)",
    )
    return parse


def main(argv: list[str], then=None) -> int:
    """The job in this process: its exit status. ``then``: called with the lock still held,
    once the cell (or round) is written."""
    import traceback

    from numbench.cells import round_sd_place
    from numbench.machine.system import process_started_unix
    from numbench.measure.activity import job_pid
    from numbench.measure.host_lock import (
        cell_label,
        exit_on_sigterm,
        keep_pandas_out,
        timing_lock,
    )
    from numbench.spec import CellSpec

    keep_pandas_out()
    exit_on_sigterm()
    args = parser().parse_args(argv)
    spec = CellSpec.from_json(args.spec)
    # the process Snakemake started for this job, an interpreter's start and all
    started = process_started_unix(job_pid())
    try:
        # the supervisor's own block of the lock enters within this one (host_lock.timing_lock)
        with timing_lock(holder=cell_label(spec, args.round), timeout_s=args.lock_timeout_s):
            from numbench.measure.quiet import QuietSettings
            from numbench.measure.supervisor import run_cell, run_round

            quiet = QuietSettings(args.quiet_below, args.quiet_wait_s)
            if args.round is not None:
                runs = run_round(
                    spec,
                    args.round,
                    args.output,
                    lock_timeout_s=args.lock_timeout_s,
                    quiet=quiet,
                    job_started_unix=started,
                )
                done = ", ".join(f"{r.role} {r.report.status}" for r in runs)
                print(f"round {args.round}: {done}", flush=True)
            else:
                result = run_cell(
                    spec,
                    args.output,
                    earlier=args.earlier,
                    lock_timeout_s=args.lock_timeout_s,
                    quiet=quiet,
                    round_sd_at=round_sd_place(args.output),
                    job_started_unix=started,
                )
                print(
                    f"cell: {result.status}" + (f": {result.error}" if result.error else ""),
                    flush=True,
                )
            if then is not None:
                then()
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
        return FAILED_EXIT
    return 0


def zygote_environment() -> dict[str, str]:
    """The environment a job's zygote gets, and its key: this job's, with the folder of the
    numbench this job runs first on ``PYTHONPATH``, as a worker's is."""
    env = dict(os.environ)
    env["PYTHONPATH"] = zygote.with_first(str(zygote.package_root().parent), env.get("PYTHONPATH"))
    return env


def run(argv: list[str]) -> int:
    """The job's entry point: handed to a process a zygote forks for it where one serves
    (``worker_start: fork``), else run here (``main``), starting a zygote for the jobs after
    it; its exit status either way.

    Handing over imports only the zygote's module: the job's own process, started by
    Snakemake for every job, then only waits, so what it imports besides is paid by every
    job for nothing. A SIGTERM before the hand-over ends it as the default does (it holds
    nothing yet); after, it is passed on (``_hand_over``). A spec or arguments it cannot
    read go to ``main``, which says what is wrong."""
    if _worker_start(argv) != "fork" or not zygote.supported():
        return main(argv)
    env, code = zygote_environment(), zygote.package_digest()
    name = zygote.socket_name(zygote.JOB, sys.executable, env, code=code)
    handed, how = _hand_over(argv, env, code)
    if handed is not None:
        return handed
    if how != zygote.NOT_SERVING or SLURM_JOB in os.environ:
        # a zygote serves and refuses (jobs run in their own process), or this job is a run
        # of its own (a Slurm job runs one job, and its zygote would end with it)
        return main(argv)

    def start_zygote() -> None:
        from numbench.measure.process import run_pid

        refused = zygote.launch(
            zygote.JOB, sys.executable, env, name, LAUNCH_TIMEOUT_S, watch=run_pid()
        )
        if refused:
            print(f"job: later jobs run in their own process: {refused}", flush=True)

    return main(argv, then=start_zygote)


def _worker_start(argv: list[str]) -> str | None:
    """The ``worker_start`` of the spec that ``argv``'s ``--spec`` gives, without importing
    ``CellSpec``; None where it cannot be read."""
    parse = argparse.ArgumentParser(add_help=False)
    parse.add_argument("--spec")
    try:
        told = json.loads(parse.parse_known_args(argv)[0].spec or "")
    except (ValueError, SystemExit):
        return None
    return told.get("worker_start") if isinstance(told, dict) else None


def _hand_over(argv: list[str], env: dict[str, str], code: str) -> tuple[int | None, str]:
    """(the exit status of the job run by a process its zygote forked, how) or (None, why
    not: ``zygote.NOT_SERVING`` where no zygote serves)."""
    told = {**env, zygote.JOB_PID_ENV: str(os.getpid()), zygote.JOB_PARENT_ENV: str(os.getppid())}
    cmd = [sys.executable, "-m", zygote.JOB_MODULE, *argv]
    forked, how = zygote.fork_worker(zygote.JOB, cmd, told, launch_one=False, code=code)
    if forked is None:
        return None, how

    def pass_on(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(forked.pid, signal.SIGTERM)  # it unwinds, lets go of the lock, exits 143

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    try:
        status = forked.wait()
    except MachineryFault as exc:
        print(f"cell job failed: {exc}; the next run measures the cell again", file=sys.stderr)
        return FAILED_EXIT, how
    return (128 - status if status < 0 else status), how  # a signal's, as a shell says it


def leave(code: int | None) -> None:
    """Exit a forked job with ``code`` once its output is written, without the interpreter's
    teardown (``numbench.measure.worker.leave``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else FAILED_EXIT)


def forked(argv: list[str]) -> None:
    """Run the job in a process its zygote forked, and exit with its status."""
    print("job: run by a process forked from a zygote that had imported the supervisor")
    try:
        status = main(argv)
    except SystemExit as stop:  # SIGTERM (exit_on_sigterm), or arguments argparse refused
        status = stop.code
    leave(status)


if __name__ == "__main__":
    forked(sys.argv[1:])
