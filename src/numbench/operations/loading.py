"""Where an operation comes from (built into numbench, a user's own file, or a package
installed with an entry point), and which files are its code, with their hash. Every process
that needs an operation (the config, the inputs job, the cell's supervisor and workers, an
offsite run, ``numbench check``) finds it here, the same way.

*A user's file* is a ``.py`` file anywhere that defines a module-level
``OPERATION = numbench.Operation(...)``; the config names it
(``operations: {NAME: {module: PATH, sizes: [...]}}``) and the cells carry its path and the
hash of its code in their spec (``CellSpec.operation_file``, ``CellSpec.operation_hash``),
so no process looks for it anywhere else. It is imported as a module of its own (named
after its path, not after the file, so two operations' files may share a name), with its
folder first on ``sys.path``: the helpers beside it import as they would beside a script.
A helper already imported from that folder is imported afresh with the file, so an edited
helper is read again in a long-lived process.

*An installed operation* is found by name, after the built-in ones, in the entry-point
group ``numbench.operations``: the entry point names an ``Operation`` (``mypkg.ops:STENCIL``)
or a module that defines ``OPERATION`` (``mypkg.stencil``).

*The hash* of an operation's code (``operation_code``) is checked wherever the operation is
loaded for a cell: code edited after the workflow planned the cell is refused
(``OperationChanged``), never measured under the old code's name. It is what makes a cell's
result stale: a cell's spec holds it (``CellSpec.operation_hash``), so editing that code
changes the spec of that operation's cells, and only theirs: Snakemake measures them (and
makes their inputs) again, and leaves every other cell as it is. The cell file records the
hash (column ``operation_hash``).

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
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .base import Operation

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


#: the entry-point group of operations installed as packages
ENTRY_POINT_GROUP = "numbench.operations"
#: the module-level name a user's file defines
OPERATION_ATTRIBUTE = "OPERATION"
BUILT_IN, USER_FILE, INSTALLED = "built-in", "file", "entry point"


class OperationError(Exception):
    """An operation that cannot be used; the message names its file and what is wrong."""


class OperationChanged(OperationError):
    """The operation's code is not the code the cell was planned with."""


@dataclass(frozen=True)
class Found:
    """An operation, where it came from and its code."""

    operation: Operation
    code: OperationCode
    #: BUILT_IN, USER_FILE or INSTALLED
    origin: str
    #: the user's file (None where the operation is found by its name)
    file: Path | None = None

    @property
    def sha256(self) -> str:
        return self.code.sha256


_FROM_FILES: dict[Path, Found] = {}
_BY_NAME: dict[str, Found] = {}


def _module_name(path: Path) -> str:
    """A module name of the user's file, unique to its path."""
    return "numbench_user_operation_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]


def raised_at(exc: BaseException, files: set[Path]) -> tuple[Path, int] | None:
    """(file, line) of the innermost frame of ``exc`` that lies in one of ``files`` (the
    operation's own code), or of a syntax error; None where no frame does."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return Path(exc.filename), exc.lineno
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        try:
            here = Path(frame.filename).resolve()
        except (OSError, ValueError):
            continue
        if here in files and frame.lineno:
            return here, frame.lineno
    return None


def where_raised(exc: BaseException, files: set[Path]) -> str:
    """ " (helper.py, line N)" where ``raised_at`` finds the line, else ""."""
    at = raised_at(exc, files)
    return f" ({at[0].name}, line {at[1]})" if at else ""


def last_line(exc: BaseException) -> str:
    """The exception's last line, as Python prints it (``ValueError: ...``)."""
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def _code_of_file(path: Path) -> OperationCode:
    try:
        return operation_code(path)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise OperationError(
            f"{path} does not import: SyntaxError: {exc.msg}{where}"
            if Path(exc.filename or path).resolve() == path
            else f"{path} does not import: SyntaxError in {exc.filename}: {exc.msg}{where}"
        ) from None
    except OSError as exc:
        raise OperationError(f"{path} cannot be read: {exc.strerror or exc}") from None


def load_file(path: str | Path) -> Found:
    """The operation a user's file defines (its ``OPERATION``), imported once per process
    and version of its code. Raises OperationError naming the file and what is wrong: it
    is missing, is no ``.py`` file, does not import (the exception's last line, and where),
    defines no ``OPERATION`` or one that is no ``numbench.Operation``."""
    path = Path(path).expanduser()
    if not path.exists():
        raise OperationError(f"{path} does not exist")
    path = path.resolve()
    if path.is_dir():
        raise OperationError(f"{path} is a folder; name the operation's .py file")
    if path.suffix != ".py":
        raise OperationError(f"{path} is not a .py file")
    code = _code_of_file(path)
    cached = _FROM_FILES.get(path)
    if cached is not None and cached.sha256 == code.sha256:
        return cached
    module = _import_file(path, code)
    value = getattr(module, OPERATION_ATTRIBUTE, None)
    if value is None:
        raise OperationError(
            f"{path} defines no {OPERATION_ATTRIBUTE}: numbench reads a module-level "
            f"{OPERATION_ATTRIBUTE} = numbench.Operation(...)"
        )
    if not isinstance(value, Operation):
        raise OperationError(
            f"{path}: {OPERATION_ATTRIBUTE} is a {type(value).__name__}, not a numbench.Operation"
        )
    found = Found(operation=value, code=code, origin=USER_FILE, file=path)
    _FROM_FILES[path] = found
    return found


def _helper_names(code: OperationCode) -> set[str]:
    """The module names the helpers import as, and their packages'."""
    names = set()
    for helper in code.helpers:
        parts = list(helper.relative_to(code.root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return names


def _import_file(path: Path, code: OperationCode) -> ModuleType:
    """Import the user's file with its folder first on ``sys.path``. Its helpers are
    imported afresh: one imported before (an edited one, or another operation's helper of
    the same name from another folder) is dropped from ``sys.modules`` first."""
    folder = str(code.root)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    helpers = set(code.helpers)
    names = _helper_names(code)
    for name in list(sys.modules):
        if name in names or name.split(".")[0] in names:
            del sys.modules[name]
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OperationError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up here
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        where = where_raised(exc, {path, *helpers})
        raise OperationError(f"{path} does not import: {last_line(exc)}{where}") from None
    return module


def built_in(name: str) -> Found | None:
    """A built-in operation by name, with the code of its module; None if there is none."""
    from . import BUILT_IN_MODULES

    module = BUILT_IN_MODULES.get(name)
    if module is None:
        return None
    package = Path(__file__).resolve().parents[1]  # src/numbench
    code = operation_code(module.__file__, package, "numbench")
    return Found(operation=module.OPERATION, code=code, origin=BUILT_IN)


def installed(name: str) -> Found | None:
    """The operation of that name in the entry-point group, or None if no package gives one."""
    from importlib import metadata

    points = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not points:
        return None
    point = points[0]
    where = f"the entry point {name} = {point.value} (group {ENTRY_POINT_GROUP})"
    try:
        value = point.load()
    except Exception as exc:  # noqa: BLE001 - the package's own error is the message
        raise OperationError(f"{where} does not import: {last_line(exc)}") from None
    if isinstance(value, ModuleType):
        value = getattr(value, OPERATION_ATTRIBUTE, None)
    if not isinstance(value, Operation):
        raise OperationError(f"{where} is a {type(value).__name__}, not a numbench.Operation")
    module = sys.modules[point.module]
    top = point.module.split(".")[0]
    # a package's folder; a top-level module's own folder, where only it is ``top``
    root = Path(sys.modules[top].__file__).resolve().parent
    code = operation_code(module.__file__, root, top)
    return Found(operation=value, code=code, origin=INSTALLED)


def installed_names() -> list[str]:
    from importlib import metadata

    return sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def find(name: str) -> Found:
    """The operation called ``name``: a built-in one, else an installed one. KeyError
    naming what is known when there is none."""
    cached = _BY_NAME.get(name)
    if cached is not None:
        return cached
    found = built_in(name) or installed(name)
    if found is None:
        from . import BUILT_IN_MODULES

        known = list(BUILT_IN_MODULES) + installed_names()
        raise KeyError(f"unknown operation {name!r}; known: {', '.join(known)}")
    _BY_NAME[name] = found
    return found


def load(name: str, file: str | Path | None = None, expected_sha256: str | None = None) -> Found:
    """The operation a cell names: from ``file`` (its spec's ``operation_file``) when given,
    else by name; with ``expected_sha256``, its code must be the code the cell was planned
    with (``OperationChanged`` otherwise), and a file's operation must carry ``name``."""
    if file is None:
        try:
            found = find(name)
        except KeyError as exc:
            raise OperationError(str(exc.args[0])) from None
    else:
        found = load_file(file)
        if found.operation.name != name:
            raise OperationError(
                f"{found.file} defines the operation {found.operation.name!r}, not {name!r}"
            )
    if expected_sha256 is not None and found.sha256 != expected_sha256:
        where = found.file or f"{found.origin} operation {name}"
        raise OperationChanged(
            f"the code of the operation {name} ({where}) changed after the cell was planned "
            f"(hash {found.sha256[:12]} here, {expected_sha256[:12]} planned): run the "
            "workflow again, which plans its cells with the new code"
        )
    return found
