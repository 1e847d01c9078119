"""The roofs of results/roofs.parquet against the same kernels timed here, outside the
workflow, with plain ``timeit`` loops (a benchmark, not a test).

For one (dtype, threads) of the roofs file (default: the first CPU group): the triad
``a = b + s * c`` as a plain Numba loop (no chunks, no repetitions inside) at each bandwidth
roof's working set, and a NumPy GEMM plus one in the library that set the compute roof, at
the roof's n, each timed with ``timeit.repeat`` (the best of several). It prints both
figures and their ratio (roof / here). It also times the poly operation at n = 1e7 in Numba
with a fresh output per call and with a preallocated one, counting page faults: the
measurement behind the summary's first-touch estimate.

    .venv/bin/python benchmarks/roofs_check.py [--roofs results/roofs.parquet]
        [--dtype float64] [--threads 1] [--markdown]

Run it on an idle machine, right after (or before) the roofs rule.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import timeit

from _report import ROOT, markdown_section

#: repeats of each timeit measurement; the best counts, as for the roofs
REPEATS = 10
#: a timed repeat of a cache-resident triad lasts at least this long
MIN_REPEAT_S = 0.01
POLY_N = 10**7
#: set once the script has started itself again with the cells' environment
REEXEC_MARK = "NUMBENCH_ROOFS_CHECK_ENV"


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roofs", default=str(ROOT / "results" / "roofs.parquet"))
    parser.add_argument("--dtype", help="the roofs' dtype (default: the first in the file)")
    parser.add_argument("--threads", type=int, help="the roofs' threads (default: the first)")
    parser.add_argument("--markdown", action="store_true")
    return parser.parse_args()


def best_per_call(stmt, number: int = 1) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=REPEATS)) / number


def triad_gb_per_s(np, numba, working_set: int, dtype: str) -> float:
    """A plain Numba triad over three arrays making up ``working_set`` bytes."""

    @numba.njit
    def triad(a, b, c, s):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]

    itemsize = np.dtype(dtype).itemsize
    n = working_set // (3 * itemsize)
    a, b, c = np.zeros(n, dtype), np.ones(n, dtype), np.full(n, 2.0, dtype)
    s = np.dtype(dtype).type(3.0)
    triad(a, b, c, s)
    single = best_per_call(lambda: triad(a, b, c, s))
    number = max(1, math.ceil(MIN_REPEAT_S / single))
    return 3 * n * itemsize / best_per_call(lambda: triad(a, b, c, s), number) / 1e9


def gemm_gflop_per_s(library: str, n: int, dtype: str) -> float:
    """A plain n x n GEMM in ``library``, synced, after a warm-up."""
    import numpy as np

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
    if library == "numpy":
        call = lambda: a @ b  # noqa: E731
    elif library == "torch":
        import torch

        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        call = lambda: torch.matmul(ta, tb)  # noqa: E731
    elif library == "jax":
        import jax
        import jax.numpy as jnp

        ja, jb = jnp.asarray(a), jnp.asarray(b)
        f = jax.jit(jnp.matmul)
        call = lambda: f(ja, jb).block_until_ready()  # noqa: E731
    elif library == "tensorflow":
        import tensorflow as tf

        ta, tb = tf.constant(a), tf.constant(b)
        f = tf.function(tf.linalg.matmul)
        call = lambda: f(ta, tb).numpy()  # noqa: E731
    else:
        raise SystemExit(f"no GEMM check for {library}")
    call()
    return 2.0 * n**3 / min(timeit.repeat(call, number=1, repeat=3)) / 1e9


def poly_first_touch(np, numba, dtype: str) -> tuple[float, float, int]:
    """(seconds with a fresh output, with a preallocated one, page faults per fresh call)."""

    @numba.njit
    def fresh(x):
        return -4.0 * x**3 + 9.0 * x**2 + 6.0 * x - 3.0

    @numba.njit
    def into(x, out):
        for i in range(x.size):
            v = x[i]
            out[i] = -4.0 * v**3 + 9.0 * v**2 + 6.0 * v - 3.0

    x = np.random.default_rng(2).uniform(-2, 2, POLY_N).astype(dtype)
    out = np.empty_like(x)
    fresh(x), into(x, out)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fresh(x)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return best_per_call(lambda: fresh(x)), best_per_call(lambda: into(x, out)), faults


def main() -> int:
    args = arguments()
    import pandas as pd

    roofs = pd.read_parquet(args.roofs)
    cpu = roofs[(roofs["device"] == "cpu") & (roofs["status"] == "ok")]
    dtype = args.dtype or cpu["dtype"].iloc[0]
    threads = args.threads or int(cpu["threads"].iloc[0])
    mine = cpu[(cpu["dtype"] == dtype) & (cpu["threads"] == threads)].set_index("roof")
    compute = mine.loc["compute"]
    library, n = compute["library"], int(compute["kernel"].split("n=")[1].split()[0])

    # the environment of the roofs' GEMM job (the cells' thread limits and allocator, the
    # library's own settings: numbench.measure.process), before any import
    from numbench.libraries import pin_cpus
    from numbench.measure.process import job_environment
    from numbench.measure.roofs.jobs import worker_job

    gemm = {"kind": "gemm", "library": library, "device": "cpu", "dtype": dtype}
    os.environ.update(job_environment(worker_job({**gemm, "threads": threads}, "steady")))
    if os.environ.get(REEXEC_MARK) != "1":
        # glibc reads its malloc settings when the process starts: start again with them
        os.environ[REEXEC_MARK] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    pin_cpus(threads)
    from numbench.measure.cpu_taken import CpuTaken

    taken = CpuTaken()
    import numba
    import numpy as np

    rows = []
    for roof in ("l2", "l3", "dram"):
        if roof in mine.index:
            here = triad_gb_per_s(np, numba, int(mine.loc[roof, "working_set_bytes"]), dtype)
            rows.append((roof, "GB/s", float(mine.loc[roof, "value"]), here, "Numba triad"))
    for lib in sorted({"numpy", library}):
        here = gemm_gflop_per_s(lib, n, dtype)
        rows.append(("compute", "GFLOP/s", float(compute["value"]), here, f"{lib} GEMM n={n}"))
    fresh_s, into_s, faults = poly_first_touch(np, numba, dtype)

    lines = [
        f"## Roofs against an independent check ({dtype}, {threads} thread(s))",
        "",
        "| roof | unit | roofs.parquet | timed here | here | roof / here |",
        "|---|---|---:|---:|---|---:|",
    ]
    for roof, unit, value, here, how in rows:
        lines.append(f"| {roof} | {unit} | {value:.4g} | {here:.4g} | {how} | {value / here:.3f} |")
    dram = float(mine.loc["dram", "value"]) if "dram" in mine.index else math.nan
    moved = 2 * POLY_N * np.dtype(dtype).itemsize
    lines += [
        "",
        f"Numba poly at n = 1e7: {fresh_s * 1e3:.3g} ms with a fresh output per call "
        f"({faults} page faults a call), {into_s * 1e3:.3g} ms into a preallocated one; "
        f"{moved / fresh_s / 1e9:.3g} against {moved / into_s / 1e9:.3g} GB/s, "
        f"{moved / fresh_s / 1e9 / dram:.0%} against {moved / into_s / 1e9 / dram:.0%} "
        "of the DRAM roof.",
        "",
        f"Other programs took {taken.share():.0%} of the CPUs while this check ran; the "
        f"roofs' own jobs, at most {mine['cpu_taken'].max():.0%}.",
    ]
    body = "\n".join(lines)
    print(markdown_section("python benchmarks/roofs_check.py", body) if args.markdown else body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
