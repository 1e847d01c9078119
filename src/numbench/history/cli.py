"""What each step of ``numbench history`` and ``compare --history`` does and prints
(``numbench.cli`` holds their arguments, and imports this only when the command runs: the
store needs pandas)."""

from __future__ import annotations

import argparse
import sys


def run_history(args: argparse.Namespace, exit_bad_input: int) -> int:
    """``numbench history STEP``: add, list, show or changes; ``exit_bad_input`` for a bad store."""
    from numbench.history import HistoryError, add_results, read
    from numbench.history.views import (
        FILTERS,
        changes_text,
        frame_json,
        list_text,
        series_frame,
        show_text,
    )

    try:
        if args.step == "add":
            for results in args.results:
                for done in add_results(results, args.store):
                    what = "added" if done["added"] else "already in the history"
                    print(f"{results}: run {done['run_id']} ({done['host']}) {what}")
            return 0
        store = read(args.store)
    except HistoryError as exc:
        print(f"history {args.step}: {exc}", file=sys.stderr)
        return exit_bad_input
    for skipped in store.skipped:
        print(f"history: skipped {skipped}", file=sys.stderr)
    if args.step == "list":
        print(list_text(store.runs))
    elif args.step == "show":
        frame = series_frame(store, {name: getattr(args, name) for name in FILTERS})
        print(frame_json(frame) if args.json else show_text(frame))
    else:
        from numbench.config import default_margin
        from numbench.history.changes import changes

        found = changes(store, float(args.margin or default_margin()))
        print(frame_json(found) if args.json else changes_text(found))
    return 0


def history_gate(args: argparse.Namespace, margin: float, text: str):
    """(text, failed, table) of ``compare --history``: compare's own text, then the gate's,
    whether it fails, and its table of cells; None
    (compare as without it, said on stderr) when the history holds no run. A store that
    cannot be read raises ``HistoryError``."""
    from numbench.history import HistoryError, read
    from numbench.history.gate import SCREEN_ALPHA, gate
    from numbench.history.gate_text import gate_json, gate_text

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
