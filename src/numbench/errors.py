"""Errors about results files, shared by the worker (which must stay free of pyarrow) and
the analysis steps.

A file that cannot be read is never skipped: the error names it and the one command that
makes it again (Snakemake then reruns everything downstream of it, as its mtime is newer).
"""

from __future__ import annotations

import contextlib
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


class MachineryFault(RuntimeError):
    """A fault of numbench's machinery or of the host, not of the library measured: the
    cell's job fails with this message and writes no cell file (the module's docstring)."""


def os_error_reason(exc: OSError) -> str:
    """An OSError in words: its reason and the file it names (pyarrow's carry neither)."""
    if exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def machinery(what: str):
    """Raise an OSError of the block as a ``MachineryFault`` saying ``what`` failed."""
    try:
        yield
    except OSError as exc:
        raise MachineryFault(f"{what}: {os_error_reason(exc)}") from exc


# -- the host's timing lock ---------------------------------------------------------------
