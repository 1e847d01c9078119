"""Run a grid's cells on another host and bring them back as one archive.

    plan    (here)  validate the config as the workflow does; write the plan (JSON)
    run     (there) make the inputs, run every cell of the plan, pack one .tar.gz;
                    needs numpy, pyarrow and src/ only (no Snakemake, PyYAML, jsonschema)
    import  (here)  check the archive, bring its cells into results/ as if made here;
                    then `snakemake` runs the analysis rules only

A plan and an archive are trusted in nothing: every path `run` and `import` write is derived
from a cell's identity, a plan that names another is refused, and an archive's members are
checked (names, types, sizes) from their headers before any is unpacked.

See the README's section "Running the cells on another host".
"""

import argparse
import sys

import _path  # noqa: F401

from numbench.offsite import OffsiteError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="step", required=True)

    def config_options(p):
        p.add_argument(
            "--directory", default=".", help="the workflow's folder (default: the current one)"
        )
        p.add_argument(
            "--configfile", nargs="+", default=[], metavar="FILE", help="as for snakemake"
        )
        p.add_argument(
            "--config", nargs="+", default=[], metavar="KEY=VALUE", help="as for snakemake"
        )

    plan = sub.add_parser("plan", help="write the plan of a config (here)")
    config_options(plan)
    plan.add_argument("--output", required=True, help="the plan's JSON file")
    plan.add_argument(
        "--bundle",
        help="also write a .tar.gz of what the other host needs: src/numbench, this script and "
        "the plan",
    )

    run = sub.add_parser("run", help="run a plan's cells and pack them (there)")
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

    imp = sub.add_parser("import", help="bring an archive's cells into results/ (here)")
    imp.add_argument("archive")
    config_options(imp)
    imp.add_argument("--results", help="the results folder (default: DIRECTORY/results)")
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace cell files here that differ from the archive's",
    )

    args = parser.parse_args(argv)
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
                run_plan(args.plan, args.output, args.workdir, args.resume, say=say)
            except KeyboardInterrupt:
                print(
                    "interrupted: the finished cells stay in the scratch folder; run again "
                    "with --resume to go on",
                    file=sys.stderr,
                )
                return 130
        else:
            from numbench.offsite import import_archive

            import_archive(
                args.archive,
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


if __name__ == "__main__":
    from numbench.worker import leave

    # As the cell worker does: once an import had printed its error and returned 1, the
    # process still died by SIGABRT in a native library's teardown, in one test run of many.
    leave(main())
