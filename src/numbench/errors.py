"""Errors about results files, shared by the worker (which must stay free of pyarrow) and
the analysis steps.

A file that cannot be read is never skipped: the error names it and the one command that
makes it again (Snakemake then reruns everything downstream of it, as its mtime is newer).
"""

from __future__ import annotations

import os


class CorruptFile(Exception):
    """A results file cannot be read; the message names it and the command that remakes it."""


def remake_command(path: str | os.PathLike) -> str:
    """The command that regenerates ``path`` and then everything that depends on it."""
    return f"snakemake --cores 1 --forcerun {path}"


def corrupt(kind: str, path: str | os.PathLike, why: str) -> CorruptFile:
    return CorruptFile(
        f"cannot read {kind} file {path}: {why}. Remake it with: {remake_command(path)}"
    )
