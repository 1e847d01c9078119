"""What each step of ``numbench history`` does and prints (``numbench.cli`` holds its
arguments, and imports this only when the command runs: the store needs pandas);
``compare --history`` is ``numbench.compare.command``'s."""

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
