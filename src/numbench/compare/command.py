"""``numbench compare``: what it does (``run_compare``; ``numbench.cli`` holds its
arguments, and imports this only when the command runs: the tables need pandas): compare's
own table, the history's gate (``--history``), then the flagged cells measured again
(``--confirm``). What it prints is worded by ``numbench.compare.report``."""

from __future__ import annotations

import argparse
import json
import sys

from numbench.compare.report import confirm_text, gate_json, gate_text, markdown


def run_compare(args: argparse.Namespace, exit_bad_input: int) -> int:
    """``numbench compare OLD NEW``; ``exit_bad_input`` for bad input."""
    from numbench.compare.runs import (
        BROKEN,
        EXIT_SLOWER,
        CompareError,
        comparison,
        comparison_json,
        counts,
        regressions,
    )
    from numbench.config import default_margin
    from numbench.contract import write_text_atomic
    from numbench.stats import SLOWER

    margin = args.margin if args.margin is not None else default_margin()
    if getattr(args, "screen_level", None) is not None and not args.history:
        print(
            "compare: --screen-level is the history's screen: give --history too", file=sys.stderr
        )
        return exit_bad_input
    try:
        compared = comparison(args.old, args.new, margin)
        text = comparison_json(compared) if args.json else markdown(compared)
        gated = _history_gate(args, float(margin), text) if args.history else None
        if gated is None:
            table, failed = compared.table, bool(len(regressions(compared.table)))
        else:
            text, failed, table = gated
        confirmed = _confirm(args, table, float(margin), text) if args.confirm else None
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return exit_bad_input
    if confirmed is not None:
        text, failed = confirmed
    print(text)
    if args.output:
        write_text_atomic(text.rstrip("\n") + "\n", args.output)
    if not (args.fail_on_slowdown and failed):
        return 0
    if confirmed is not None:
        print("compare: slower after measuring again (see 'Measured again')", file=sys.stderr)
    elif gated is not None:
        print("compare: the history's gate fails (see 'Against the history')", file=sys.stderr)
    else:
        c = counts(table)
        print(
            f"compare: {c.get(SLOWER, 0)} cell(s) slower beyond {float(margin):g}x, "
            f"{c.get(BROKEN, 0)} cell(s) broken (ok before, not now)",
            file=sys.stderr,
        )
    return EXIT_SLOWER


def _history_gate(args: argparse.Namespace, margin: float, text: str):
    """``compare --history``'s (text, failed, table), or None without runs
    (``history_gate``)."""
    from numbench.compare.runs import CompareError
    from numbench.history import HistoryError

    try:
        return history_gate(args, margin, text)
    except HistoryError as exc:
        raise CompareError(str(exc)) from None


def history_gate(args: argparse.Namespace, margin: float, text: str):
    """(text, failed, table) of ``compare --history``: compare's own text, then the gate's,
    whether it fails, and its table of cells; None
    (compare as without it, said on stderr) when the history holds no run. A store that
    cannot be read raises ``HistoryError``."""
    from numbench.compare.gate import SCREEN_ALPHA, gate
    from numbench.history import HistoryError, read

    level = getattr(args, "screen_level", None)
    level = SCREEN_ALPHA if level is None else level
    if not 0 < level < 1:
        raise HistoryError(f"--screen-level must lie between 0 and 1, not {level:g}")
    store = read(args.history)
    for skipped in store.skipped:
        print(f"history: skipped {skipped}", file=sys.stderr)
    if store.runs.empty:
        print(
            f"compare: the history {args.history} holds no run: each cell is judged by the "
            "two sides' own intervals",
            file=sys.stderr,
        )
        return None
    result = gate(args.old, args.new, store, margin, level)
    if args.json:
        return gate_json(result, text), result.failed, result.table
    words = text.rstrip("\n") + "\n\n" + gate_text(result, len(store.runs), margin)
    return words, result.failed, result.table


def _confirm(args: argparse.Namespace, table, margin: float, text: str) -> tuple[str, bool]:
    """(text, failed) once the cells ``table`` flags slower or suspect are measured again:
    the gate fails where a cell is broken, confirmed slower, or flagged slower and not
    cleared (``numbench.compare.confirm.still_failing``)."""
    from dataclasses import asdict

    from numbench.compare.confirm import confirm, flagged, still_failing
    from numbench.compare.runs import BROKEN, CompareError, load
    from numbench.offsite import OffsiteError
    from numbench.offsite.plan import load_config
    from numbench.stats import SLOWER

    if args.confirm_rounds < 2:
        raise CompareError(f"--confirm-rounds must be at least 2, not {args.confirm_rounds}")
    if args.confirm_max_rounds < args.confirm_rounds:
        raise CompareError(
            f"--confirm-max-rounds ({args.confirm_max_rounds}) must be at least "
            f"--confirm-rounds ({args.confirm_rounds})"
        )
    keys = flagged(table)
    strict = flagged(table, (SLOWER,))
    outcomes = []
    if keys:
        try:
            cfg = load_config(args.directory, args.configfile, args.config, cells_run_here=True)
        except OffsiteError as exc:
            raise CompareError(f"--confirm: {exc}") from None
        outcomes = confirm(
            keys,
            load(args.old),
            load(args.new),
            cfg,
            args.directory,
            margin,
            rounds=args.confirm_rounds,
            max_rounds=args.confirm_max_rounds,
            run_pair=_locked_lockstep,
            say=lambda line: print(line, file=sys.stderr, flush=True),
            strict=strict,
        )
    broken = bool((table["change"] == BROKEN).any())
    failed = broken or bool(still_failing(outcomes))
    rows = [asdict(o) for o in outcomes]
    if args.json:
        document = json.loads(text)
        document["confirm"] = {"rounds": args.confirm_rounds, "failed": failed, "cells": rows}
        return json.dumps(document, indent=1, allow_nan=False), failed
    return text.rstrip("\n") + "\n\n" + confirm_text(rows, args.confirm_rounds, margin), failed


def _locked_lockstep(specs, seed):
    """One lockstep round, with the host's timing lock held, as the workflow's cells hold it
    (``numbench.measure.host_lock``), so that no cell measures beside it."""
    from numbench.measure.host_lock import cell_label, timing_lock
    from numbench.measure.lockstep import run_lockstep

    with timing_lock(holder=f"compare --confirm: {cell_label(specs[0])}", say=_quiet):
        return run_lockstep(specs, seed)


def _quiet(line: str) -> None:
    print(f"confirm: {line}", file=sys.stderr, flush=True)
