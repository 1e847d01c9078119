"""The ``numbench`` command: the user's door to what the workflow does not run itself.

    numbench compare OLD NEW [--margin M] [--output FILE] [--json] [--fail-on-slowdown]
                     [--history FOLDER] [--confirm [--confirm-rounds N] [--directory DIR]]
    numbench offsite plan|run|import ...
    numbench unlock
    numbench check PATH|NAME [--size N] [--dtype D] [--configfile FILE ...]
    numbench history add RESULTS ... | list | show [FILTERS] [--json] | changes [--json]
    numbench system [--json] [--seconds S]
    numbench site [--history FOLDER] [--out FOLDER] [--margin M]

The workflow's own steps run through ``snakemake`` (``make run``); these are the steps a user
takes around it. Each subcommand imports what it needs only when it runs: ``offsite run``
works on a host that has numpy, pyarrow and this package's sources but not the workflow's
environment (no Snakemake, PyYAML, jsonschema or pandas), as ``python -m numbench``.

Exit statuses: 0 done; 1 a failed gate (``compare --fail-on-slowdown``) or a refused plan,
run or archive; 2 bad input, with one line naming the file or option and the problem; 3 an
``offsite run`` that stopped at its time budget (``--stop-after-s``) with cells left, its
archive a part to go on from (``numbench.offsite.parts``).
"""

from __future__ import annotations

import argparse
import sys

#: compare's exit status for bad input (argparse's own for a bad option)
EXIT_BAD_INPUT = 2
#: what an interrupted ``offsite run`` exits with (128 + SIGINT, as a shell reports it)
EXIT_INTERRUPTED = 130
#: what an ``offsite run`` that stopped at its time budget with cells left exits with
EXIT_PARTIAL = 3


def _compare(args: argparse.Namespace) -> int:
    from numbench.compare.command import run_compare

    return run_compare(args, EXIT_BAD_INPUT)


def _offsite(args: argparse.Namespace) -> int:
    from numbench.offsite import run_offsite

    return run_offsite(args, EXIT_INTERRUPTED, EXIT_PARTIAL)


def _unlock(args: argparse.Namespace) -> int:
    from numbench.measure.host_lock import unlock_if_stale

    print(f"resume: {unlock_if_stale(args.directory)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from numbench.check import main

    return main(args)


def _history(args: argparse.Namespace) -> int:
    from numbench.history.views import run_history

    return run_history(args, EXIT_BAD_INPUT)


def _site(args: argparse.Namespace) -> int:
    from numbench.site import run_site

    return run_site(args, EXIT_BAD_INPUT)


def _system(args: argparse.Namespace) -> int:
    import json

    from numbench.machine.system import long_form, system_report

    if not 0 < args.seconds <= 60:  # nan fails this too
        say = f"system: --seconds must be above 0 and at most 60, not {args.seconds}"
        print(say, file=sys.stderr)
        return EXIT_BAD_INPUT
    report = system_report(seconds=args.seconds)
    print(json.dumps(report.to_dict(), indent=2) if args.json else long_form(report))
    return 0


def _config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--directory", default=".", help="the workflow's folder (default: the current one)"
    )
    p.add_argument("--configfile", nargs="+", default=[], metavar="FILE", help="as for snakemake")
    p.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE", help="as for snakemake")


def parser() -> argparse.ArgumentParser:
    """The ``numbench`` command's arguments: one subcommand each, added by its own function."""
    top = argparse.ArgumentParser(
        prog="numbench",
        description="Reproducible benchmarks of NumPy, JAX, PyTorch, TensorFlow and Numba. "
        "The workflow itself runs with `snakemake` (`make run`); these commands go around it.",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_compare(sub)
    _add_offsite(sub)
    _add_unlock(sub)
    _add_check(sub)
    _add_history(sub)
    _add_site(sub)
    _add_system(sub)
    return top


def _add_compare(sub) -> None:
    """``numbench compare OLD NEW``: two result sets, cell by cell."""
    compare = sub.add_parser(
        "compare",
        help="compare two result sets cell by cell (versions, machines, before/after)",
        description="Compare two result sets cell by cell. Prints what differs between the two "
        "environments, each side's typical spread between processes, then a Markdown table "
        "sorted by change (broken cells first, then the largest slowdowns); with --json, the "
        "same as one JSON document. Each ratio's 95% interval includes run-to-run variance: "
        "each side's own interval, widened to its typical spread between processes where "
        "narrower, with a stated drift between runs added (docs/results.md).",
    )
    compare.add_argument("old", help="the reference: a results/ folder or a benchmarks.parquet")
    compare.add_argument("new", help="the one to judge: a results/ folder or a benchmarks.parquet")
    compare.add_argument(
        "--margin",
        default=None,
        help="same speed within this factor, a finite number >= 1 (default: the config's margin)",
    )
    compare.add_argument("--output", help="also write the table (Markdown, or JSON) here")
    compare.add_argument("--json", action="store_true", help="write JSON instead of Markdown")
    compare.add_argument(
        "--fail-on-slowdown",
        action="store_true",
        help="exit 1 when any cell is slower, or was ok and is not any more",
    )
    compare.add_argument(
        "--history",
        metavar="FOLDER",
        help="also judge each cell against its own run-to-run series in this history store "
        "(docs/results-history.md); --fail-on-slowdown then follows that gate",
    )
    compare.add_argument(
        "--screen-level",
        type=float,
        default=None,
        metavar="P",
        help="with --history: the screen's level a cell (default 0.2); a looser screen names "
        "more suspects for --confirm to measure again, and catches more",
    )
    compare.add_argument(
        "--confirm",
        action="store_true",
        help="measure the cells flagged slower or suspect again here, OLD's interpreter "
        "against NEW's in lockstep, before failing; the cells are built from the workflow's "
        "config (--directory, --configfile, --config)",
    )
    compare.add_argument(
        "--confirm-rounds",
        type=int,
        default=5,
        metavar="N",
        help="paired rounds per flagged cell (default 5, at least 2)",
    )
    compare.add_argument(
        "--confirm-max-rounds",
        type=int,
        default=15,
        metavar="M",
        help="rounds a flagged cell in doubt may reach, one more at a time (default 15)",
    )
    _config_options(compare)
    compare.set_defaults(run=_compare)


def _add_offsite(sub) -> None:
    """``numbench offsite plan|run|import``: the three steps of running cells elsewhere."""
    offsite = sub.add_parser(
        "offsite",
        help="run the grid's cells on another host and bring them back as one archive",
        description="plan (here): validate the config as the workflow does and write the plan; "
        "run (there): make the inputs, run every cell, pack one .tar.gz (needs numpy, pyarrow "
        "and the package's sources only: `PYTHONPATH=src python -m numbench offsite run`); "
        "import (here): check the archive and bring its cells into results/. A plan and an "
        "archive are trusted in nothing: every path written is derived from a cell's identity.",
    )
    steps = offsite.add_subparsers(dest="step", required=True, metavar="STEP")
    _add_offsite_plan(steps)
    _add_offsite_run(steps)
    _add_offsite_import(steps)
    offsite.set_defaults(run=_offsite)


def _add_offsite_plan(steps) -> None:
    """``offsite plan``: the config's plan, and the bundle the other host needs."""
    plan = steps.add_parser("plan", help="write the plan of a config (here)")
    _config_options(plan)
    plan.add_argument("--output", required=True, help="the plan's JSON file")
    plan.add_argument(
        "--bundle",
        help="also write a .tar.gz of what the other host needs: the package's sources, "
        "the plan, and the user's operation files and data files (operations.NAME.inputs)",
    )


def _add_offsite_run(steps) -> None:
    """``offsite run PLAN``: the plan's cells measured and packed, on the other host."""
    run = steps.add_parser("run", help="run a plan's cells and pack them (there)")
    run.add_argument("plan", help="the plan's JSON file")
    run.add_argument("--output", required=True, help="the archive to write (.tar.gz)")
    run.add_argument(
        "--workdir",
        help="scratch folder for inputs, cells and logs (default: the output's name + .work)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="keep the inputs files and cells an earlier run left in the scratch folder",
    )
    run.add_argument(
        "--stop-after-s",
        type=_above_zero(float, "a number of seconds"),
        metavar="S",
        help="begin no cell once S seconds have passed (nor one the longest so far says would "
        "end past them), pack the cells measured into a part and exit 3 if cells are left",
    )
    run.add_argument(
        "--resume-from",
        action="append",
        metavar="PART",
        help="an archive an earlier run of this plan packed (on any host): its cells are not "
        "measured again; give every earlier part, each with its own --resume-from",
    )
    run.add_argument(
        "--batch",
        type=_above_zero(int, "a whole number of cells"),
        metavar="N",
        help="run the cells in batches of N, the rounds each runs ahead of its cells first "
        "(default under --stop-after-s: 16; else all at once)",
    )


def _above_zero(kind: type, what: str):
    """An argparse type: ``kind`` of the text, finite and above 0, or the error naming it."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not 0 < value < float("inf"):  # nan fails this too
            raise argparse.ArgumentTypeError(f"must be {what} above 0, not {text!r}")
        return value

    return parse


def _add_offsite_import(steps) -> None:
    """``offsite import ARCHIVE``: the archive's cells checked and brought into results/."""
    imp = steps.add_parser("import", help="bring an archive's cells into results/ (here)")
    imp.add_argument(
        "archive",
        nargs="+",
        help="the archive of `offsite run`, or every part of a run over several leases",
    )
    _config_options(imp)
    imp.add_argument("--results", help="the results folder (default: DIRECTORY/results)")
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace cell files here that differ from the archive's",
    )


def _add_unlock(sub) -> None:
    """``numbench unlock``: Snakemake's lock removed when the run that held it was killed."""
    unlock = sub.add_parser(
        "unlock",
        help="remove Snakemake's lock when the run that held it was killed (`make run` does this)",
    )
    unlock.add_argument(
        "--directory", default=".", help="the workflow's folder (default: the current one)"
    )
    unlock.set_defaults(run=_unlock)


def _add_check(sub) -> None:
    """``numbench check PATH|NAME``: an operation tried once before it is measured."""
    check = sub.add_parser(
        "check",
        help="try an operation (a .py file of your own, or a name) before measuring it",
        description="Load an operation, run its generator and reference at one size and each "
        "implementation whose library imports here once, and print every problem found as "
        "FILE:LINE: message. Exit 1 if there is any (numbench.check).",
    )
    check.add_argument("target", help="the operation's .py file, or its name")
    check.add_argument("--size", type=int, help="the size to check at (default: see above)")
    check.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    _config_options(check)
    check.set_defaults(run=_check)


def _add_history(sub) -> None:
    """``numbench history add|list|show|changes``: every run kept, and what it says."""
    history = sub.add_parser(
        "history",
        help="keep every run and look at it: each cell's series, and where it stepped",
        description="The history store (docs/results-history.md): add a results folder's runs "
        "(one per host), list the runs, show a filter of cells run after run, or list the "
        "steps found in each cell's series with what changed between those runs.",
    )
    steps = history.add_subparsers(dest="step", required=True, metavar="STEP")
    add = steps.add_parser("add", help="add results folders' runs (the workflow does this)")
    add.add_argument("results", nargs="+", help="a results/ folder (with benchmarks.parquet)")
    steps.add_parser("list", help="one line a run: date, host, commit, what changed, cells")
    show = steps.add_parser("show", help="a filter of cells, run after run (--json for JSON)")
    for name in ("library", "device", "operation", "size", "dtype", "threads", "host"):
        show.add_argument(f"--{name}", help=f"only cells of this {name}")
    show.add_argument("--json", action="store_true", help="write JSON instead of a table")
    changes = steps.add_parser("changes", help="the steps found in each cell's series")
    changes.add_argument(
        "--margin", type=float, help="a step passes this factor (default: the config's margin)"
    )
    changes.add_argument("--json", action="store_true", help="write JSON instead of a table")
    for step in (add, steps.choices["list"], show, changes):
        step.add_argument(
            "--store",
            default="history",
            help="the history folder (default: history, the config's history.folder)",
        )
    history.set_defaults(run=_history)


def _add_site(sub) -> None:
    """``numbench site``: the history as static HTML (numbench.site)."""
    site = sub.add_parser(
        "site",
        help="build the history's results site: static HTML that opens from the file system",
        description="Build the history store's static results site (docs/results-history.md).",
    )
    site.add_argument("--history", default="history", help="the store (default: history)")
    site.add_argument("--out", default="history-site", help="where (default: history-site)")
    site.add_argument("--margin", type=float, help="a step passes this factor (default: margin)")
    site.set_defaults(run=_site)


def _add_system(sub) -> None:
    """``numbench system``: what on this machine makes timings less stable."""
    system = sub.add_parser(
        "system",
        help="say what on this machine makes timings less stable, and what to do about it",
        description="Read the CPUs and the load, the frequency governor and turbo boost, "
        "ASLR and transparent huge pages, then sample for a moment the processes that take "
        "the CPUs and the hypervisor's steal; print each with what to do about it. Anything "
        "that cannot be read (no /sys in a container) is said, not fatal. Changes nothing.",
    )
    system.add_argument("--json", action="store_true", help="write JSON instead of text")
    system.add_argument(
        "--seconds",
        type=float,
        default=0.5,
        help="how long to sample other processes and steal (default: 0.5)",
    )
    system.set_defaults(run=_system)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


def entry() -> None:
    """The console script (and ``python -m numbench``). It leaves as a cell worker does
    (``worker.leave``): once an ``offsite import`` had printed its error and returned 1, the
    process still died by SIGABRT in a native library's teardown, in one test run of many."""
    status = main()
    from numbench.measure.worker import leave

    leave(status)
