"""A cell's identity, and every file named after it: the one place a cell path is written.

A cell is one (library, device, dtype, threads, operation, size) of the grid, measured in the
base environment or in one of the config's ``environments`` (library versions side by side,
``numbench.config.environments``). Its Parquet file,
its log, its early rounds' files and logs, and its inputs file are all formatted from the
templates below, and read back from a path by the patterns made of the same templates. The
workflow's rules take their output and log patterns from here too, so a rule, the grid, the
offsite plan and archive, aggregation and ``compare`` cannot disagree on where a cell lives.

Nothing read from elsewhere (an offsite plan, an archive member, a results folder) is used as a
path before ``Cell.from_path`` has parsed it: the patterns admit no ``..``, no absolute path and
no character outside each field's alphabet.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

#: The order of a cell's fields in its paths.
FIELDS = ("library", "device", "dtype", "threads", "operation", "size")
#: A cell's key in the tables, in the order their key columns are written (speedups.parquet,
#: ``compare``); the cell files and benchmarks.parquet write the first five, as contract 1 did.
KEY = ("library", "device", "operation", "size", "dtype", "threads")
#: A measurement's key: the cell on one host (results from several hosts keep both).
KEY_WITH_HOST = (*KEY, "host")
#: A speedup curve over sizes: a cell's key on its host without its size (crossovers.parquet).
CURVE = tuple(field for field in KEY_WITH_HOST if field != "size")
#: What a roof is measured for: a cell's key on its host without library, operation and size.
SETTING = ("host", "device", "dtype", "threads")
#: The order the tables' rows are sorted in (speedups, precision, scaling): by operation,
#: then library and device, then size; a stable sort keeps the rest as it was.
SORT = ("operation", "library", "device", "size")
#: The order the summary lists cells in (every cell, the warnings): by operation and size.
SORT_BY_SIZE = ("operation", "size", "library", "device", "dtype", "threads")

#: What an environment's name may hold (``environments`` in the config).
ENVIRONMENT_PATTERN = "[A-Za-z0-9][A-Za-z0-9._-]*"
#: Between a library and its environment in the library's folder: ``numpy@numpy-2.3``. A
#: cell of the base environment has no ``@``, so its paths are those of a grid without
#: environments.
AT = "@"

#: What each field of a path may hold (also the workflow's wildcard constraints). The
#: library's folder carries the environment, if any (``member``).
FIELD_PATTERNS = {
    "library": f"[a-z0-9-]+(?:{AT}{ENVIRONMENT_PATTERN})?",
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
#: where each finished paired cell leaves its rounds' variance for the cells after it
#: (``numbench.measure.replicates.run_round_sd``): a guide to the stopping rule, no result
ROUND_SD_FOLDER = "results/round_sd"
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


def round_sd_place(cell_file: str | os.PathLike) -> tuple[Path, str] | None:
    """The folder (``ROUND_SD_FOLDER`` beside the cell file's ``results/``, under whatever
    folder holds it) and the name under which a cell file's cell leaves its round variance;
    None for a file outside the layout (a test's, say)."""
    parts = Path(cell_file).parts
    if len(parts) < 8 or not CELL_FILE_RE.fullmatch("/".join(parts[-8:])):
        return None
    return Path(*parts[:-8], ROUND_SD_FOLDER), "-".join(parts[-6:]).removesuffix(".parquet")


@dataclass(frozen=True, order=True)
class Cell:
    """One cell of the grid. Its files are properties; ``from_path`` parses one back."""

    library: str
    device: str
    operation: str
    size: int
    dtype: str = "float64"
    threads: int = 1
    #: the environment it runs in: "" for the base one (the workflow's own interpreter)
    environment: str = ""

    def fields(self) -> dict[str, str | int]:
        """The fields of its paths: the library's folder carries the environment."""
        out = asdict(self)
        out["library"] = member(self.library, self.environment)
        del out["environment"]
        return out

    @property
    def in_base(self) -> Cell:
        """The same cell in the base environment (what an environment's cell is paired with)."""
        return Cell(self.library, self.device, self.operation, self.size, self.dtype, self.threads)

    @property
    def path(self) -> str:
        """The cell's Parquet file (``results/cells/...``)."""
        return CELL_FILE.format(**self.fields())

    @property
    def log(self) -> str:
        """The log of the cell's job (``logs/cells/...``)."""
        return CELL_LOG.format(**self.fields())

    def round_path(self, round_index: int) -> str:
        """An early round's file: temporary, read and removed by the cell's job."""
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
        """From a mapping (a table row, Snakemake's wildcards) holding the six fields; the
        library may carry its environment (``numpy@numpy-2.3``), or a row its own
        ``environment`` field."""
        library, _, environment = str(fields["library"]).partition(AT)
        if not environment and "environment" in fields:
            environment = fields["environment"] or ""
            environment = "" if environment != environment else str(environment)  # NaN
        return cls(
            library=library,
            environment=environment,
            device=str(fields["device"]),
            operation=str(fields["operation"]),
            size=int(fields["size"]),
            dtype=str(fields["dtype"]),
            threads=int(fields["threads"]),
        )


def member(library: str, environment: str = "") -> str:
    """The library's folder: ``numpy``, or ``numpy@numpy-2.3`` in an environment."""
    return f"{library}{AT}{environment}" if environment else library


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
    environment: str = "",
) -> str:
    """The Parquet file of the cell with these fields."""
    return Cell(library, device, operation, int(size), dtype, int(threads), environment).path


def roof_dims(cells) -> list[tuple[str, str, int]]:
    """The (device, dtype, threads) of ``cells``, each once, sorted: the settings a roofs
    table has rows for (the workflow's roofs job, an offsite run's)."""
    return sorted({(c.device, c.dtype, int(c.threads)) for c in cells})


def roof_libraries(cells) -> dict[str, list[str]]:
    """Each device of ``cells`` and the libraries with cells on it, sorted: the GEMMs that
    may set a device's compute roof are those of its cells' libraries (on ``device: gpu``
    the CPU's roof is NumPy's alone, not that of libraries whose cells are on the GPU)."""
    found: dict[str, set[str]] = {}
    for c in cells:
        found.setdefault(c.device, set()).add(c.library)
    return {device: sorted(libs) for device, libs in sorted(found.items())}
