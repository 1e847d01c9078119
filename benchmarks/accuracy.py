"""Does the workflow's median agree with an independent timer? (a benchmark, not a test)

For each cell: measure it the workflow's way (the supervised worker, a fresh process), then,
in this same session, time the same operation on the same inputs with an independent timer:
``timeit`` for NumPy and Numba, ``torch.utils.benchmark.Timer`` for PyTorch, ``timeit``
around ``block_until_ready()`` for JAX and around a materialised result for TensorFlow.
Prints the ratio workflow median / independent median per cell.

    .venv/bin/python benchmarks/accuracy.py                       # the default cells
    .venv/bin/python benchmarks/accuracy.py numpy:elementwise:1000 numpy:elementwise:1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import timeit
from pathlib import Path

from _report import cell_median, markdown_section  # noqa: E402  (also puts src/ on the path)

from numbench.libraries import pin_cpus, thread_environment  # noqa: E402

THREADS = 1
# The same thread limits as the cells, before any numerical library is imported here.
os.environ.update(thread_environment(THREADS))
pin_cpus(THREADS)

DEFAULT_CELLS = [
    "numpy:elementwise:1000",
    "numpy:elementwise:1000000",
    "numba:sort:1000",
    "numba:matmul:500",
    "torch:fft:1000",
    "torch:matmul:1000",
    "jax:elementwise:1000",
    "jax:sort:1000000",
    "tensorflow:matmul:100",
    "tensorflow:fft:100000",
]
TIMING = {"min_sample_time_s": 0.02, "min_samples": 5, "max_samples": 50, "budget_s": 1.0}


def workflow_median(library, operation, size, inputs_path, tmp):
    out = Path(tmp) / f"{library}-{operation}-{size}.parquet"
    return cell_median(library, operation, size, inputs_path, out, TIMING, THREADS)


def independent_median(library, operation, size, inputs_path, repeats=15):
    """Median seconds per call from the library's usual timer, in this process."""
    import numpy as np

    from numbench import libraries, operations

    op = operations.get(operation)
    adapter = libraries.get(library)("cpu", "float64", THREADS)
    adapter.load()
    with np.load(inputs_path) as data:
        args = tuple(adapter.to_device(data[n]) for n in op.input_names)
    fn = adapter.compile(op.implementations[adapter.family](adapter.xp, "float64"))

    if library == "torch":
        import torch.utils.benchmark as tb

        fn(*args)  # warm-up
        t = tb.Timer(stmt="fn(*args)", globals={"fn": fn, "args": args}, num_threads=THREADS)
        m = t.blocked_autorange(min_run_time=repeats * 0.02)
        return float(m.median)
    if library == "jax":
        import jax

        def call():
            jax.block_until_ready(fn(*args))
    elif library == "tensorflow":

        def call():
            out = fn(*args)
            for t in out if isinstance(out, tuple) else (out,):
                t.numpy()  # materialise the result
    else:

        def call():
            fn(*args)

    call()  # warm-up: compilation, caches
    timer = timeit.Timer(call)
    number, _ = timer.autorange()  # calls per repeat lasting >= 0.2 s
    number = max(1, number // 10)  # ~20 ms per repeat, as the workflow's samples
    return statistics.median(t / number for t in timer.repeat(repeat=repeats, number=number))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("cells", nargs="*", default=DEFAULT_CELLS, help="library:operation:size")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per cell")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the figures as a Markdown section with command, date and machine",
    )
    args = parser.parse_args()

    from numbench.measure import inputs

    lines = ["| cell | workflow median | independent median | ratio |", "|---|---:|---:|---:|"]
    print(f"{'cell':34s} {'workflow':>12s} {'independent':>12s} {'ratio':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for cell in args.cells:
            library, operation, size = cell.split(":")
            size = int(size)
            path = Path(tmp) / f"{operation}-{size}.npz"
            if not path.exists():
                inputs.write(operation, size, 20261121, path)
            # Interleave the two timers over a few rounds, so a drift in the machine's load
            # touches both alike; compare the medians of the rounds.
            wfs, inds = [], []
            for _ in range(args.rounds):
                wfs.append(workflow_median(library, operation, size, path, tmp))
                inds.append(independent_median(library, operation, size, path))
            wf, ind = statistics.median(wfs), statistics.median(inds)
            print(f"{cell:34s} {wf * 1e6:10.2f}us {ind * 1e6:10.2f}us {wf / ind:7.3f}", flush=True)
            lines.append(f"| {cell} | {wf * 1e6:.2f} µs | {ind * 1e6:.2f} µs | {wf / ind:.3f} |")
    if args.markdown:
        body = (
            "## Accuracy: the workflow against independent timers\n\n"
            + "\n".join(lines)
            + "\n\nIndependent timers: `timeit` (NumPy, Numba), `torch.utils.benchmark.Timer` "
            "(PyTorch), `timeit` around `block_until_ready()` (JAX) and around a materialised "
            f"result (TensorFlow). Ratio = workflow / independent; medians of {args.rounds} "
            "interleaved rounds."
        )
        print(markdown_section("python benchmarks/accuracy.py", body))


if __name__ == "__main__":
    main()
