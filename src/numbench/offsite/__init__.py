"""Running a grid's cells on another host, and bringing them back as one archive.

Three steps, for a host that has the numerical libraries but not the workflow's environment
(no Snakemake, no PyYAML or jsonschema, no network; files travel by copy):

1. ``plan`` (here, in the workflow's environment) validates the config exactly as the
   workflow does and writes one JSON plan: every cell's spec and output path (in the
   workflow's seeded order), the inputs files to make, and the config it came from; its
   bundle carries the user's operation files and data files (``numbench.offsite.plan``).
2. ``run`` (there; needs numpy, pyarrow and this package from ``src/``, nothing else) makes
   the inputs files in a scratch folder, runs every cell with ``numbench.measure.supervisor.run_cell``
   (the host lock, the timeouts and the fault statuses come with it), keeps one log per
   cell as the workflow does, and packs the cell files, the logs and a manifest into one
   ``.tar.gz``.
3. ``import`` (here) checks the archive against its manifest and against the config here,
   makes sure the user's data files here are the ones the cells were measured on and the
   inputs files exist and hold the very arrays the cells were measured on,
   and moves the cells into ``results/`` so that Snakemake takes them as up to date: the
   next ``snakemake`` runs only the analysis rules.

Every problem is one ``OffsiteError`` whose message names it; nothing is moved into
``results/`` before every check has passed.

A plan and an archive are trusted in nothing (DESIGN.md, "What numbench trusts"): every path
``run`` and ``import`` write is derived from a cell's identity (``numbench.cells``) and a plan
that names another is refused (``check_plan``); an archive's members are checked from their
tar headers (names, types, sizes, with the limits of ``numbench.offsite.archive``) before any
is unpacked.

The package holds the command too (``run_offsite``: each step called with the command line's
options, its refusal printed in one line; ``numbench.cli`` holds the options themselves), beside
the three steps it drives.
"""

from __future__ import annotations

import argparse
import sys

from numbench.offsite.archive import (  # noqa: F401 - the package's API
    ARCHIVE_MEMBER_COUNT_LIMIT,
    ARCHIVE_MEMBER_LIMIT_BYTES,
    ARCHIVE_TOTAL_LIMIT_BYTES,
    unpack_archive,
)
from numbench.offsite.common import (  # noqa: F401 - the package's API
    ARCHIVE_FORMAT,
    CELL_MEMBER,
    DEFAULT_CONFIG,
    FORMAT_VERSION,
    PLAN_FORMAT,
    REFERENCE_NORM_RTOL,
    SCHEMA,
    TRANSFER_LIMIT_BYTES,
    OffsiteError,
    canonical,
    cell_of,
    code_hash,
    compare_inputs,
    inputs_checksums,
    inputs_log_path,
    log_path,
    now_iso,
    plan_hash,
    sha256,
)
from numbench.offsite.importer import (  # noqa: F401 - the package's API
    check_against_config,
    import_archive,
)
from numbench.offsite.plan import (  # noqa: F401 - the package's API
    check_plan,
    check_plan_paths,
    load_config,
    make_plan,
    read_plan,
    write_bundle,
    write_plan,
)
from numbench.offsite.run import (  # noqa: F401 - the package's API
    default_workdir,
    pack,
    run_plan,
)


def run_offsite(args: argparse.Namespace, exit_interrupted: int, exit_partial: int) -> int:
    """Run the step ``args.step`` names; the exit status."""
    try:
        if args.step == "plan":
            made = write_plan(
                args.directory, args.output, args.configfile, args.config, bundle=args.bundle
            )
            print(
                f"plan {made['plan_hash'][:12]}: {len(made['cells'])} cells, "
                f"{len(made['inputs'])} inputs files -> {args.output}"
                + (f" (bundle: {args.bundle})" if args.bundle else "")
            )
        elif args.step == "run":

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
