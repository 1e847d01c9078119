"""A disturber: other work on the machine while something is measured or tested.

    python benchmarks/disturb.py --cpu 1 --memory 1 --seconds 3600
    python benchmarks/disturb.py --cpu 1 -- make test    # runs the command beside it, then stops

``--cpu N`` starts N processes that spin on arithmetic (one core each, no memory traffic);
``--memory M`` starts M processes that copy a 256 MiB array back and forth (DRAM bandwidth,
far past any cache). With a command after ``--``, the disturbers run while it does and stop
when it ends; its exit status is this script's. Without one they run ``--seconds`` long (or
until Ctrl-C). Each disturber prints, when it stops, how much work it did, so two runs can
be checked to have been disturbed alike.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import subprocess
import sys
import time

MEMORY_BYTES = 256 * 2**20


def spin(stop, out) -> None:
    """CPU-bound: integer arithmetic in a loop, no memory beyond a few registers' worth."""
    loops, x = 0, 1
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        loops += 1
    out.put(("cpu", loops * 100_000))


def stream(stop, out) -> None:
    """Memory-bandwidth-bound: copy between two arrays far larger than the caches."""
    import numpy as np

    a = np.ones(MEMORY_BYTES // 8)
    b = np.empty_like(a)
    passes = 0
    while not stop.is_set():
        np.copyto(b, a)
        np.copyto(a, b)
        passes += 2
    out.put(("memory", passes * 2 * MEMORY_BYTES))


@contextlib.contextmanager
def disturbing(cpu: int, memory: int, say=print):
    """``cpu`` CPU-bound and ``memory`` memory-bound processes for the block; when it ends,
    each says how much work it did (``say``), so two runs can be checked to have been
    disturbed alike."""
    stop, out = mp.Event(), mp.Queue()
    workers = [mp.Process(target=spin, args=(stop, out)) for _ in range(cpu)]
    workers += [mp.Process(target=stream, args=(stop, out)) for _ in range(memory)]
    for w in workers:
        w.start()
    say(f"disturb: {cpu} CPU-bound, {memory} memory-bound processes")
    t0 = time.perf_counter()
    try:
        yield
    finally:
        stop.set()
        done = [out.get(timeout=30) for _ in workers]
        for w in workers:
            w.join()
        seconds = time.perf_counter() - t0
        for kind, amount in done:
            unit = "operations" if kind == "cpu" else "bytes copied"
            say(f"disturb: {kind} process: {amount / seconds:.3g} {unit} a second")
        say(f"disturb: {seconds:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpu", type=int, default=1, help="CPU-bound processes (default 1)")
    parser.add_argument("--memory", type=int, default=0, help="memory-bound processes")
    parser.add_argument("--seconds", type=float, default=3600.0, help="without a command")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- a command to run beside")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    status = 0
    with disturbing(args.cpu, args.memory, lambda line: print(line, flush=True)):
        try:
            if command:
                status = subprocess.call(command)
            else:
                time.sleep(args.seconds)
        except KeyboardInterrupt:
            status = 130
    print(f"disturb: the command's exit status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
