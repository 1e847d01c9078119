"""Checking an operation before any cell runs: its declared fields, its generator and
reference at one size, and (``numbench check``) each implementation that imports here.

Every check returns *all* the problems it finds, each with the file and line to look at
(a ``Problem``), not only the first: asv's ``check`` stops at the first, so a user fixes one
and runs it again to meet the next. The config refuses an operation with any problem of
the first two kinds (``declared_problems``, ``generator_problems``), before any job runs;
``numbench check`` adds the third (``implementation_problems``), which needs the libraries.
The line to look at is found here too: where a field is given (``field_lines``), where a
function is defined (``source_of``), where an exception was raised in the operation's own
code (``raised_problem``).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from numbench.cells import FIELD_PATTERNS

from .base import array_digest, as_outputs, dtype_problem, output_errors, outputs_over
from .kernels import AsIs, prepared
from .loading import OPERATION_ATTRIBUTE, Found, last_line, raised_at

#: what an operation's name may hold: it is a folder of every cell's path
NAME_PATTERN = FIELD_PATTERNS["operation"]
#: the dtypes a cell may measure; an operation gives a tolerance for each one a config asks
DTYPES = ("float32", "float64")

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


def families() -> tuple[str, ...]:
    """Every library family an implementation may be keyed by (``numba-cuda`` is Numba on
    the GPU), in the registry's order."""
    from numbench.libraries import ADAPTERS

    seen: dict[str, None] = {}
    for cls in ADAPTERS.values():
        for device in cls.devices:
            seen.setdefault(cls(device, "float64", 1).family, None)
    return tuple(seen)


def _kernel_fields(op, add: Callable[[str, str], None]) -> None:
    """The problems of the fields of kernels of one's own: ``seed`` and ``options``."""
    if op.seed is not None and (
        isinstance(op.seed, bool) or not isinstance(op.seed, int) or op.seed < 0
    ):
        add("seed", f"{op.seed!r} is no seed: give a whole number >= 0, or None")
    options = op.options if isinstance(op.options, dict) else None
    if options is None or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in options.items()
    ):
        add("options", "is not a mapping of library name to its compile options (a dict)")
    else:
        from numbench.libraries import ADAPTERS

        for name in options:
            if name not in ADAPTERS:
                add("options", f"{name!r} is no library; libraries: {', '.join(ADAPTERS)}")


def declared_problems(found: Found, dtypes=DTYPES) -> list[Problem]:
    """What is wrong with the fields themselves: a name numbench cannot use, inputs without
    names, dtypes that are not numbench's, a tolerance missing for a dtype of ``dtypes``
    the operation supports, an implementation under an unknown library
    family, an input declared mutated that is not an input, a field that is not callable."""
    op, lines, file = found.operation, field_lines(found), str(found.code.main)
    problems: list[Problem] = []

    def add(field: str, message: str) -> None:
        line = lines.get(field, lines.get(OPERATION_ATTRIBUTE))
        problems.append(Problem(file, line, f"{field}: {message}"))

    if not isinstance(op.name, str) or not re.fullmatch(NAME_PATTERN, op.name):
        add(
            "name",
            f"{op.name!r} is no operation name: lower-case letters, digits and _, first a letter",
        )
    names = op.input_names
    if not (isinstance(names, (tuple, list)) and names and all(isinstance(n, str) for n in names)):
        add("input_names", f"{names!r} is not a tuple of the input arrays' names")
        names = ()
    elif len(set(names)) != len(names):
        add("input_names", f"{tuple(names)!r} names an input twice")
    for field in ("make_inputs", "reference"):
        if not callable(getattr(op, field)):
            add(field, f"{getattr(op, field)!r} is not a function")
    for field in ("flops", "bytes_moved", "make_fixed", "input_elements", "output_elements"):
        value = getattr(op, field)
        if value is not None and not callable(value):
            add(field, f"{value!r} is neither a function nor None")
    supported = op.dtypes if isinstance(op.dtypes, (tuple, list)) else ()
    if not supported or isinstance(op.dtypes, str) or not set(supported) <= set(DTYPES):
        add("dtypes", f"{op.dtypes!r} is not a tuple of dtypes out of {', '.join(DTYPES)}")
        supported = DTYPES
    dtypes = [d for d in dtypes if d in supported]
    if not isinstance(op.flops_exact, bool):
        add("flops_exact", f"{op.flops_exact!r} is not True or False")
    elif op.flops_exact and op.flops is None:
        add("flops_exact", "is True, but the operation gives no flops")
    tolerance = op.tolerance if isinstance(op.tolerance, dict) else {}
    if not isinstance(op.tolerance, dict):
        add("tolerance", "is not a mapping of dtype to relative error")
    for dtype in dtypes:
        value = tolerance.get(dtype)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            add("tolerance", f"gives no relative error > 0 for {dtype} (it gives {value!r})")
    known = families()
    impls = op.implementations if isinstance(op.implementations, dict) else {}
    if not isinstance(op.implementations, dict):
        add("implementations", "is not a mapping of library family to builder")
    for family, builder in impls.items():
        if family not in known:
            add("implementations", f"{family!r} is no library family; families: {', '.join(known)}")
        elif not callable(builder):
            add("implementations", f"the {family} builder {builder!r} is not a function")
    for family in op.unsupported:
        if family not in known:
            add("unsupported", f"{family!r} is no library family; families: {', '.join(known)}")
    for family in op.approximate:
        missing = [d for d in dtypes if d not in op.approx_tolerance]
        if missing:
            add("approx_tolerance", f"{family} is approximate, but no tolerance for {missing}")
    if not isinstance(op.params, dict) or not all(isinstance(k, str) for k in op.params):
        add("params", "is not a mapping of parameter name to default value")
    _kernel_fields(op, add)
    _mutates_problems(op.mutates_inputs, names, known, add)
    return problems


def _mutates_problems(mutates, names, known, add) -> None:
    """``mutates_inputs``: input names, for every library or per library family."""
    per_family = mutates if isinstance(mutates, dict) else {None: mutates}
    for family, declared in per_family.items():
        where = "" if family is None else f"[{family!r}]"
        if family is not None and family not in known:
            add("mutates_inputs", f"{family!r} is no library family; families: {', '.join(known)}")
        if isinstance(declared, str):
            add("mutates_inputs", f"{where}{declared!r} is a string: give a tuple of input names")
            continue
        for name in declared:
            if name not in names:
                add("mutates_inputs", f"{where}{name!r} is not one of input_names {tuple(names)}")


def can_run(op) -> bool:
    """Whether the generator and the reference can be tried despite the declared problems:
    they are functions, and the inputs have names."""
    names = op.input_names
    return (
        callable(op.make_inputs)
        and callable(op.reference)
        and isinstance(names, (tuple, list))
        and bool(names)
        and all(isinstance(n, str) for n in names)
        and isinstance(op.params, dict)
    )


def _drawn(found: Found, size: int, seed: int) -> tuple[list[Problem], dict | None]:
    """(problems, the arrays ``make_fixed`` and ``make_inputs`` drew at ``size``, or None
    where one of them raised or returned no dict)."""
    from . import input_rng

    op = found.operation
    arrays: dict[str, Any] = {}
    for fn, args, what in (
        (op.make_fixed, (input_rng(seed, op.name, 0),), "make_fixed"),
        (
            op.make_inputs,
            (size, op.inputs_source(size, seed)),
            f"make_inputs({size}, {'seed' if op.seed is not None else 'rng'})",
        ),
    ):
        if fn is None:
            continue
        try:
            made = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the user's own error is the problem
            return [raised_problem(exc, fn, found, what)], None
        if not isinstance(made, dict):
            file, line = source_of(fn, found)
            message = f"{what} returned a {type(made).__name__}, not a dict of arrays"
            return [Problem(file, line, message)], None
        arrays.update(made)
    return [], arrays


def generator_problems(
    found: Found, size: int, params: dict, seed: int | None = None
) -> tuple[list[Problem], dict[str, np.ndarray] | None, Any]:
    """Run ``make_fixed``, ``make_inputs`` and ``reference`` at ``size`` with these
    parameters (and the cost model and element counts, where given); return (problems,
    the inputs by name, the reference output), the last two None where they failed."""
    op = found.operation
    if seed is None:  # the operation's own seed, else 0
        seed = op.seed if isinstance(op.seed, int) else 0
    problems, arrays = _drawn(found, size, seed)
    if arrays is None:
        return problems, None, None
    file, line = source_of(op.make_inputs, found)
    missing = [n for n in op.input_names if n not in arrays]
    if missing:
        problems.append(
            Problem(
                file,
                line,
                f"make_inputs({size}, rng) gave {sorted(arrays)}, without "
                f"{missing} of input_names {tuple(op.input_names)}",
            )
        )
        return problems, None, None
    inputs = {}
    for name in op.input_names:
        value = np.asarray(arrays[name])
        if value.dtype.kind not in "biuf":
            problems.append(
                Problem(
                    file,
                    line,
                    f"input {name} is {value.dtype}; inputs are real numbers (stored as float64)",
                )
            )
        inputs[name] = value
    if problems:
        return problems, None, None
    try:
        reference = op.run_reference(inputs, params)
        refs = as_outputs(reference)
    except Exception as exc:  # noqa: BLE001
        return [raised_problem(exc, op.reference, found, f"reference at size {size}")], inputs, None
    file, line = source_of(op.reference, found)
    for i, ref in enumerate(refs):
        if ref.dtype.kind not in "biufc":
            problems.append(
                Problem(file, line, f"reference output {i} is {ref.dtype}, not numbers")
            )
        elif ref.dtype.kind in "fc" and not np.all(np.isfinite(ref)):
            problems.append(
                Problem(file, line, f"reference output {i} at size {size} holds NaN or infinity")
            )
    usable = not problems  # the reference's own problems; the cost model's do not matter
    problems += _count_problems(found, size, params, inputs, refs)
    return problems, inputs, (reference if usable else None)


def _count_problems(found: Found, size: int, params: dict, inputs: dict, refs) -> list[Problem]:
    """The cost model must run, and the element counts (which the config's memory check
    trusts) must be the arrays' own."""
    op, problems = found.operation, []
    for fn, args, what in (
        (op.flops, (size,), "flops"),
        (op.bytes_moved, (size, 8), "bytes_moved"),
    ):
        if fn is not None:
            try:
                float(fn(*args, **params))
            except Exception as exc:  # noqa: BLE001
                problems.append(raised_problem(exc, fn, found, f"{what} at size {size}"))
    real = lambda a: a.size * (2 if np.iscomplexobj(a) else 1)  # noqa: E731
    for fn, actual, what in (
        (op.input_elements, sum(real(a) for a in inputs.values()), "input_elements"),
        (op.output_elements, sum(real(r) for r in refs), "output_elements"),
    ):
        if fn is None:
            continue
        try:
            said = int(fn(size, **params))
        except Exception as exc:  # noqa: BLE001
            problems.append(raised_problem(exc, fn, found, f"{what} at size {size}"))
            continue
        if said != actual:
            file, line = source_of(fn, found)
            problems.append(
                Problem(
                    file, line, f"{what}({size}) = {said}, but the arrays hold {actual} numbers"
                )
            )
    return problems


def changed_inputs(before: list[str], args: tuple, to_numpy: Callable, names) -> list[str]:
    """The names of the inputs whose digest (``base.array_digest``) is no longer ``before``."""
    return [
        name
        for name, digest, arg in zip(names, before, args, strict=True)
        if array_digest(np.asarray(to_numpy(arg))) != digest
    ]


def mutation_message(family: str, names: list[str]) -> str:
    """What a cell (and ``numbench check``) says of an implementation that wrote into inputs."""
    quoted = ", ".join(repr(n) for n in names)
    return (
        f"the {family} implementation changed its input {quoted} (it writes into it, as an "
        "in-place sort does): every call after the first ran on other data. Write into a "
        "copy, or declare the input in the operation's mutates_inputs, so that each call "
        "gets a fresh copy outside the timed region"
    )


def implementation_problems(
    found: Found, family: str, adapter, inputs: dict, reference: Any, dtype: str, params: dict
) -> list[Problem]:
    """Build the ``family`` implementation with ``adapter`` (already loaded), call it once on
    the inputs, and check what a cell checks: it runs, its output has the reference's count,
    shapes and the cell's dtype and lies within the tolerance, and it leaves its inputs as
    they were (unless declared in ``mutates_inputs`` for it)."""
    op = found.operation
    builder = op.implementations[family]
    what = f"the {family} implementation"
    try:
        built = op.build(family, adapter.xp, dtype, params)
        fn = prepared(
            adapter, built, {} if isinstance(built, AsIs) else op.options.get(adapter.name, {})
        )[0]
    except Exception as exc:  # noqa: BLE001
        return [raised_problem(exc, builder, found, f"{what}'s builder")]
    file, line = source_of(builder, found)
    # copies: the implementations of every family are called on the same ``inputs``
    host = [np.array(inputs[n], dtype=np.float64, copy=True) for n in op.input_names]
    args = tuple(adapter.to_device(a) for a in host)
    before = [array_digest(np.asarray(adapter.to_numpy(a))) for a in args]
    call_args = tuple(
        adapter.to_device(np.array(a, copy=True)) if n in op.mutated_by(family) else arg
        for n, a, arg in zip(op.input_names, host, args, strict=True)
    )
    try:
        result = fn(*call_args)
        if adapter.sync is not None:
            adapter.sync(result)
        out = adapter.to_numpy(result)
    except Exception as exc:  # noqa: BLE001
        shapes = ", ".join(f"{n} {a.shape}" for n, a in zip(op.input_names, host, strict=True))
        return [raised_problem(exc, builder, found, f"{what}, called on {shapes},")]
    problems = []
    changed = changed_inputs(before, args, adapter.to_numpy, op.input_names)
    if changed:
        problems.append(Problem(file, line, mutation_message(family, changed)))
    try:
        errors = output_errors(out, reference)
    except ValueError as exc:
        return problems + [
            Problem(file, line, f"{what}'s output does not match the reference: {exc}")
        ]
    wrong_dtype = dtype_problem(out, reference, dtype)
    if wrong_dtype:
        problems.append(Problem(file, line, f"{what}: {wrong_dtype}"))
    try:
        tolerance = op.tolerance_for(family, dtype)
    except (KeyError, TypeError):  # a declared problem already
        return problems
    over = outputs_over(errors, tolerance, dtype)
    if over:
        problems.append(Problem(file, line, f"{what}: {over}"))
    elif not (error := max(e for _, e in errors)) <= tolerance:
        problems.append(
            Problem(
                file,
                line,
                f"{what}'s relative error {error:.3g} exceeds the {dtype} tolerance {tolerance:g}",
            )
        )
    return problems


__all__ = [
    "DTYPES",
    "Problem",
    "can_run",
    "changed_inputs",
    "declared_problems",
    "families",
    "generator_problems",
    "implementation_problems",
    "mutation_message",
]
