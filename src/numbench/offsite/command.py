"""``numbench offsite plan|run|import``: each step called with the command line's options,
its refusal printed in one line (``numbench.cli`` holds the options themselves)."""

from __future__ import annotations

import argparse
import sys


def run_offsite(args: argparse.Namespace, exit_interrupted: int, exit_partial: int) -> int:
    """Run the step ``args.step`` names; the exit status."""
    from numbench.offsite import OffsiteError

    try:
        if args.step == "plan":
            from numbench.offsite import write_plan

            made = write_plan(
                args.directory, args.output, args.configfile, args.config, bundle=args.bundle
            )
            print(
                f"plan {made['plan_hash'][:12]}: {len(made['cells'])} cells, "
                f"{len(made['inputs'])} inputs files -> {args.output}"
                + (f" (bundle: {args.bundle})" if args.bundle else "")
            )
        elif args.step == "run":
            from numbench.offsite import run_plan

            def say(line: str) -> None:
                print(line, flush=True)

            try:
                manifest = run_plan(
                    args.plan,
                    args.output,
                    args.workdir,
                    args.resume,
                    say=say,
                    stop_after_s=args.stop_after_s,
                    resume_from=args.resume_from or (),
                    batch=args.batch,
                )
                if not manifest["part"]["complete"]:
                    return exit_partial
            except KeyboardInterrupt:
                print(
                    "interrupted: the finished cells stay in the scratch folder; run again "
                    "with --resume to go on",
                    file=sys.stderr,
                )
                return exit_interrupted
        else:
            from numbench.offsite import import_archive

            import_archive(
                args.archive,  # one archive, or every part of a run over several leases
                args.directory,
                args.results,
                args.configfile,
                args.config,
                force=args.force,
            )
    except OffsiteError as exc:
        print(f"offsite {args.step}: error: {exc}", file=sys.stderr)
        return 1
    return 0
