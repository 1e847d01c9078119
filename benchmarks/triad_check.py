"""The DRAM roof of a results roofs.parquet beside a STREAM-style triad timed here,
independently, in one process (a benchmark, not a test).

The roof is the best triad the roofs rule timed (``kernel`` ``triad (...)``); the copy it
timed beside it (``copy_value``) is printed too, with its own ratio. A roofs table from before
the roof was the triad (its roof the faster of triad and copy) is read the same way: its
triad and copy come from its ``candidates``.

STREAM's triad ``a[i] = b[i] + s * c[i]`` over three arrays each at least four times the
last-level cache (by default four times the roofs file's own ``l3_bytes``, the size the roof
used), the arrays written once before any timing (first touch outside the timings, as STREAM
does), bytes counted as STREAM counts them (3 arrays of n elements a pass: reads and writes,
no write-allocate), the best of ``--trials`` passes. Timed in several ways, each beside the
DRAM roof of the same thread count, with the ratio roof / check (the issue's done-when
figure) and the roof's copy / check:

* ``numba loop``: one plain Numba loop on one thread (the one-thread roof's case);
* ``numba prange``: the same loop under ``prange`` on T threads, each taking its own block
  (STREAM's OpenMP loop), for every thread count the file has a DRAM roof of;
* ``numpy out=``: ``np.multiply(c, s, out=a); np.add(a, b, out=a)``, what the roof's NumPy
  way runs: two passes over memory moving 5 arrays, of which STREAM counts 3;
* ``numpy expression``: ``a[:] = b + s * c``, with NumPy's temporaries.

Each roof's own candidates (every way it measured, STREAM-counted) are printed too.

    python benchmarks/triad_check.py results/roofs.parquet [--dtype float64]
        [--array-mib N] [--trials 10]

The process is not pinned to CPUs; Numba's threads are as many as the roof's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

from _report import machine

#: the triad's arrays are at least this many times the last-level cache (STREAM's rule)
ARRAY_FACTOR = 4


def positive_mib(text: str) -> float:
    """``--array-mib``: a number of MiB above 0."""
    try:
        mib = float(text)
    except ValueError:
        mib = math.nan
    if not mib > 0 or math.isinf(mib):
        raise argparse.ArgumentTypeError(f"{text!r}: MiB per array, a number above 0")
    return mib


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roofs", help="a results roofs.parquet")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument(
        "--array-mib", type=positive_mib, help="MiB per array (default: 4 x its L3)"
    )
    parser.add_argument("--trials", type=int, default=10)
    return parser.parse_args()


def dram_rows(path: str, dtype: str):
    """The file's ok CPU DRAM rows of ``dtype``, by thread count: the one of the best triad
    (``roof_triad``), where several (rounds)."""
    import pandas as pd

    roofs = pd.read_parquet(path)
    ok = roofs[
        (roofs["roof"] == "dram")
        & (roofs["device"] == "cpu")
        & (roofs["dtype"] == dtype)
        & (roofs["status"] == "ok")
    ]
    if ok.empty:
        raise SystemExit(f"{path} has no ok CPU DRAM roof in {dtype}")
    rows = {}
    for threads, group in ok.groupby("threads"):
        triads = [(roof_triad(row), row) for _, row in group.iterrows()]
        triads = [(value, row) for value, row in triads if value is not None]
        if triads:
            rows[int(threads)] = max(triads, key=lambda pair: pair[0])[1]
    if not rows:
        raise SystemExit(f"{path}: no CPU DRAM roof in {dtype} timed a triad")
    return rows


def missing(value) -> bool:
    """A roofs file's empty entry: None, NaN or pandas' NA."""
    import pandas as pd

    return value is None or bool(pd.isna(value))


def candidates_of(roof) -> dict:
    """The roof's candidates (every way it measured); {} where it has none (None, NaN, "")."""
    value = roof["candidates"]
    return {} if missing(value) or not value else json.loads(value)


def array_size(first, array_mib: float | None, path: str) -> tuple[float, str | None]:
    """Bytes per array: ``--array-mib``'s where given, else ``ARRAY_FACTOR`` times the last-level
    cache the roofs file recorded (``first``: one of its DRAM rows). With it, the words that
    say where the default came from; None for ``--array-mib``'s size."""
    if array_mib is not None:
        return array_mib * 2**20, None
    llc = first.get("l3_bytes")
    if missing(llc):
        llc = first.get("l2_bytes")
    if missing(llc):
        raise SystemExit(
            f"{path} records no last-level cache (l3_bytes or l2_bytes) for its DRAM roof: "
            "give the arrays' size with --array-mib"
        )
    words = f"{ARRAY_FACTOR}x the roofs' last-level cache of {float(llc) / 2**20:.0f} MiB"
    return ARRAY_FACTOR * float(llc), words


def _best_of(roof, kernel: str) -> float | None:
    """The fastest ``kernel`` (``triad``, ``copy``) among the roof's candidates."""
    candidates = candidates_of(roof)
    rates = [v for k, v in candidates.items() if k.endswith(f" {kernel}") and isinstance(v, float)]
    return max(rates) if rates else None


def roof_triad(roof) -> float | None:
    """The roof's triad: its ``value`` where its kernel is a triad (a roof now always is),
    else the fastest triad among its candidates (an older table's roof may be a copy)."""
    kernel = roof.get("kernel")
    if isinstance(kernel, str) and kernel.startswith("triad"):
        return float(roof["value"])
    return _best_of(roof, "triad")


def roof_copy(roof) -> float | None:
    """The copy timed beside the roof: ``copy_value``, or (an older table, without the
    column) the fastest copy among its candidates."""
    value = roof.get("copy_value")
    return _best_of(roof, "copy") if missing(value) else float(value)


def roof_said(roof, threads: int) -> str:
    """The DRAM roof column: the triad, and where it came from."""
    kernel = roof.get("kernel")
    if isinstance(kernel, str) and kernel.startswith("triad"):
        return f"{roof_triad(roof):.1f} (t{threads}, {kernel})"
    return f"{roof_triad(roof):.1f} (t{threads}, triad of its candidates; its roof: {kernel})"


def kernels():
    import numba
    import numpy as np

    @numba.njit
    def serial(a, b, c, s):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]

    @numba.njit(parallel=True)
    def parallel(a, b, c, s, blocks):
        n = a.size
        for t in numba.prange(blocks):
            for i in range(t * n // blocks, (t + 1) * n // blocks):
                a[i] = b[i] + s * c[i]

    def numpy_out(a, b, c, s):
        np.multiply(c, s, out=a)
        np.add(a, b, out=a)

    def numpy_expression(a, b, c, s):
        a[:] = b + s * c

    return numba, serial, parallel, numpy_out, numpy_expression


def best_seconds(call, trials: int) -> float:
    call()  # compile, and a pass to warm the pages' tables
    best = math.inf
    for _ in range(trials):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


def table_row(name: str, threads: int, gb_per_s: float, roof) -> str:
    """One way's line: the check beside the DRAM roof (the triad) and the copy beside it."""
    if roof is None:
        return f"| {name} | {threads} | {gb_per_s:.1f} | no roof of t{threads} | | | |"
    ratio = roof_triad(roof) / gb_per_s
    copy = roof_copy(roof)
    beside = f"{copy:.1f} | {copy / gb_per_s:.2f}" if copy else "none | "
    said = roof_said(roof, threads)
    return f"| {name} | {threads} | {gb_per_s:.1f} | {said} | {ratio:.2f} | {beside} |"


def main() -> None:
    import numpy as np

    args = arguments()
    rows = dram_rows(args.roofs, args.dtype)
    first = next(iter(rows.values()))
    itemsize = np.dtype(args.dtype).itemsize
    array_bytes, sized_by = array_size(first, args.array_mib, args.roofs)
    n = int(array_bytes // itemsize)
    counted = 3 * n * itemsize  # STREAM's bytes of one triad pass
    print(f"machine: {machine()}")
    sized = f" ({sized_by})" if sized_by else ""
    print(
        f"triad a = b + s*c, {args.dtype}, 3 arrays of {n * itemsize / 2**20:.0f} MiB{sized}, "
        f"STREAM bytes {counted / 1e9:.2f} GB a pass, best of {args.trials}"
    )
    a = np.empty(n, dtype=args.dtype)
    b = np.empty(n, dtype=args.dtype)
    c = np.empty(n, dtype=args.dtype)
    a.fill(0.0), b.fill(1.5), c.fill(0.5)
    s = np.dtype(args.dtype).type(3.0)
    numba, serial, parallel, numpy_out, numpy_expression = kernels()
    ways = [("numba loop", 1, lambda: serial(a, b, c, s))]
    for threads in sorted(rows):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        seconds = best_seconds(lambda t=threads: parallel(a, b, c, s, t), args.trials)
        ways.append((f"numba prange t{threads}", threads, seconds))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    ways += [
        ("numpy out= (5 arrays moved)", 1, lambda: numpy_out(a, b, c, s)),
        ("numpy expression", 1, lambda: numpy_expression(a, b, c, s)),
    ]
    print(
        "\n| way | threads | check GB/s | DRAM roof GB/s (t, kernel) | roof / check "
        "| roof's copy GB/s | copy / check |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    for name, threads, timed in ways:
        seconds = timed if isinstance(timed, float) else best_seconds(timed, args.trials)
        print(table_row(name, threads, counted / seconds / 1e9, rows.get(threads)))
    for threads, roof in rows.items():
        candidates = candidates_of(roof)
        shown = ", ".join(
            f"{k} {v:.1f}" if isinstance(v, float) else f"{k}: {v}" for k, v in candidates.items()
        )
        ws = roof["working_set_bytes"] / 2**20
        print(f"\nroof t{threads}: working set {ws:.0f} MiB, affinity {roof['affinity']}; {shown}")
    print(f"\nCPUs here: {len(os.sched_getaffinity(0))}")


if __name__ == "__main__":
    main()
