"""Do the example's kernels, handed over as they are, time in the workflow as they do alone?

For every ok cell of ``eos`` (examples/eos) in a run's results/benchmarks.parquet, fresh
processes (``--processes``, 5 by default, the cells' in turns) time the library's kernel with
``timeit``, independently of numbench's timer (one process's median moves by some per cent
from the next's, as the workflow's replicates do, so the check takes their median): the suite's own inputs (``generate_inputs(size, 42)``), the library's arrays made by
hand, the same threads (the thread variables and a CPU mask of that many CPUs), the same C
allocator settings (the cell's ``allocator``, given as the process starts), a fresh copy of
``t`` before each call of the NumPy kernel (it writes into it; the example declares it for
NumPy alone, and numbench copies it for NumPy alone), and the device waited for by hand
(``block_until_ready`` for JAX).
Numba's plain loop is compiled here with the cell's options (``numba.njit(fastmath=False)``,
plus ``parallel=True`` for ``numba-parallel``); the torch kernel is under ``torch.compile``
in its module, and the untimed warm-up calls compile it. It prints the harness's median (of its processes' medians, with
their range), the workflow's and their ratio; the check asks 0.95 to 1.05 for every cell
above 1 ms.

    .venv/bin/python benchmarks/as_is_check.py --results results [--processes 5] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit

from _report import ROOT, publish

EXAMPLE = ROOT / "examples" / "eos"
REPEATS = 200
#: fresh processes per cell: one process's median moves by a few per cent from the next's
#: (where its arrays land in memory), as the workflow's replicates do
PROCESSES = 5


def _kernel(library: str, options: dict):
    """(the kernel as the user calls it, a function turning NumPy arrays into its arrays,
    the wait after a call)."""
    import numpy as np

    if library == "numpy":
        from kernels.numpy_eos import density_inplace

        return density_inplace, np.asarray, None
    if library.startswith("numba"):
        import numba
        from kernels.numba_eos import density

        return numba.njit(density, **options), np.asarray, None
    if library == "jax":
        import jax
        from kernels.jax_eos import density

        return density, jax.numpy.asarray, jax.block_until_ready
    if library == "torch":
        import torch
        from kernels.torch_eos import density

        return density, torch.from_numpy, None
    import tensorflow as tf
    from kernels.tensorflow_eos import density

    return density, tf.constant, None


def one(library: str, size: int, threads: int, options: dict) -> float:
    """The median seconds per call of one library's kernel, timed in this process."""
    from numbench.libraries import get, pin_cpus, thread_environment

    adapter = get("numba" if library.startswith("numba") else library)("cpu", "float64", threads)
    os.environ.update({**thread_environment(threads), **adapter.environment()})
    pin_cpus(threads)
    sys.path.insert(0, str(EXAMPLE))
    import numpy as np
    from kernels.inputs import generate_inputs

    if library == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    kernel, to_library, wait = _kernel(library, options)
    host = generate_inputs(size, 42)
    s, p = to_library(host["s"]), to_library(host["p"])
    fresh = {}

    def setup():
        if library == "numpy" or "t" not in fresh:
            fresh["t"] = to_library(np.array(host["t"], copy=True))

    def call():
        result = kernel(fresh["t"], s, p)
        if wait is not None:
            wait(result)

    for _ in range(3):  # compile and warm up
        setup()
        call()
    timer = timeit.Timer(call, setup=setup)
    return float(np.median(timer.repeat(repeat=REPEATS, number=1)))


def _one_process(row, allocator_environment) -> float | str:
    """One fresh process's median seconds per call of the cell ``row``, or its error."""
    cmd = [sys.executable, __file__, "--one", row.library, str(row.size), str(row.threads)]
    # glibc reads its thresholds when a process starts, so the cell's (``allocator``) are
    # given here: without them the fresh copy of ``t`` before each NumPy call is mapped
    # anew and its pages faulted in inside the timed call, where the worker reuses its heap
    env = {**os.environ, **allocator_environment(getattr(row, "allocator", None) or "system")}
    out = subprocess.run([*cmd, row.options or "{}"], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return out.stderr[-200:]
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=str(ROOT / "results"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"fresh processes per cell, their medians' median reported (default {PROCESSES})",
    )
    parser.add_argument("--one", nargs=4, metavar=("LIBRARY", "SIZE", "THREADS", "OPTIONS"))
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes {args.processes}: at least 1 process per cell")
    if args.one:
        library, size, threads, options = args.one
        print(one(library, int(size), int(threads), json.loads(options or "{}")))
        return
    import numpy as np
    import pandas as pd

    from numbench.libraries import allocator_environment

    bench = pd.read_parquet(os.path.join(args.results, "benchmarks.parquet"))
    bench = bench[(bench["operation"] == "eos") & (bench["status"] == "ok")]
    rows = list(bench.sort_values(["size", "library"]).itertuples())
    medians: dict[int, list[float]] = {i: [] for i in range(len(rows))}
    failed: dict[int, str] = {}
    # the processes of all cells in turns (cell 1, cell 2, ..., cell 1, ...), so a drift of
    # the machine's speed over the minutes this takes reaches every cell alike
    for _ in range(args.processes):
        for i, row in enumerate(rows):
            if i in failed:
                continue
            out = _one_process(row, allocator_environment)
            if isinstance(out, str):
                failed[i] = out
            else:
                medians[i].append(out)
    lines = [
        "| library | size | workflow median | timeit median (processes' range) | ratio |",
        "|---|---|---|---|---|",
    ]
    for i, row in enumerate(rows):
        if i in failed:
            lines.append(f"| {row.library} | {row.size} | failed: {failed[i]!r} | | |")
            continue
        alone = float(np.median(medians[i]))
        low, high = min(medians[i]), max(medians[i])
        lines.append(
            f"| {row.library} | {row.size} | {row.median_s * 1e3:.4f} ms | "
            f"{alone * 1e3:.4f} ms ({low * 1e3:.4f} to {high * 1e3:.4f}) | "
            f"{alone / row.median_s:.3f} |"
        )
    publish("as_is_check.py", "\n".join(lines), args.markdown, None)


if __name__ == "__main__":
    main()
