"""Would taking turns cancel a machine's speed? (a benchmark and a prototype, not a test)

A paired round of the workflow runs the baseline's process and the library's back to back,
so their samples lie a second or more apart (the second one's start and import between
them); on a machine whose speed moves within seconds (``machine_noise.py``) the two see
different speeds. This measures, for a few cells, R rounds of each of two ways, in a seeded
random order within each round:

- back to back: the workflow's way, each process alone, its median over ``budget_s``;
- lockstep: both processes started one after the other (each imports, loads, compiles and
  calibrates while the other waits), then the samples taken in turns, one of one process and
  one of the other, in a random order per turn, the turn passed through pipes, until each
  side has ``min_samples`` and ``budget_s`` of samples. Each turn begins with an untimed
  tenth of a sample's calls (none below 10 calls), so the caches the partner's turn emptied
  are filled again. Each library is still alone in its own fresh process.

It prints the mean speedup and the standard deviation of the log speedup over the rounds for
each way. The workflow does not measure this way (yet): see docs/performance.md, the twelfth
pair.

    .venv/bin/python benchmarks/lockstep.py [--rounds R] [--cells LIB:OP:SIZE ...]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import numpy as np
from _report import child_environment, default_config, prepared_timer

from numbench.timing import TimingSettings

CELLS = [
    ("torch", "elementwise", 100_000),
    ("jax", "fft", 10_000),
    ("torch", "sort", 100_000),
    ("tensorflow", "matmul", 500),
    ("numba", "poly", 100_000),
    ("jax", "mlp", 16),
    ("torch", "grad", 1_000),
]


def child(library: str, operation: str, size: int, mode: str) -> None:
    cfg = default_config()
    timer, loops = prepared_timer(library, operation, size, cfg)
    if mode == "alone":
        samples = timer.take_samples(TimingSettings(**cfg["timing"]), timer.time_loops, loops)
        print(json.dumps(float(np.median(samples))))
        return
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "sample":
            break
        if loops >= 10:
            timer.time_loops(loops // 10)  # untimed: caches back after the partner's turn
        print(timer.time_loops(loops) / loops, flush=True)


def command(library: str, operation: str, size: int, mode: str) -> list[str]:
    return [sys.executable, __file__, "--child", library, operation, str(size), mode]


def back_to_back(
    library: str, operation: str, size: int, rng: random.Random, env: dict[str, str]
) -> float:
    medians = {}
    for who in rng.sample(["numpy", library], 2):
        out = subprocess.run(
            command(who, operation, size, "alone"),
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        medians[who] = json.loads(out.stdout.strip().splitlines()[-1])
    return float(np.log(medians["numpy"] / medians[library]))


def lockstep(
    library: str,
    operation: str,
    size: int,
    rng: random.Random,
    env: dict[str, str],
    timing: TimingSettings,
) -> float:
    procs = {}
    try:
        for who in rng.sample(["numpy", library], 2):
            proc = subprocess.Popen(
                command(who, operation, size, "lockstep"),
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            procs[who] = proc
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"{who} {operation} {size}: the lockstep child did not start")
        samples: dict[str, list[float]] = {who: [] for who in procs}
        started = time.perf_counter()
        while True:
            for who in rng.sample(list(procs), 2):
                procs[who].stdin.write("sample\n")
                procs[who].stdin.flush()
                samples[who].append(float(procs[who].stdout.readline()))
            taken = len(samples[library])
            spent = time.perf_counter() - started
            if taken >= timing.max_samples or (
                taken >= timing.min_samples and spent >= 2 * timing.budget_s
            ):
                break
    finally:
        for proc in procs.values():
            if proc.stdin:
                proc.stdin.close()
            proc.wait()
    return float(np.log(np.median(samples["numpy"]) / np.median(samples[library])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of each way per cell")
    parser.add_argument("--seed", type=int, default=5, help="seeds the orders")
    parser.add_argument(
        "--cells", nargs="+", metavar="LIB:OP:SIZE", help="cells to measure (default: seven)"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        library, operation, size, mode = args.child
        child(library, operation, int(size), mode)
        return
    cells = CELLS
    if args.cells:
        try:
            cells = [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in args.cells]
        except (IndexError, ValueError):
            parser.error(f"--cells takes LIB:OP:SIZE, e.g. torch:sort:100000, not {args.cells}")
    cfg = default_config()
    env, timing = child_environment(cfg["allocator"]), TimingSettings(**cfg["timing"])
    rng = random.Random(args.seed)
    print(
        "| cell | back to back: mean speedup | SD | lockstep: mean speedup | SD "
        "| lockstep against back to back (95%) |"
    )
    print("|---|---|---|---|---|---|")
    shifts = []
    for library, operation, size in cells:
        logs: dict[str, list[float]] = {"back to back": [], "lockstep": []}
        for _ in range(args.rounds):
            for way in rng.sample(list(logs), 2):
                if way == "back to back":
                    logs[way].append(back_to_back(library, operation, size, rng, env))
                else:
                    logs[way].append(lockstep(library, operation, size, rng, env, timing))
        figures = []
        for way in logs:
            x = np.array(logs[way])
            figures += [f"{np.exp(x.mean()):.3g}", f"{x.std(ddof=1):.3f}"]
        diff = np.mean(logs["lockstep"]) - np.mean(logs["back to back"])
        se = np.sqrt(sum(np.var(v, ddof=1) / len(v) for v in logs.values()))
        figures.append(f"{np.expm1(diff):+.1%} ± {1.96 * se:.1%}")
        print(f"| {library} `{operation}` {size:,} | " + " | ".join(figures) + " |", flush=True)
        shifts.append(diff)
    if len(shifts) > 1:
        x = np.array(shifts)
        se = x.std(ddof=1) / np.sqrt(len(x))
        print(
            f"\nover the {len(x)} cells, lockstep against back to back: mean shift "
            f"{np.expm1(x.mean()):+.1%} ± {1.96 * se:.1%} (95%), lower in "
            f"{int((x < 0).sum())} of {len(x)}"
        )


if __name__ == "__main__":
    main()
