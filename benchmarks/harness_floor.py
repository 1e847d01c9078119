"""The harness's own cost per call, measured with no-op operations (a benchmark, not a test).

A no-op run through the Timer exactly as a cell runs an operation gives the per-call floor
the harness adds (loop, argument unpacking, the call itself, and the sync call where the
library has one). It is printed next to the smallest median of the default grid, read from
results/benchmarks.parquet when a run exists, else measured here (NumPy elementwise at 1e3).

    .venv/bin/python benchmarks/harness_floor.py [--markdown]
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

from _report import ROOT, markdown_section

from numbench.libraries import pin_cpus, thread_environment

os.environ.update(thread_environment(1))
pin_cpus(1)

import numpy as np  # noqa: E402

from numbench.timing import Timer, TimingSettings  # noqa: E402

SETTINGS = TimingSettings(min_sample_time_s=0.02, min_samples=20, max_samples=20, budget_s=10)


def per_call(fn, args, sync=None) -> float:
    return float(np.median(Timer(fn, args, sync).measure(SETTINGS).samples_s))


def smallest_default_median() -> tuple[float, str]:
    bench = ROOT / "results" / "benchmarks.parquet"
    if bench.exists():
        import pandas as pd

        df = pd.read_parquet(bench)
        df = df[df["status"] == "ok"]
        row = df.loc[df["median_s"].idxmin()]
        return float(
            row["median_s"]
        ), f"{row['library']} {row['operation']} n={row['size']} (results/benchmarks.parquet)"
    from numbench import operations

    op = operations.get("elementwise")
    arrays = op.make_inputs(1000, operations.input_rng(0, "elementwise", 1000))
    fn = op.implementations["numpy"](np, "float64")
    return per_call(fn, (arrays["a"], arrays["b"])), "numpy elementwise n=1000 (measured here)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the figures as a Markdown section with command, date and machine",
    )
    args = parser.parse_args()

    a = np.ones(1000)

    def noop(x):
        return x

    def sync(result):
        return result

    def timeit_per_call(stmt: str) -> float:
        """timeit's own loop (``for _i in _it: stmt``): the floor any Python timer has."""
        timer = timeit.Timer(stmt, globals={"fn": noop, "sync": sync, "a": a})
        number = max(1, timer.autorange()[0] // 10)
        return float(np.median([t / number for t in timer.repeat(repeat=20, number=number)]))

    bare_harness, bare_timeit = per_call(noop, (a,)), timeit_per_call("fn(a)")
    sync_harness, sync_timeit = per_call(noop, (a,), sync), timeit_per_call("sync(fn(a))")
    smallest, where = smallest_default_median()
    lines = [
        "| path | no-op through the harness | no-op through timeit | harness adds | share of the smallest cell |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, h, t in (
        ("bare loop (NumPy, Numba, PyTorch on the CPU)", bare_harness, bare_timeit),
        ("loop with a sync call (JAX, TensorFlow)", sync_harness, sync_timeit),
    ):
        added = h - t
        lines.append(
            f"| {name} | {h * 1e9:.1f} ns | {t * 1e9:.1f} ns | {added * 1e9:.1f} ns | "
            f"{100 * added / smallest:.2f}% |"
        )
    body = (
        "## Harness floor\n\n"
        + "\n".join(lines)
        + f"\n\nSmallest median of the default grid: {smallest * 1e9:.0f} ns, {where}. "
        "A no-op Python function is timed through the harness's Timer exactly as a cell "
        "times an operation, and through `timeit`'s own loop; the difference is what the "
        "harness adds per call. The no-op call itself (tens of ns) is paid by any Python "
        "caller, timeit included: it is the floor under every sub-microsecond cell."
    )
    print(markdown_section("python benchmarks/harness_floor.py", body) if args.markdown else body)


if __name__ == "__main__":
    sys.exit(main())
