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
  side has ``min_samples`` and ``budget_s`` of samples. Each library is still alone in its
  own fresh process.

It prints the mean speedup and the standard deviation of the log speedup over the rounds for
each way. The workflow does not measure this way (yet): see docs/performance.md, the twelfth
pair.

    .venv/bin/python benchmarks/lockstep.py [--rounds R] [--cells LIB:OP:SIZE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np
from _report import ROOT

CELLS = [
    ("torch", "elementwise", 100_000),
    ("jax", "fft", 10_000),
    ("torch", "sort", 100_000),
    ("tensorflow", "matmul", 500),
    ("numba", "poly", 100_000),
    ("jax", "mlp", 16),
    ("torch", "grad", 1_000),
]


def settings():
    from numbench.config import load_file
    from numbench.timing import TimingSettings

    cfg = load_file(ROOT / "config" / "config.yaml", ROOT / "workflow/schemas/config.schema.yaml")
    return cfg, TimingSettings(**cfg["timing"])


def child(library: str, operation: str, size: int, mode: str) -> None:
    from numbench import inputs, operations
    from numbench.libraries import get, pin_cpus
    from numbench.timing import Timer

    cfg, timing = settings()
    pin_cpus(1)
    adapter = get(library)("cpu", "float64", 1)
    adapter.load()
    op = operations.get(operation)
    params = op.resolve_params(None)
    data = inputs.make(operation, size, cfg["seed"], None)
    args = tuple(adapter.to_device(data[name]) for name in op.input_names)
    fn = adapter.compile(op.build(adapter.family, adapter.xp, "float64", params))
    timer = Timer(fn, args, adapter.sync)
    timer.first_call()
    loops = timer.calibrate(timing.min_sample_time_s)
    if mode == "alone":
        samples = timer.take_samples(timing, timer.time_loops, loops)
        print(json.dumps(float(np.median(samples))))
        return
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "sample":
            break
        print(timer.time_loops(loops) / loops, flush=True)


def environment() -> dict[str, str]:
    from numbench.libraries import allocator_environment, thread_environment

    cfg, _ = settings()
    env = dict(os.environ)
    env.update(thread_environment(1))
    env.update(allocator_environment(cfg["allocator"]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def command(library: str, operation: str, size: int, mode: str) -> list[str]:
    return [sys.executable, __file__, "--child", library, operation, str(size), mode]


def back_to_back(library: str, operation: str, size: int, rng: random.Random) -> float:
    medians = {}
    for who in rng.sample(["numpy", library], 2):
        out = subprocess.run(
            command(who, operation, size, "alone"),
            env=environment(),
            capture_output=True,
            text=True,
            check=True,
        )
        medians[who] = json.loads(out.stdout.strip().splitlines()[-1])
    return float(np.log(medians["numpy"] / medians[library]))


def lockstep(library: str, operation: str, size: int, rng: random.Random) -> float:
    _, timing = settings()
    procs = {}
    try:
        for who in rng.sample(["numpy", library], 2):
            proc = subprocess.Popen(
                command(who, operation, size, "lockstep"),
                env=environment(),
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
    rng = random.Random(args.seed)
    print(
        "| cell | back to back: mean speedup | SD | lockstep: mean speedup | SD "
        "| lockstep against back to back (95%) |"
    )
    print("|---|---|---|---|---|---|")
    for library, operation, size in cells:
        logs: dict[str, list[float]] = {"back to back": [], "lockstep": []}
        for _ in range(args.rounds):
            for way in rng.sample(list(logs), 2):
                measure = back_to_back if way == "back to back" else lockstep
                logs[way].append(measure(library, operation, size, rng))
        figures = []
        for way in logs:
            x = np.array(logs[way])
            figures += [f"{np.exp(x.mean()):.3g}", f"{x.std(ddof=1):.3f}"]
        diff = np.mean(logs["lockstep"]) - np.mean(logs["back to back"])
        se = np.sqrt(sum(np.var(v, ddof=1) / len(v) for v in logs.values()))
        figures.append(f"{np.expm1(diff):+.1%} ± {1.96 * se:.1%}")
        print(f"| {library} `{operation}` {size:,} | " + " | ".join(figures) + " |", flush=True)


if __name__ == "__main__":
    main()
