"""A problem with an operation, said with the file and line to look at, and the helpers
that find the line: where a field is given, where a function is defined, where an
exception was raised in the operation's own code (``numbench.operations.check``)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

from .loading import OPERATION_ATTRIBUTE, Found, last_line, raised_at

#: the most lines of an exception's message a problem quotes
MESSAGE_LINES = 6


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an operation, and where to look."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


def message_of(exc: BaseException) -> str:
    """An exception in at most ``MESSAGE_LINES`` lines (numba's errors run to dozens)."""
    lines = [ln for ln in last_line(exc).splitlines() if ln.strip()]
    if len(lines) > MESSAGE_LINES:
        lines = lines[:MESSAGE_LINES] + ["..."]
    return "\n    ".join(lines)


def field_lines(found: Found) -> dict[str, int]:
    """Line of each keyword of the ``OPERATION = Operation(...)`` call in the operation's
    own file (and of the assignment itself, as ``OPERATION``); empty where it is not found."""
    try:
        tree = ast.parse(found.code.main.read_bytes())
    except (OSError, SyntaxError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == OPERATION_ATTRIBUTE for t in node.targets
        ):
            lines = {OPERATION_ATTRIBUTE: node.lineno}
            if isinstance(node.value, ast.Call):
                lines.update({k.arg: k.lineno for k in node.value.keywords if k.arg})
            return lines
    return {}


def source_of(fn: Any, found: Found) -> tuple[str, int | None]:
    """(file, line) where a function of the operation is defined, else its own file."""
    try:
        return inspect.getsourcefile(fn) or str(found.code.main), inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return str(found.code.main), None


def raised_problem(exc: BaseException, fn: Any, found: Found, what: str) -> Problem:
    """A problem for ``what`` raising ``exc``: at the innermost line of the operation's own
    code it raised in, else at the function's definition."""
    at = raised_at(exc, {found.code.main, *found.code.helpers})
    file, line = (str(at[0]), at[1]) if at else source_of(fn, found)
    return Problem(file, line, f"{what} raised {message_of(exc)}")
