"""The code of an operation, and its hash: what makes a cell's result stale.

A cell's spec holds the hash of its operation's code (``CellSpec.operation_hash``), so editing
that code changes the spec of that operation's cells, and only theirs: Snakemake measures
them (and makes their inputs) again, and leaves every other cell as it is. The cell file
records the hash (column ``operation_hash``).

The code is the operation's own file *and every file it imports from its own folder*,
followed import by import: a helper module beside the operation's file, a package in that
folder, the helpers those import in turn. benchopt hashes only a solver's own file and asv
only a benchmark's function, so an edited helper keeps stale results there; here it does
not. Imports are read from the source (``ast``), wherever they stand (at the top, inside a
builder, under ``if``), without running anything. What lies outside the folder (NumPy, the
libraries, numbench itself) is not the operation's code and is not hashed; nor is a module
imported by a name computed at run time (``importlib.import_module(name)``), or a data file
the operation reads.

*The folder* is where the imports resolve: for a user's file, the folder that holds it (its
top-level imports find their helpers there, as Python finds them beside a script); for an
operation inside a package (a built-in one in ``numbench.operations``, or one installed
under the entry-point group ``numbench.operations``), the top-level package's folder, where
``numbench.operations.base`` and ``from .base import ...`` both resolve. A package's
``__init__.py`` counts where the import names the package itself (``import helpers``), not
where a module inside it is imported (``from numbench.operations.base import ...`` hashes
``base.py`` alone): the registry in ``numbench/operations/__init__.py`` is no built-in
operation's code.

The hash is SHA-256 over the files' paths (relative to the folder; the operation's own file
as ``OWN_FILE``, so the file can be carried under another name, as the offsite bundle does)
and their bytes, in a sorted order.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

#: how the operation's own file is named in the hash, whatever its name on disk
OWN_FILE = "<operation>"


@dataclass(frozen=True)
class OperationCode:
    """The files of an operation's code and their hash."""

    #: the operation's own file
    main: Path
    #: the folder its imports resolve in
    root: Path
    #: the files it imports from that folder, transitively, the main file excluded, sorted
    helpers: tuple[Path, ...]
    #: SHA-256 (hex) of the files' names and bytes (the module docstring)
    sha256: str

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _module_file(root: Path, package: str | None, dotted: str) -> list[Path]:
    """The files inside ``root`` that importing ``dotted`` reads as code of the operation:
    the module's own file, or a package's ``__init__.py`` when the name is the package."""
    parts = dotted.split(".")
    if package is not None:
        if parts[0] != package:
            return []
        parts = parts[1:]
    if not parts:
        return []
    folder = root.joinpath(*parts[:-1])
    module = folder / f"{parts[-1]}.py"
    if module.is_file():
        return [module]
    init = folder / parts[-1] / "__init__.py"
    return [init] if init.is_file() else []


def _dotted_of(file: Path, root: Path, package: str | None) -> list[str]:
    """The module path (as parts) of ``file`` inside ``root``: ``numbench.operations.sort``."""
    parts = list(file.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ([package] if package else []) + parts


def _imported_names(file: Path, root: Path, package: str | None) -> set[str]:
    """Every module name ``file`` imports (absolute, relative ones resolved against its
    package), with each ``from X import y`` also as ``X.y`` (``y`` may be a submodule)."""
    tree = ast.parse(file.read_bytes(), filename=str(file))
    here = _dotted_of(file, root, package)
    if file.name != "__init__.py":
        here = here[:-1]  # the package the module lies in
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(here):
                    continue
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target:
                continue
            if node.module:  # ``from . import y`` imports y, not the package's registry
                names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def operation_code(main: str | Path, root: str | Path | None = None, package: str | None = None):
    """The code of the operation in ``main``: its file and the files it imports from
    ``root`` (by default its own folder), followed transitively. ``package``: the name of
    the package whose folder ``root`` is (None for a plain folder of modules). Raises
    OSError when a file cannot be read and SyntaxError when one does not parse."""
    main = Path(main).resolve()
    root = main.parent if root is None else Path(root).resolve()
    seen: set[Path] = set()
    todo = [main]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        for name in sorted(_imported_names(file, root, package)):
            todo.extend(f for f in _module_file(root, package, name) if f not in seen)
    helpers = tuple(sorted(p for p in seen if p != main))
    digest = hashlib.sha256()
    for label, path in sorted(
        [(OWN_FILE, main)] + [(p.relative_to(root).as_posix(), p) for p in helpers]
    ):
        data = path.read_bytes()
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)
    return OperationCode(main=main, root=root, helpers=helpers, sha256=digest.hexdigest())
