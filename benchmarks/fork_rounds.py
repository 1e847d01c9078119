"""Rounds forked from a process that has imported its library, against fresh processes.

Issue 52's first lever ("precision per minute"): every round of a cell is a fresh process
that imports its library before it times anything. Could a round instead be forked from a
process that imported the library once? Only if the forked rounds spread as the fresh ones
do. The same cells, each timed ``--rounds`` times two ways, interleaved (each round of a
cell runs both ways back to back, the first way alternating: fresh, forked, forked, fresh,
...), so the machine's drift falls on both:

* **fresh**: numbench's worker as the workflow starts it (``python -m
  numbench.measure.worker``, with the environment, the folder and the command of
  ``numbench.measure.process.prepare``): threads set, the library imported, inputs
  loaded, the kernel built, the first call, the samples;
* **forked**: one *zygote* per cell, started with that same environment, which pins its CPUs
  and imports the library's modules alone (no ``Adapter.load``: it would start JAX's
  backend), and nothing else; for each round it ``os.fork()``s a child that runs the
  worker's own measurement (``numbench.measure.worker.measure``, which loads the adapter,
  the inputs and the kernel, makes the first call and samples, exactly as in a fresh
  worker) and sends its report back over a pipe. A child that gives nothing within
  ``CHILD_TIMEOUT_S`` is killed and counted as hung.

For each cell and way: the round's wall time as the driver sees it and its split (the
library's import, or what is left of loading it after a fork; the first call; the sampling;
the rest: the interpreter's start or the fork, the inputs, the kernel's build, the checks,
the exit), the median per call of each round, their spread (the standard deviation of
their logs, and max / min) and numbench's own unstable rule (``numbench.stats.is_unstable``)
on all the rounds, and on every set of 4 of them (a cell's ``replicates.max``). The threads
each zygote holds when it forks and every warning either way printed are reported too.

    .venv/bin/python benchmarks/fork_rounds.py [--rounds 8] [--cells numpy:sort:100000,...]
        [--out DIR] [--markdown]

``--out DIR`` writes ``cells.csv`` (the table) and ``rounds.csv`` (one row per round).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _report import ROOT, markdown_section, workflow_spec

CELLS = "numpy:sort:100000,torch:elementwise:1000000,jax:matmul:250,numba:poly:100000,tensorflow:matmul:250"
#: what a zygote imports: the library's modules and nothing more (``Adapter.load`` would also
#: set threads, JAX's would start its backend: that is left to each forked child)
MODULES = {
    "numpy": ("numpy",),
    "torch": ("torch",),
    "jax": ("jax", "jax.numpy"),
    "numba": ("numba", "numpy"),
    "tensorflow": ("tensorflow",),
}
CHILD_TIMEOUT_S = 180.0
#: the rounds of a cell in the workflow, at most (``replicates.max`` of config/config.yaml)
WORKFLOW_ROUNDS = 4
SEED = 20261127


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def thread_names() -> list[str]:
    """The names of this process's threads (``/proc``'s ``comm``)."""
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        with contextlib.suppress(OSError):
            names.append(Path("/proc/self/task", task, "comm").read_text().strip())
    return names


# -- the zygote and its forked children ---------------------------------------------------


def zygote(threads: int, library: str) -> None:
    """A zygote's life: pin, import the library's modules, say so, then one forked round per
    spec read from stdin (one JSON line each), its outcome one JSON line on stdout."""
    from numbench.libraries import pin_cpus

    pin_cpus(threads)
    t0 = time.perf_counter()
    for module in MODULES[library]:
        importlib.import_module(module)
    import_s = time.perf_counter() - t0
    from numbench.measure import worker  # noqa: F401 - numbench's own, light modules
    from numbench.spec import CellSpec  # noqa: F401

    _say({"import_s": import_s, "threads": thread_count(), "thread_names": thread_names()})
    for line in sys.stdin:
        _say(fork_round(line.strip()))


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fork_round(spec_json: str) -> dict:
    """Fork a child that measures the cell; its report, the fork's own warnings and the
    zygote's threads at the fork, or how the child ended without one (hung: killed)."""
    err = tempfile.NamedTemporaryFile(prefix="fork-round-", suffix=".err", delete=False)
    err.close()
    read_end, write_end = os.pipe()
    threads = thread_count()
    sys.stderr.flush()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forked_at = time.perf_counter()
        pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(spec_json, write_end, err.name, forked_at)
    os.close(write_end)
    data, hung = _read_within(read_end, CHILD_TIMEOUT_S)
    os.close(read_end)
    if hung:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    out = json.loads(data) if data else {}
    out.update(
        threads_at_fork=threads,
        fork_warnings=[f"{w.category.__name__}: {w.message}" for w in caught],
        hung=hung,
        exit_status=status,
        stderr=Path(err.name).read_text(errors="replace")[-4000:],
    )
    os.unlink(err.name)
    return out


def _read_within(fd: int, timeout_s: float) -> tuple[bytes, bool]:
    """Everything written to ``fd`` until its writer closes it; (what came, True) if that
    took longer than ``timeout_s``."""
    chunks, deadline = [], time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _child(spec_json: str, write_end: int, err_path: str, forked_at: float) -> None:
    """A forked child: its output to ``err_path`` (the zygote's stdout is the driver's pipe),
    numbench's worker measurement, the report down the pipe, and out without teardown."""
    started = time.perf_counter()
    code = 0
    try:
        fd = os.open(err_path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        from numbench.measure import worker
        from numbench.spec import CellSpec

        report = worker.measure(CellSpec.from_json(spec_json))
        payload = {"fork_s": started - forked_at, "report": report.to_dict()}
    except BaseException as exc:  # noqa: BLE001 - said to the driver
        payload, code = {"error": f"{type(exc).__name__}: {exc}"}, 1
    data = json.dumps(payload).encode()
    while data:
        data = data[os.write(write_end, data) :]
    os.close(write_end)
    os._exit(code)


# -- the driver -----------------------------------------------------------------------


class Zygote:
    """A zygote process started with a cell's worker environment, and its rounds."""

    def __init__(self, spec, folder: str):
        from numbench.measure.process import cell_job, prepare

        _, env, _ = prepare(cell_job(spec), folder)
        cmd = [sys.executable, __file__, "--zygote", str(spec.threads), spec.adapter_name]
        self.stderr = open(Path(folder, "zygote.err"), "w+", encoding="utf-8")  # noqa: SIM115
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,
        )
        self.ready = json.loads(self.proc.stdout.readline() or "{}")
        self.ready["start_s"] = time.perf_counter() - t0

    def round(self, spec) -> dict:
        t0 = time.perf_counter()
        self.proc.stdin.write(spec.to_json().replace("\n", " ") + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        wall = time.perf_counter() - t0
        out = json.loads(line) if line else {"error": "the zygote ended"}
        return {"wall_s": wall, **out}

    def close(self) -> str:
        """End the zygote; its own stderr."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stderr.seek(0)
        text = self.stderr.read()
        self.stderr.close()
        return text


def fresh_round(spec) -> dict:
    """One fresh worker, as the workflow starts it; its wall time, report and stderr."""
    from numbench.measure.process import cell_job, ended_report, prepare

    with tempfile.TemporaryDirectory(prefix="fresh-round-") as folder:
        cmd, env, result_path = prepare(cell_job(spec), folder)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=CHILD_TIMEOUT_S,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return {"wall_s": time.perf_counter() - t0, "hung": True, "stderr": ""}
        wall = time.perf_counter() - t0
        report = ended_report(proc.returncode, result_path)
    return {"wall_s": wall, "report": report.to_dict(), "stderr": proc.stderr[-4000:]}


def round_row(cell: str, way: str, index: int, got: dict) -> dict:
    """One round's figures, from what a fresh worker or a forked child gave."""
    report = got.get("report") or {}
    parts = {k: report.get(k) or 0.0 for k in ("import_s", "first_call_s", "sampling_s")}
    samples = report.get("samples_s") or []
    return {
        "cell": cell,
        "way": way,
        "round": index,
        "status": report.get("status") or ("hung" if got.get("hung") else "error"),
        "error": report.get("error") or got.get("error") or "",
        "wall_s": got["wall_s"],
        **parts,
        "rest_s": got["wall_s"] - sum(parts.values()),
        "fork_s": got.get("fork_s"),
        "threads_at_fork": got.get("threads_at_fork"),
        "median_s": float(_median(samples)) if samples else float("nan"),
        "cpu_taken": report.get("cpu_taken"),
        "samples_s": samples,
        "warnings": _warnings(got),
        "load_1min": os.getloadavg()[0],
    }


def _median(values):
    import numpy as np

    return np.median(values)


#: a log line's prefix of the libraries' native logging (level, date, time, thread id)
LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ")


def output_lines(text: str) -> list[str]:
    """The distinct lines of a process's stderr, the native log prefix taken off."""
    return sorted({LOG_PREFIX.sub("", line.strip()) for line in text.splitlines() if line.strip()})


def _warnings(got: dict) -> list[str]:
    """Every line a round printed on stderr (the libraries' warnings and chatter), and the
    fork's own Python warnings."""
    lines = output_lines(got.get("stderr") or "")
    return sorted(set(lines + list(got.get("fork_warnings") or [])))


def cells_of(text: str) -> list[tuple[str, str, int]]:
    """``--cells``: library:operation:size, comma-separated; a library this script knows, a
    built-in operation, a whole size >= 1."""
    from numbench import operations

    cells = []
    for item in text.split(","):
        parts = item.split(":")
        size = parts[2] if len(parts) == 3 else ""
        if not size.isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError(f"{item!r}: library:operation:size, size >= 1")
        library, operation = parts[0], parts[1]
        if library not in MODULES:
            raise argparse.ArgumentTypeError(f"{library!r}: one of {', '.join(MODULES)}")
        try:
            operations.load(operation)
        except operations.OperationError as exc:
            raise argparse.ArgumentTypeError(f"{operation!r}: {exc}") from None
        cells.append((library, operation, int(size)))
    return cells


def rounds_of(text: str) -> int:
    """``--rounds``: a whole number >= 2 (one round has no spread)."""
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= 2")
    return int(text)


def study(cells, rounds: int, timing: dict, folder: str) -> tuple[list[dict], dict]:
    """Every cell's rounds, both ways, interleaved; (the rounds' rows, each cell's zygote:
    its start, its import, its threads, its own stderr)."""
    from numbench.measure import inputs

    specs, zygotes, rows = {}, {}, []
    for library, operation, size in cells:
        name = f"{library} {operation} {size}"
        path = Path(folder, f"{operation}-{size}.npz")
        if not path.exists():
            inputs.write(operation, size, SEED, path)
        specs[name] = workflow_spec(library, operation, size, path, timing)
        specs[name] = _with_seed(specs[name])
        zygotes[name] = Zygote(specs[name], tempfile.mkdtemp(dir=folder))
        print(f"zygote {name}: {zygotes[name].ready}", file=sys.stderr)
    try:
        for r in range(rounds):
            for name, spec in specs.items():
                ways = ("fresh", "forked") if r % 2 == 0 else ("forked", "fresh")
                for way in ways:
                    got = fresh_round(spec) if way == "fresh" else zygotes[name].round(spec)
                    rows.append(round_row(name, way, r, got))
                    row = rows[-1]
                    print(
                        f"round {r} {name} {way}: {row['status']} wall {row['wall_s']:.2f} s, "
                        f"median {row['median_s'] * 1e6:.1f} us",
                        file=sys.stderr,
                    )
    finally:
        zygote_info = {}
        for name, z in zygotes.items():
            zygote_info[name] = {**z.ready, "stderr": z.close()[-2000:]}
    return rows, zygote_info


def _with_seed(spec):
    """The spec with the inputs' seed, as the workflow's own cells carry it."""
    import dataclasses

    return dataclasses.replace(spec, seed=SEED)


def summary(rows: list[dict], cell: str, way: str) -> dict:
    """A cell's figures one way: the round's cost and its split (medians over rounds), the
    median per call, the rounds' spread, and numbench's unstable rule on all rounds and on
    every set of ``WORKFLOW_ROUNDS`` of them."""
    import numpy as np

    from numbench.stats import is_unstable

    mine = [r for r in rows if r["cell"] == cell and r["way"] == way]
    ok = [r for r in mine if r["status"] == "ok"]
    groups = [np.asarray(r["samples_s"], dtype=float) for r in ok]
    medians = np.array([r["median_s"] for r in ok])
    spread, unstable = is_unstable(groups) if groups else (float("nan"), False)
    sets = list(itertools.combinations(range(len(groups)), WORKFLOW_ROUNDS))
    flagged = sum(is_unstable([groups[i] for i in s])[1] for s in sets)
    return {
        "cell": cell,
        "way": way,
        "rounds": len(mine),
        "rounds_ok": len(ok),
        **{k: _med(ok, k) for k in ("wall_s", "import_s", "first_call_s", "sampling_s")},
        "rest_s": _med(ok, "rest_s"),
        "fork_s": _med(ok, "fork_s") if way == "forked" else float("nan"),
        "median_s": float(np.median(medians)) if ok else float("nan"),
        "cpu_taken": _med([r for r in ok if r["cpu_taken"] is not None], "cpu_taken"),
        **(paired_ratio(rows, cell) if way == "forked" else {}),
        "sd_log_medians": float(np.std(np.log(medians), ddof=1)) if len(ok) > 1 else 0.0,
        "max_over_min": spread,
        "unstable_all_rounds": unstable,
        "unstable_sets": f"{flagged}/{len(sets)}",
        "threads_at_fork": max((r["threads_at_fork"] or 0 for r in mine), default=0) or "",
        "warnings": " | ".join(sorted({w for r in mine for w in r["warnings"]})),
    }


def paired_ratio(rows: list[dict], cell: str) -> dict:
    """The forked round's median over the fresh one's of the same round (measured seconds
    apart): their geometric mean over the rounds, and its standard error as a factor."""
    import numpy as np

    both = {}
    for r in rows:
        if r["cell"] == cell and r["status"] == "ok":
            both.setdefault(r["round"], {})[r["way"]] = r["median_s"]
    logs = np.log([b["forked"] / b["fresh"] for b in both.values() if len(b) == 2])
    if logs.size < 2:
        return {"paired_ratio": float("nan"), "paired_ratio_se": float("nan")}
    return {
        "paired_ratio": float(np.exp(logs.mean())),
        "paired_ratio_se": float(np.exp(logs.std(ddof=1) / np.sqrt(logs.size))),
    }


def _med(rows: list[dict], key: str) -> float:
    import numpy as np

    return float(np.median([r[key] for r in rows])) if rows else float("nan")


def table(summaries: list[dict]) -> list[str]:
    """The Markdown table: one line per cell and way; forked/fresh: the forked round's median
    over the fresh one's of the same round, their geometric mean ×/÷ its standard error."""
    lines = [
        "| cell | way | ok | round | import | first call | sampling | rest | median/call "
        "| forked/fresh | sd log | max/min | unstable (all) | unstable (sets of 4) "
        "| CPU taken |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for s in summaries:
        ratio = (
            "" if s["way"] == "fresh" else f"{s['paired_ratio']:.2f} ×/÷ {s['paired_ratio_se']:.2f}"
        )
        lines.append(
            f"| {s['cell']} | {s['way']} | {s['rounds_ok']}/{s['rounds']} "
            f"| {s['wall_s']:.2f} s | {s['import_s']:.2f} s | {s['first_call_s'] * 1e3:.0f} ms "
            f"| {s['sampling_s'] * 1e3:.0f} ms | {s['rest_s']:.2f} s "
            f"| {s['median_s'] * 1e6:.1f} us | {ratio} | {s['sd_log_medians']:.3f} "
            f"| {s['max_over_min']:.3f} | {'yes' if s['unstable_all_rounds'] else 'no'} "
            f"| {s['unstable_sets']} | {s['cpu_taken']:.0%} |"
        )
    return lines


def notes(summaries: list[dict], zygotes: dict) -> list[str]:
    """Each library's round cost fresh against forked, its zygote's one-off start, the
    threads it held at the fork, and the warnings either way printed."""
    by = {(s["cell"], s["way"]): s for s in summaries}
    out = []
    for cell, z in zygotes.items():
        fresh, forked = by[(cell, "fresh")], by[(cell, "forked")]
        out.append(
            f"- {cell}: a round costs {fresh['wall_s']:.2f} s fresh, {forked['wall_s']:.2f} s "
            f"forked ({fresh['wall_s'] / forked['wall_s']:.1f}x); the zygote started once in "
            f"{z.get('start_s', float('nan')):.2f} s (import {z.get('import_s', float('nan')):.2f}"
            f" s), {z.get('threads', '?')} thread(s) after the import, "
            f"{forked['threads_at_fork']} at the forks ({', '.join(z.get('thread_names', []))}); "
            f"a fork took {forked['fork_s'] * 1e3:.1f} ms to the child's first line"
        )
        said = output_lines(z.get("stderr", ""))
        if said:
            out.append(f"  - the zygote's import printed: {' | '.join(said)[:600]}")
        for way in ("fresh", "forked"):
            if by[(cell, way)]["warnings"]:
                out.append(f"  - warnings, {way}: {by[(cell, way)]['warnings'][:600]}")
    return out


def write_csv(folder: Path, summaries: list[dict], rows: list[dict]) -> None:
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(summaries).to_csv(folder / "cells.csv", index=False, float_format="%.6g")
    flat = [
        {**{k: v for k, v in r.items() if k != "samples_s"}, "warnings": " | ".join(r["warnings"])}
        for r in rows
    ]
    pd.DataFrame(flat).to_csv(folder / "rounds.csv", index=False, float_format="%.6g")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=rounds_of, default=8, help="rounds of each cell, each way")
    parser.add_argument("--cells", type=cells_of, default=CELLS)
    parser.add_argument("--out", type=Path, help="write cells.csv and rounds.csv here")
    parser.add_argument("--markdown", action="store_true")
    return parser.parse_args(argv)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]), sys.argv[3])
        return
    import yaml

    args = arguments()
    timing = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["timing"]
    load_before, started = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fork-rounds-") as folder:
        rows, zygotes = study(args.cells, args.rounds, timing, folder)
    load_after, wall = os.getloadavg(), time.perf_counter() - started
    cells = list(zygotes)
    summaries = [summary(rows, c, w) for c in cells for w in ("fresh", "forked")]
    if args.out:
        write_csv(args.out, summaries, rows)
    body = [
        f"{args.rounds} rounds of each cell each way, interleaved; float64, 1 thread, "
        f"the config's timing ({timing}). Study wall {wall:.0f} s; load average "
        f"(1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)}.",
        "",
        *table(summaries),
        "",
        *notes(summaries, zygotes),
    ]
    if not args.markdown:
        print("\n".join(body))
        return
    print(
        markdown_section(
            shlex.join(["python", "benchmarks/fork_rounds.py", *sys.argv[1:]]), "\n".join(body)
        )
    )


def _load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    main()
