"""Is this machine quiet enough to compare libraries? (a benchmark, not a test)

Runs a few NumPy kernels in fresh processes pinned to one CPU. Each process times six
blocks of 15 samples back to back (a block lasts about half a second) and keeps each
block's median. It prints, per kernel, the spread (standard deviation of the log) of the
block medians *within* a process, that of the first block's median *between* processes, and
the slowest block against the fastest. A quiet machine gives a percent or two in both; where
blocks of one process, same arrays, same code, differ by 10% or more, the machine's speed
moves within seconds (a neighbour on a shared host, an SMT sibling), which the paired rounds
of a cell, seconds apart, cannot cancel: expect wide speedup intervals and many verdicts in
doubt (docs/history.md).

Each kernel runs under both settings of the config's ``allocator``: ``system`` (glibc's own
malloc thresholds, which rise the first time a process frees a large block) and ``steady``
(the workflow's default, ``numbench.libraries.allocator_environment``). Where a call's
temporaries exceed glibc's first threshold, ``system`` faults fresh pages in on every call,
and that cost moves with the machine's memory traffic: compare the two rows before blaming
the machine.

    .venv/bin/python benchmarks/machine_noise.py [--processes N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

KERNELS = [("matmul", 500), ("fft", 10_000), ("elementwise", 100_000), ("sort", 100_000)]
BLOCKS, SAMPLES, SAMPLE_S = 6, 15, 0.02


def child(op: str, n: int) -> None:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import numpy as np

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n) if op == "matmul" else n), rng.standard_normal(n)
    call = {
        "matmul": lambda: a @ a,
        "fft": lambda: np.fft.fft(a),
        "elementwise": lambda: (a + b, a * b, np.sin(a)),
        "sort": lambda: np.sort(a),
    }[op]
    call()
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            call()
        if time.perf_counter() - t0 >= SAMPLE_S:
            break
        loops *= 2
    medians = []
    for _ in range(BLOCKS):
        times = []
        for _ in range(SAMPLES):
            t0 = time.perf_counter()
            for _ in range(loops):
                call()
            times.append((time.perf_counter() - t0) / loops)
        medians.append(float(np.median(times)))
    print(json.dumps(medians))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8, help="fresh processes per kernel")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    import numpy as np

    from numbench.libraries import ALLOCATORS, STEADY_MALLOC, allocator_environment

    print(
        "| kernel | allocator | within a process (SD of block medians) "
        "| between processes (first block) | slowest / fastest block, all processes |"
    )
    print("|---|---|---|---|---|")
    clean = {k: v for k, v in os.environ.items() if k not in STEADY_MALLOC}
    for op, n in KERNELS:
        runs: dict[str, list] = {a: [] for a in ALLOCATORS}
        for _ in range(args.processes):
            for allocator in ALLOCATORS:  # alternated, so drift falls on both alike
                out = subprocess.run(
                    [sys.executable, __file__, "--child", op, str(n)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**clean, **allocator_environment(allocator)},
                )
                runs[allocator].append(json.loads(out.stdout))
        for allocator in sorted(ALLOCATORS):
            logs = np.log(np.array(runs[allocator]))
            within = float(np.sqrt(np.mean(np.var(logs, axis=1, ddof=1))))
            between = float(np.std(logs[:, 0], ddof=1))
            print(
                f"| NumPy {op} n = {n} | {allocator} | {within:.1%} | {between:.1%} "
                f"| {float(np.exp(logs.max() - logs.min())):.2f}x |"
            )


if __name__ == "__main__":
    main()
