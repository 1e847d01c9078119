"""What ``numbench site`` does and prints (``numbench.cli`` holds its arguments, and imports
this only when the command runs: the site needs pandas and altair)."""

from __future__ import annotations

import argparse
import sys
import time


def run_site(args: argparse.Namespace, exit_bad_input: int) -> int:
    """Build the site of ``args.history`` into ``args.out``; ``exit_bad_input`` for a store
    that cannot be used, a folder that is no site, or a margin that is no factor."""
    from numbench.history import HistoryError
    from numbench.site import SiteError, build_site

    if args.margin is not None and not args.margin >= 1:  # nan fails this too
        print(f"site: --margin must be a factor of at least 1, not {args.margin}", file=sys.stderr)
        return exit_bad_input
    start = time.perf_counter()
    try:
        built = build_site(args.history, args.out, args.margin)
    except (HistoryError, SiteError) as exc:
        print(f"site: {exc}", file=sys.stderr)
        return exit_bad_input
    for skipped in built.skipped:
        print(f"history: skipped {skipped}", file=sys.stderr)
    took = time.perf_counter() - start
    index = built.pages[0]
    print(f"site: {len(built.pages)} pages in {args.out} ({took:.1f} s); open {index}")
    return 0
