"""JAX at about a million elements: numbench's fresh processes against one long-lived process.

The same cell (JAX ``poly``, float64, the same inputs file, the same threads) timed two
ways, interleaved so that a drift in the machine's load touches both alike:

* **fresh**: the workflow's way, a supervised worker process per measurement
  (``_report.cell_median``: numbench's worker, its timer, its environment);
* **long**: one process, started with the very environment the worker gets
  (``numbench.measure.process.worker_environment``: thread limits, allocator settings,
  the library's own variables, pinned to as many CPUs), which builds the kernel with the
  worker's own steps and then times it a suite's way, call after call with
  ``block_until_ready``, in rounds of ``--calls`` calls. Before and after its rounds it
  also runs numbench's worker measurement itself (``numbench.measure.worker.measure``) in
  that process: first thing, as in a fresh worker, and again once the process is warm.

Each round reports its median and its mean per call and the minor page faults per call it
took (``getrusage``), the lead for a process whose output buffers are fresh pages on every
call. numbench's sample is the mean of a loop of calls (at least ``min_sample_time_s``
long), and the cell's figure the median of those samples; a harness that times each call
alone and takes the median of the calls reports the fastest common call instead: where a
share of calls is slowed (by other programs, on a busy machine) the two differ though both
processes are alike, which the mean's row shows.
``--env NAME=VALUE`` adds a variable to both sides (``MALLOC_ARENA_MAX=1``, say).

    .venv/bin/python benchmarks/jax_long_process.py [--size 1048576] [--threads 1]
        [--processes 4] [--rounds 6] [--calls 200] [--env MALLOC_ARENA_MAX=1] [--example]
        [--markdown]

``--example [FILE]`` times the example suite's JAX kernel (``examples/eos``, already under
``jax.jit``, handed over as it is; FILE: a copy of its ``eos.py``, changed) on its own
inputs (``generate_inputs(size, 42)``) instead of the built-in ``poly``. Its NumPy kernel writes into ``t``, so numbench hands every call a
fresh ``t``; JAX arrays are never written into, and the long loop reuses its arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import ROOT, cell_median, publish, workflow_spec

OPERATION = "poly"
#: ``--example``: the example suite's JAX kernel (already under ``jax.jit``), its own inputs
EXAMPLE = ("eos", ROOT / "examples" / "eos" / "eos.py", 42)
TIMING = {"min_sample_time_s": 0.02, "min_samples": 5, "max_samples": 20, "budget_s": 0.5}


def long_lived(spec_json: str, rounds: int, calls: int) -> dict:
    """In this process (started with the worker's environment): the kernel built by the
    worker's own steps, then ``rounds`` rounds of ``calls`` timed calls, then numbench's
    worker measurement twice. Medians per call in seconds, minor faults per call."""
    from numbench.libraries import pin_cpus
    from numbench.measure import worker
    from numbench.spec import CellSpec

    spec = CellSpec.from_json(spec_json)
    pin_cpus(spec.threads)
    adapter, out = worker.import_library(spec)
    op = loaded = fn = None
    if out.status != "unavailable":
        op = worker.load_operation(spec, adapter, out)
    if op is not None:
        loaded = worker.load_inputs(spec, op, out)
    if loaded is not None:
        fn = worker.kernel(spec, adapter, op, loaded[2], out)
    if fn is None:  # a step that could not go on said why, as a worker would report it
        raise SystemExit(f"the cell cannot run in the long process ({out.status}): {out.error}")
    args = worker.placed_copies(adapter, loaded[0], spec.dtype)
    wait, clock = adapter.sync, time.perf_counter
    measured = [_worker_measure(spec)]  # numbench's own timer, first thing, as in a worker
    first = []
    for _ in range(3):  # compile, then the first calls of a fresh process, each on its own
        t0 = clock()
        wait(fn(*args))
        first.append(clock() - t0)
    harness = []
    for _ in range(rounds):
        faults0, times = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, []
        for _ in range(calls):
            t0 = clock()
            wait(fn(*args))
            times.append(clock() - t0)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        median = statistics.median(times)
        slow = [t for t in times if t > 1.5 * median]
        harness.append(
            {
                "median_s": median,
                "mean_s": statistics.mean(times),
                "faults_per_call": faults / calls,
                # the calls over 1.5 times the median: their share and their range
                "slow_share": len(slow) / calls,
                "slow_range_s": [min(slow), max(slow)] if slow else None,
            }
        )
    measured.append(_worker_measure(spec))  # and again, in a warm process
    return {"first_calls_s": first, "harness": harness, "worker_in_long_process": measured}


def _worker_measure(spec) -> dict:
    """numbench's worker measurement (``numbench.measure.worker.measure``) in this process:
    its median per call, and the minor page faults it took (all of it: first call,
    calibration, samples, the pipelined mode)."""
    from numbench.measure import worker

    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    report = worker.measure(spec)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    return {"median_s": statistics.median(report.samples_s), "faults": faults}


def run_long(spec, rounds: int, calls: int, extra: dict) -> dict:
    """``long_lived`` in a child process started with the worker's environment."""
    from numbench.measure.process import worker_environment

    env = {**worker_environment(spec), **extra}
    cmd = [sys.executable, __file__, "--long", spec.to_json(), str(rounds), str(calls)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the long-lived process failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(args, extra: dict) -> tuple[list[str], dict]:
    """Interleave ``args.processes`` fresh cells and long-lived processes; the table's
    lines and the figures."""
    from numbench.measure import inputs

    fresh, long_runs = [], []
    if args.example:
        name, file, seed = EXAMPLE[0], args.example, EXAMPLE[2]
    else:
        name, file, seed = OPERATION, None, 20261121
    own = (file, seed) if args.example else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}-{args.size}.npz"
        inputs.write(name, args.size, seed, path, operation_file=file and str(file))
        cell = ("jax", name, args.size, path)
        spec = workflow_spec(*cell, TIMING, args.threads, own)
        os.environ.update(extra)  # the supervisor hands its environment on to each worker
        for i in range(args.processes):
            out = Path(tmp) / f"cell-{i}.parquet"
            fresh.append(cell_median(*cell, out, TIMING, args.threads, own))
            long_runs.append(run_long(spec, args.rounds, args.calls, extra))
            print(f"process {i}: fresh {fresh[-1] * 1e3:.3f} ms, long {_long_line(long_runs[-1])}")
    rounds = [r["median_s"] for run in long_runs for r in run["harness"][1:]]
    means = [r["mean_s"] for run in long_runs for r in run["harness"][1:]]
    in_long = [m["median_s"] for run in long_runs for m in run["worker_in_long_process"]]
    fresh_med, long_med = statistics.median(fresh), statistics.median(rounds)
    lines = [
        "| side | median per call | per process |",
        "|---|---:|---|",
        f"| fresh processes (numbench's worker) | {fresh_med * 1e3:.3f} ms | "
        + ", ".join(f"{f * 1e3:.2f}" for f in fresh)
        + " |",
        f"| long process, a harness's loop (rounds 2 on) | {long_med * 1e3:.3f} ms | "
        + ", ".join(_long_line(run) for run in long_runs)
        + " |",
        f"| long process, the same loop's mean per call | {statistics.median(means) * 1e3:.3f} "
        "ms | " + ", ".join(f"{m * 1e3:.2f}" for m in means) + " |",
        f"| long process, numbench's worker measurement (first, last) | "
        f"{statistics.median(in_long) * 1e3:.3f} ms | "
        + ", ".join(f"{m * 1e3:.2f}" for m in in_long)
        + " |",
        "",
        f"fresh / long: {fresh_med / long_med:.3f}",
    ]
    return lines, {"fresh": fresh, "long": long_runs}


def _long_line(run: dict) -> str:
    """A long process's rounds: median ms per call (minor faults per call; the share of
    calls over 1.5 times the median)."""
    return " ".join(
        f"{r['median_s'] * 1e3:.2f}({r['faults_per_call']:.0f}; {r['slow_share']:.0%})"
        for r in run["harness"]
    )


def at_least(least: int):
    """An argparse type: a whole number >= ``least``."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= {least}")
        return value

    return whole


def name_value(text: str) -> tuple[str, str]:
    """``--env``'s NAME=VALUE: (NAME, VALUE), the name not empty."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=VALUE, a variable's name and its value")
    return name, value


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The script's options (see the module's docstring); ``argv``: the command line's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=at_least(1), default=1048576)
    parser.add_argument("--threads", type=at_least(1), default=1)
    parser.add_argument("--processes", type=at_least(1), default=4)
    # the first round is a warm-up the figures leave out: at least one more to report
    parser.add_argument("--rounds", type=at_least(2), default=6, help="at least 2")
    parser.add_argument("--calls", type=at_least(1), default=200)
    parser.add_argument("--env", action="append", type=name_value, default=[], metavar="NAME=VALUE")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument(
        "--example",
        nargs="?",
        const=str(EXAMPLE[1]),
        metavar="FILE",
        help="the example's JAX kernel (examples/eos/eos.py, or a copy of it), not poly",
    )
    return parser.parse_args(argv)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--long":
        print(json.dumps(long_lived(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    args = arguments()
    extra = dict(args.env)
    lines, figures = compare(args, extra)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    name = EXAMPLE[0] if args.example else OPERATION
    settings = f"jax {name} {args.size}, float64, {args.threads} thread(s)"
    body = "\n".join([settings + (f", {extra}" if extra else ""), "", *lines])
    publish("jax_long_process.py", body, args.markdown, None)


if __name__ == "__main__":
    main()
