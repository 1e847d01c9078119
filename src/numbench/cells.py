"""A cell's identity, and every file named after it: the one place a cell path is written.

A cell is one (library, device, dtype, threads, operation, size) of the grid. Its Parquet file,
its log, its spread rounds' files and logs, and its inputs file are all formatted from the
templates below, and read back from a path by the patterns made of the same templates. The
workflow's rules take their output and log patterns from here too, so a rule, the grid, the
offsite plan and archive, aggregation and ``compare`` cannot disagree on where a cell lives.

Nothing read from elsewhere (an offsite plan, an archive member, a results folder) is used as a
path before ``Cell.from_path`` has parsed it: the patterns admit no ``..``, no absolute path and
no character outside each field's alphabet.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

#: The order of a cell's fields in its paths (and in every table's key).
FIELDS = ("library", "device", "dtype", "threads", "operation", "size")

#: What each field of a path may hold (also the workflow's wildcard constraints).
FIELD_PATTERNS = {
    "library": "[a-z0-9-]+",
    "device": "cpu|gpu",
    "dtype": "float32|float64",
    "threads": "[0-9]+",
    "operation": "[a-z][a-z0-9_]*",
    "size": "[0-9]+",
    "round": "[0-9]+",
}

STEM = "{library}/{device}/{dtype}/t{threads}/{operation}/{size}"
CELL_FILE = f"results/cells/{STEM}.parquet"
CELL_LOG = f"logs/cells/{STEM}.log"
ROUND_FILE = f"results/rounds/{STEM}/r{{round}}.json"
ROUND_LOG = f"logs/rounds/{STEM}/r{{round}}.log"
INPUTS_FILE = "results/inputs/{operation}/{size}.npz"
INPUTS_LOG = "logs/inputs/{operation}/{size}.log"


def _regex(template: str) -> re.Pattern[str]:
    """The template as a full-match regex with one named group per field."""
    out, pos = [], 0
    for match in re.finditer(r"\{(\w+)\}", template):
        out.append(re.escape(template[pos : match.start()]))
        name = match.group(1)
        out.append(f"(?P<{name}>{FIELD_PATTERNS[name]})")
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out))


CELL_FILE_RE = _regex(CELL_FILE)
CELL_LOG_RE = _regex(CELL_LOG)
ROUND_FILE_RE = _regex(ROUND_FILE)
INPUTS_LOG_RE = _regex(INPUTS_LOG)


@dataclass(frozen=True, order=True)
class Cell:
    """One cell of the grid. Its files are properties; ``from_path`` parses one back."""

    library: str
    device: str
    operation: str
    size: int
    dtype: str = "float64"
    threads: int = 1

    def fields(self) -> dict[str, str | int]:
        return asdict(self)

    @property
    def path(self) -> str:
        """The cell's Parquet file (``results/cells/...``)."""
        return CELL_FILE.format(**self.fields())

    @property
    def log(self) -> str:
        """The log of the cell's job (``logs/cells/...``)."""
        return CELL_LOG.format(**self.fields())

    def round_path(self, round_index: int) -> str:
        """A spread round's file: temporary, read and removed by the cell's job."""
        return ROUND_FILE.format(**self.fields(), round=round_index)

    def round_log(self, round_index: int) -> str:
        return ROUND_LOG.format(**self.fields(), round=round_index)

    @property
    def inputs(self) -> str:
        """The inputs file the cell is measured on (shared by every library of its size)."""
        return inputs_path(self.operation, self.size)

    @classmethod
    def from_path(cls, path: str) -> Cell:
        """The cell whose file (or log, or round file) is ``path``; ValueError for anything
        else, so a path from elsewhere is used only once it is a cell's own."""
        for regex in (CELL_FILE_RE, CELL_LOG_RE, ROUND_FILE_RE):
            match = regex.fullmatch(path)
            if match:
                return cls.from_fields(match.groupdict())
        raise ValueError(f"{path!r} is not a cell's file, log or round file")

    @classmethod
    def from_fields(cls, fields) -> Cell:
        """From a mapping (a table row, Snakemake's wildcards) holding the six fields."""
        return cls(
            library=str(fields["library"]),
            device=str(fields["device"]),
            operation=str(fields["operation"]),
            size=int(fields["size"]),
            dtype=str(fields["dtype"]),
            threads=int(fields["threads"]),
        )


def inputs_path(operation: str, size: int | str) -> str:
    return INPUTS_FILE.format(operation=operation, size=size)


def inputs_log_path(operation: str, size: int | str) -> str:
    """The log of the job that makes an inputs file."""
    return INPUTS_LOG.format(operation=operation, size=size)


def cell_path(
    library: str,
    device: str,
    operation: str,
    size: int | str,
    dtype: str = "float64",
    threads: int | str = 1,
) -> str:
    """The Parquet file of the cell with these fields."""
    return Cell(library, device, operation, int(size), dtype, int(threads)).path
