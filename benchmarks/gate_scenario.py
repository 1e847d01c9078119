"""A real slowdown for the history's gate to catch (a benchmark, not a test).

Runs a small grid (NumPy, JAX and PyTorch on elementwise, sort, matmul and a user's
operation ``planted``: 24 cells) RUNS times, one run after the other, each from scratch in a
temporary copy of the workflow with ``snakemake --cores 1``. From run FROM on, PyTorch's
``planted`` is FACTOR times slower: its kernel stretches each call by the factor it reads
from a file (``gate_scenario/planted.py``), so neither the config nor the operation's code
changes. Each run's small tables (benchmarks, speedups, summary, and its start, wall and
load) are kept in OUT/runN, ready for ``docs/evidence/`` and for the gate:

    numbench compare OUT/run4 OUT/run8 --history STORE --fail-on-slowdown

With ``--environments WORK`` the slowdown belongs to an environment, as a dependency's does:
the workflow's copy is kept in WORK, and runs before FROM use the interpreter of one virtual
environment (WORK/before), the later ones another's (WORK/after), each with this
interpreter's packages behind it and its factor in its own ``planted-factor.txt``; so
``compare --confirm`` can measure OLD's interpreter against NEW's, each at its own factor.

With ``--judge`` it measures nothing and judges the kept runs with ``numbench compare OLD NEW
--history STORE --fail-on-slowdown --json`` (and ``--confirm`` with ``--confirm WORK``: the
flagged cells measured again in WORK's workflow): every OLD before the slowdown against every NEW
from it on, STORE holding the runs before the slowdown (as a user's store holds the runs
before the change; OLD is left out of the decision's history and is one more run of the
screen's); and every ordered pair of runs before it, STORE holding every other run (as
``benchmarks/gate_pairs.py`` does). Across the slowdown, the planted cell should be flagged
(slower, or suspect for ``--confirm``) and no other cell slower; before it, no cell slower.

    .venv/bin/python benchmarks/gate_scenario.py OUT [--runs 8] [--from 5] [--factor 1.2]
        [--environments WORK]
    .venv/bin/python benchmarks/gate_scenario.py OUT --judge [--from 5] [--confirm WORK]
        [--screen-level P] [--margin M]

``--screen-level`` and ``--margin`` are handed to every ``compare`` the judge runs: a 1.1x
asks for a looser screen than the default and, to be confirmed, a margin below 1.1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from _report import copy_workflow, machine

HERE = Path(__file__).resolve().parent / "gate_scenario"
CONFIG = """\
libraries: [numpy, jax, torch]
dtype: float64
threads: 1
seed: 17
roofs: false
history: {add: false}
operations:
  elementwise: {sizes: [10000, 1000000]}
  sort: {sizes: [10000, 1000000]}
  matmul: {sizes: [100, 500]}
  planted:
    module: planted/planted.py
    sizes: [10000, 1000000]
"""
KEPT = ("benchmarks.parquet", "speedups.parquet", "summary.md")
#: the cell slowed: PyTorch's ``planted`` (every size)
PLANTED = ("torch", "planted")


def workflow_copy(folder: Path) -> None:
    """The workflow copied into the new ``folder``, with the planted operation and the grid."""
    copy_workflow(folder)
    (folder / "planted").mkdir()
    shutil.copy2(HERE / "planted.py", folder / "planted" / "planted.py")
    (folder / "scenario.yaml").write_text(CONFIG)


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def environment(where: Path, factor: float) -> Path:
    """A virtual environment at ``where`` with this interpreter's packages behind it and the
    planted factor in its ``planted-factor.txt``: the folder of its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    run = [
        str(where / "bin" / "python"),
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
    ]
    own = Path(subprocess.run(run, check=True, capture_output=True, text=True).stdout.strip())
    base = sysconfig.get_paths()["purelib"]
    (own / "numbench-base.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    (where / "planted-factor.txt").write_text(f"{factor}\n")
    return where / "bin"


def one_run(folder: Path, factor: float, out: Path, interpreter: Path | None = None) -> float:
    """One run of the grid in ``folder``, its tables kept in ``out``: the planted factor in
    the operation's ``factor.txt``, or (``interpreter``: an environment's folder of
    programs, ``environment``) in that environment's own."""
    (folder / "planted" / "factor.txt").write_text(f"{1.0 if interpreter else factor}\n")
    env = {**os.environ, "PYTHONPATH": str(folder / "src")}
    env["NUMBENCH_TIMING_LOCK"] = str(folder / ".timing.lock")
    # the rules run the `python` first on PATH: this interpreter's, or the environment's
    first = interpreter or Path(sys.executable).parent
    env["PATH"] = f"{first}{os.pathsep}{env.get('PATH', '')}"
    shutil.rmtree(folder / "results", ignore_errors=True)
    start, load = now(), " ".join(f"{x:.2f}" for x in os.getloadavg())
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "scenario.yaml"]
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-3000:]}")
    out.mkdir(parents=True)
    for name in KEPT:
        shutil.copy2(folder / "results" / name, out / name)
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    (out / "run.txt").write_text(
        f"start {start}\nload_before {load}\nend {now()}\nwall_s {wall:.0f}\n"
        f"load_after {after}\nplanted_factor {factor}\nmachine {machine()}\n"
    )
    return wall


def store_of(runs: list[Path], store: Path) -> Path:
    """A history store of ``runs``: the gate leaves OLD and NEW out of it by their content."""
    from numbench.history import add_results

    for run in runs:
        add_results(run, store)
    return store


def gate_once(
    old: Path, new: Path, store: Path, confirm: Path | None = None, options: tuple = ()
) -> tuple[int, list[dict], list[dict]]:
    """``compare OLD NEW --history STORE --fail-on-slowdown --json`` (with ``--confirm`` in
    the workflow ``confirm``; ``options``: more of compare's arguments): its exit status,
    the cells it flagged, and those measured again with their outcomes."""
    import contextlib
    import io
    import json

    from numbench import cli

    argv = ["compare", str(old), str(new), "--history", str(store), "--fail-on-slowdown"]
    argv += list(options)
    if confirm is not None:
        argv += ["--confirm", "--directory", str(confirm / "workflow")]
        argv += ["--configfile", str(confirm / "workflow" / "scenario.yaml")]
    got = io.StringIO()
    with contextlib.redirect_stdout(got), contextlib.redirect_stderr(io.StringIO()):
        status = cli.main([*argv, "--json"])
    document = json.loads(got.getvalue())
    cells = document["history"]["cells"]
    again = document.get("confirm", {}).get("cells", [])
    return status, [c for c in cells if c["change"] in ("slower", "suspect", "broken")], again


def judge(
    out: Path,
    start: int,
    planted: tuple[str, str] = PLANTED,
    confirm: Path | None = None,
    options: tuple = (),
) -> str:
    """The kept runs judged as the module says, a line a pair, and the totals (``planted``:
    the slowed cells' library and operation; ``confirm``: the ``--environments`` folder
    whose workflow measures the flagged cells again; ``options``: more of compare's
    arguments)."""
    runs = sorted(out.glob("run*"), key=lambda p: int(p.name[3:]))
    before, after = runs[: start - 1], runs[start - 1 :]
    pairs = [(o, n, True) for o in before for n in after]
    pairs += [(o, n, False) for o in before for n in before if o != n]
    lines, caught, wrong, unchanged_failed, failed_alone = [], 0, 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="numbench-gate-judge-") as work:
        stores = {True: store_of(before, Path(work) / "before"), False: None}
        stores[False] = store_of(runs, Path(work) / "every")
        for old, new, across in pairs:
            status, flagged, again = gate_once(old, new, stores[across], confirm, options)
            hit = [c for c in flagged if (c["library"], c["operation"]) == planted]
            others = [c for c in flagged if c not in hit and c["change"] != "suspect"]
            caught += across and any(c["change"] in ("slower", "suspect") for c in hit)
            wrong += across and len(others)
            unchanged_failed += (not across) and status != 0
            confirmed = [o["key"] for o in again if o["outcome"] == "confirmed"]
            alone = bool(confirmed) and all(
                (k["library"], k["operation"]) == planted for k in confirmed
            )
            failed_alone += across and status != 0 and (alone or confirm is None) and not others
            named = "; ".join(
                f"{c['library']} {c['operation']} {c['size']}: {c['change']} {c['ratio']:.3f}"
                for c in flagged
            )
            measured = "; ".join(_outcome(o) for o in again)
            measured = f"; measured again: {measured}" if measured else ""
            lines.append(
                f"- {old.name} -> {new.name}: exit {status}; {named or 'none flagged'}{measured}"
            )
    n_across, n_before = len(before) * len(after), len(before) * (len(before) - 1)
    lines.append(
        f"\nAcross the slowdown: the planted cell flagged (slower or suspect) in {caught} of "
        f"{n_across} pairs, other cells flagged slower or broken {wrong} times; the gate "
        f"failed on the planted cell alone in {failed_alone} of {n_across}. Before it: "
        f"{unchanged_failed} of {n_before} pairs failed."
    )
    return "\n".join(lines)


def _outcome(o: dict) -> str:
    """One cell measured again, in a few words."""
    k = o["key"]
    text = f"{k['library']} {k['operation']} {k['size']} {o['outcome']}"
    if o.get("ratio") is not None:
        text += f" {o['ratio']:.3f} ({o['ci_low']:.3f} to {o['ci_high']:.3f}, {o['rounds']} rounds)"
    return text + (f" ({o['reason']})" if o.get("reason") else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="a new folder for the runs' tables")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--from", dest="start", type=int, default=5)
    parser.add_argument("--factor", type=float, default=1.2)
    parser.add_argument("--judge", action="store_true", help="judge OUT's kept runs")
    parser.add_argument(
        "--environments",
        metavar="WORK",
        help="plant the factor in two virtual environments, kept with the workflow in WORK",
    )
    parser.add_argument(
        "--confirm", metavar="WORK", help="with --judge: --confirm in WORK's workflow"
    )
    parser.add_argument("--screen-level", help="with --judge: compare's --screen-level")
    parser.add_argument("--margin", help="with --judge: compare's --margin")
    args = parser.parse_args()
    out = Path(args.out)
    if args.judge:
        options = [("--screen-level", args.screen_level), ("--margin", args.margin)]
        options = tuple(x for flag, value in options if value for x in (flag, value))
        confirm = Path(args.confirm) if args.confirm else None
        print(judge(out, args.start, confirm=confirm, options=options))
        print(f"Machine: {machine()}")
        return
    if out.exists():
        parser.error(f"{out} exists: name a new folder")
    if args.environments and Path(args.environments).exists():
        parser.error(f"{args.environments} exists: name a new folder")
    with tempfile.TemporaryDirectory(prefix="numbench-gate-scenario-") as work:
        base = Path(args.environments or work)
        folder = base / "workflow"
        workflow_copy(folder)
        bins = {}
        if args.environments:
            bins = {
                False: environment(base / "before", 1.0),
                True: environment(base / "after", args.factor),
            }
        for i in range(1, args.runs + 1):
            factor = args.factor if i >= args.start else 1.0
            wall = one_run(folder, factor, out / f"run{i}", bins.get(i >= args.start))
            print(f"run {i} of {args.runs}: planted x{factor:g}, {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()
