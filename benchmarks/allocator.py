"""Does the allocator's state move a cell's time between processes? (a benchmark, not a test)

The config's ``allocator`` (``numbench.libraries.allocator_environment``) starts every worker
with the same glibc malloc thresholds (``steady``) or with glibc's own (``system``), which
rise the first time a process frees a large block, so that a call's temporaries are fresh
pages in one process and reused heap in another. This measures both, in fresh processes
pinned to one CPU with the workflow's thread settings:

1. NumPy ``elementwise`` at n = 1e5 (three 800 KB results per call): minor page faults per
   call and the median time per call, in P processes per allocator, alternated;
2. for a few cells, R rounds of a baseline process and a library process back to back (the
   workflow's paired round, in a seeded random order; both allocators in each round, in
   random order): the mean speedup and the standard deviation of the log speedup over the
   rounds. That standard deviation is what a cell's interval must cover and what a second
   run sees.

Each process times the operation as a worker does (``numbench.timing.Timer``: first call,
calibration to ``min_sample_time_s``, samples for ``budget_s``, the default config's timing)
and prints its median.

    .venv/bin/python benchmarks/allocator.py [--processes P] [--rounds R] [--write]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys

import numpy as np
from _report import child_environment, default_config, prepared_timer, publish

#: (library, operation, size): cells whose calls allocate blocks above glibc's first mmap
#: threshold (128 KiB), and one that allocates less as a control
CELLS = [
    ("torch", "poly", 100_000),
    ("torch", "elementwise", 100_000),
    ("jax", "fft", 10_000),
    ("numba", "poly", 100_000),
    ("torch", "sort", 100_000),
    ("jax", "matmul", 500),
    ("torch", "elementwise", 1_000),
]
ALLOCATORS = ("system", "steady")


def child(library: str, operation: str, size: int) -> None:
    import resource

    from numbench.timing import TimingSettings  # after _report put src on the path

    cfg = default_config()
    timer, loops = prepared_timer(library, operation, size, cfg)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    samples = timer.take_samples(TimingSettings(**cfg["timing"]), timer.time_loops, loops)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    calls = loops * len(samples)
    print(json.dumps({"median_s": float(np.median(samples)), "faults_per_call": faults / calls}))


def run(library: str, operation: str, size: int, allocator: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", library, operation, str(size)],
        env=child_environment(allocator),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{library} {operation} {size} ({allocator}) failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8, help="NumPy processes per allocator")
    parser.add_argument("--rounds", type=int, default=8, help="paired rounds per cell")
    parser.add_argument("--seed", type=int, default=1, help="seeds the orders")
    parser.add_argument("--write", action="store_true", help="write docs/performance.md")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    rng = random.Random(args.seed)

    numpy_runs: dict[str, list[dict]] = {a: [] for a in ALLOCATORS}
    for _ in range(args.processes):
        for allocator in ALLOCATORS:
            numpy_runs[allocator].append(run("numpy", "elementwise", 100_000, allocator))
    lines = [
        f"NumPy `elementwise` n = 1e5, {args.processes} fresh processes per allocator:",
        "",
        "| allocator | page faults per call (median) | time per call, median of the processes "
        "| slowest / fastest process |",
        "|---|---|---|---|",
    ]
    for allocator, runs in numpy_runs.items():
        times = [r["median_s"] for r in runs]
        faults = float(np.median([r["faults_per_call"] for r in runs]))
        lines.append(
            f"| {allocator} | {faults:.0f} | {np.median(times) * 1e3:.2f} ms "
            f"| {max(times) / min(times):.2f}x |"
        )
    lines += [
        "",
        f"Speedup over NumPy, {args.rounds} paired rounds per cell (a baseline process and a "
        "library process back to back, both allocators in each round); SD: the standard "
        "deviation of the log speedup over the rounds:",
        "",
        "| cell | system: mean speedup | system: SD | steady: mean speedup | steady: SD |",
        "|---|---|---|---|---|",
    ]
    for library, operation, size in CELLS:
        logs: dict[str, list[float]] = {a: [] for a in ALLOCATORS}
        for _ in range(args.rounds):
            for allocator in rng.sample(ALLOCATORS, 2):
                pair = {}
                for who in rng.sample(["numpy", library], 2):
                    pair[who] = run(who, operation, size, allocator)["median_s"]
                logs[allocator].append(float(np.log(pair["numpy"] / pair[library])))
        cells = []
        for allocator in ALLOCATORS:
            x = np.array(logs[allocator])
            cells += [f"{np.exp(x.mean()):.3g}", f"{x.std(ddof=1):.3f}"]
        lines.append(f"| {library} `{operation}` {size:,} | " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    publish("allocator", "allocator.py", "\n".join(lines), args.write, None)


if __name__ == "__main__":
    main()
