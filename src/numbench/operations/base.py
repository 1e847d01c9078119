"""What an operation is: inputs, a float64 reference, a cost model, a tolerance, and one
small function per library family.

An implementation is a *builder*, keyed in ``implementations`` by library family:
``build(xp, dtype, **params)`` receives the library's module (family ``numpy``: ``numpy``;
``jax``: ``jax.numpy``; ``torch``: ``torch``; ``tensorflow``: ``tensorflow``; ``cupy``:
``cupy``; ``numba``: ``numpy``, its function compiled by ``numba.njit`` in nopython mode;
``numba-cuda``: ``numba.cuda``, its function launching its own kernels), the dtype name
(``"float32"`` or ``"float64"``) and the operation's parameters as keyword arguments, and
returns a plain function. That function is called with the inputs in the order of
``input_names``, each already the library's array, on the cell's device, in the cell's dtype,
and returns one array or a tuple of arrays of the library's own type, of the reference's
shapes and of the cell's dtype (its complex counterpart where the reference is complex). The
library adapter compiles it (``jax.jit``, ``tf.function``, ``numba.njit``) or leaves it eager
(NumPy, PyTorch, CuPy), and waits for asynchronous results itself: the function neither syncs
nor converts. Its first call, compilation included, is timed apart (``first_call_s``). A
variant library runs the family's builder another way (``jax-eager`` without ``jax.jit``,
``torch-compile`` through ``torch.compile``). Imports of a library belong inside its builder,
so that an operation's file imports where only NumPy is installed.

*Parameters* are the few settings an operation has besides its size (``linreg_gd``'s number of
iterations). An operation declares them with their defaults in ``params``; the config may
override them per operation; the reference, the cost model and every builder receive the same
values as keyword arguments. Operations without parameters take none.

*Element counts* (``input_elements``, ``output_elements``) say how many real numbers the
arrays hold for a size, worked out from the shapes in ``make_inputs`` and ``make_fixed`` and
the reference's output, without allocating anything: the config refuses a size whose cells
could not hold them in this host's memory (``memory_floor_bytes``).

This class is the one interface of every operation, the nine built-in ones and a user's own
alike: a user's file defines a module-level ``OPERATION = numbench.Operation(...)`` (see
``numbench.operations.loading``). Every field is given by keyword. Required: ``name``,
``summary``, ``input_names``, ``make_inputs``, ``reference``, ``tolerance`` and
``implementations``; the rest are optional. An operation without ``flops`` or
``bytes_moved`` has no cost model: its cells measure as any other, and their rates
(``gflop_per_s``, ``gb_per_s``) are null; one with ``bytes_moved`` alone (its work is not
floating-point arithmetic: a sort's comparisons) has a ``gb_per_s`` and is placed on the
roofline by its bytes. ``flops_exact`` says the flop count is the arithmetic every
implementation does (matmul's 2 n^3, which no BLAS shortens): a cell of it past its roof has
found the roof measured low, never a cost-model error. It is false by default: a count
that is an estimate (an FFT's, a function counted as one flop) can be wrong.

*Copies, always.* The reference receives float64 copies of the inputs, and each
implementation the library's own copies (the worker never hands it the arrays it loaded), so
neither can change the stored inputs, nor what a later cell or check sees, by writing into
its arguments.

*Its own generator.* An operation that draws its inputs its own way (a kernel suite's own
input maker) gives its ``seed``: ``make_inputs(size, seed)`` then receives that int, or the
config's ``operations.NAME.seed`` in its place, rather than numbench's generator. Either way
the seed is recorded in the inputs file and in each cell's ``seed`` column.

*Dtypes.* An operation that makes sense in some dtypes only (a kernel written for float64)
says so in ``dtypes``; a grid's other dtypes give ``unsupported`` cells with the reason, and
it gives a tolerance for its own dtypes only.

*Inputs an implementation writes into.* An implementation that changes its input arrays
makes every later call time other data; the worker checks the inputs after the timed loop
and fails the cell naming the input. An operation whose implementations write into some
inputs by design names them in ``mutates_inputs``: each call then gets fresh copies of
those, made before each sample's calls and outside the timed region
(``numbench.timing.Timer``'s ``fresh_args``); ``{family: names}`` declares them for some
libraries alone (a fresh input per call has its own cost, which a library whose arrays are
never written into need not pay).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Builder = Callable[..., Callable[..., Any]]

DTYPE_EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


@dataclass(frozen=True, kw_only=True)
class Operation:
    """One operation: what it computes, on which inputs, how its result is checked, and one
    builder per library family (the module docstring says what each receives)."""

    #: the operation's name, as the config's key and the cells' paths spell it
    #: (``[a-z][a-z0-9_]*``)
    name: str
    #: one line saying what is computed, for a reader
    summary: str
    #: the names of the arrays every implementation receives, in the order it receives them
    input_names: tuple[str, ...]
    #: ``make_inputs(size, rng)``: a dict of NumPy arrays holding at least ``input_names``
    #: (those ``make_fixed`` does not give), drawn from ``rng`` alone, so inputs are seeded
    make_inputs: Callable[[int, np.random.Generator], dict[str, np.ndarray]]
    #: ``reference(*inputs, **params)``: the correct output in float64 (one array or a tuple)
    reference: Callable[..., Any]
    #: relative error allowed, per dtype (``{"float32": 1e-5, "float64": 1e-12}``)
    tolerance: dict[str, float]
    #: library family -> builder; a family left out is ``unsupported``
    implementations: dict[str, Builder]
    #: ``flops(size, **params)``: floating-point operations of one call; None: no rates
    flops: Callable[..., float] | None = None
    #: ``bytes_moved(size, itemsize, **params)``: fewest bytes one call reads and writes
    bytes_moved: Callable[..., float] | None = None
    #: whether ``flops`` is exactly the arithmetic every implementation does (see above)
    flops_exact: bool = False
    #: family -> why it cannot express the operation (said in the cell's ``unsupported``)
    unsupported: dict[str, str] = field(default_factory=dict)
    # Families whose implementation is an approximation by design (finite differences):
    # they are checked against ``approx_tolerance`` instead of ``tolerance``.
    approximate: frozenset[str] = frozenset()
    approx_tolerance: dict[str, float] = field(default_factory=dict)
    # Parameter name -> default value (see the module docstring).
    params: dict[str, Any] = field(default_factory=dict)
    # Arrays that do not depend on the size (a model's weights): drawn from a generator of
    # (seed, operation) alone, so every size of a sweep sees the same ones.
    make_fixed: Callable[[np.random.Generator], dict[str, np.ndarray]] | None = None
    # Real numbers in every array of ``input_names`` (the fixed ones too) and in the
    # reference's output (a complex number counts as two), for a size and the parameters as
    # keyword arguments. None: not known, and the config cannot check the size's memory.
    input_elements: Callable[..., int] | None = None
    output_elements: Callable[..., int] | None = None
    #: names of the inputs (of ``input_names``) the implementations write into by design:
    #: each call gets fresh copies of them, made outside the timed region. A tuple holds for
    #: every library; ``{family: (names...)}`` for those families alone (``{"numpy":
    #: ("t",)}``: JAX's arrays, say, are never written into, and reuse theirs)
    mutates_inputs: tuple[str, ...] | dict[str, tuple[str, ...]] = ()
    #: the dtypes the operation makes sense in (``("float64",)`` for a kernel that only does):
    #: a grid's other dtypes give ``unsupported`` cells saying so, and need no tolerance
    dtypes: tuple[str, ...] = ("float32", "float64")
    #: the seed of the operation's own input maker: where given, ``make_inputs(size, seed)``
    #: receives an int seed (this one, or the config's ``operations.NAME.seed``) instead of
    #: numbench's generator, and draws with its own generator from it
    seed: int | None = None
    #: library name -> its compile options (``{"numba": {"parallel": True}}``), passed to the
    #: library's compiler (``numbench.operations.kernels``); the config may override them
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def inputs_source(self, size: int, seed: int):
        """What ``make_inputs`` receives at ``size`` beside the size: the seed itself, for an
        operation with its own generator (``seed``), else numbench's generator of
        (seed, operation, size)."""
        if self.seed is not None:
            return int(seed)
        from . import input_rng

        return input_rng(seed, self.name, size)

    def resolve_params(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The defaults updated by ``overrides``; an unknown name is an error."""
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - set(self.params))
        if unknown:
            known = ", ".join(self.params) or "none"
            raise KeyError(f"{self.name} has no parameter {unknown[0]!r}; known: {known}")
        return {**self.params, **overrides}

    def build(self, family: str, xp: Any, dtype: str, params: dict[str, Any] | None = None):
        """The plain function of ``family`` for this dtype and these parameters."""
        return self.implementations[family](xp, dtype, **self.resolve_params(params))

    def run_reference(self, arrays: dict[str, np.ndarray], params: dict[str, Any] | None = None):
        """The float64 reference output for these inputs. The reference gets float64 copies,
        never ``arrays`` themselves: one that writes into its arguments (as many kernels
        written in place do) leaves the inputs as they were drawn."""
        args = (np.array(arrays[n], dtype=np.float64, copy=True) for n in self.input_names)
        return self.reference(*args, **self.resolve_params(params))

    def cost(self, size: int, itemsize: int, params: dict[str, Any] | None = None):
        """(floating-point operations, fewest bytes moved) of one call; each None where the
        operation does not give it."""
        p = self.resolve_params(params)
        flops = None if self.flops is None else float(self.flops(size, **p))
        moved = None if self.bytes_moved is None else float(self.bytes_moved(size, itemsize, **p))
        return flops, moved

    def memory_floor_bytes(
        self, size: int, dtype: str, params: dict[str, Any] | None = None
    ) -> int | None:
        """The least memory a cell of this size and dtype holds at once, from the shapes alone
        (None when the operation does not give its element counts).

        The inputs file is float64 whatever the cell's dtype: the job that makes it holds the
        float64 inputs and reference together, and every worker loads both whole before it
        casts the inputs to its dtype, then holds its own output (in its dtype) beside the
        reference to check it. So float32 cells need the float64 inputs and reference too,
        and only the output shrinks. It is a floor: the library's copy of the inputs, its
        workspace and a lockstep partner's process come on top, so a size under it can still
        run out of memory (``cell_memory_limit_mb`` and the ``crashed`` status cover that).
        """
        if self.input_elements is None or self.output_elements is None:
            return None
        p = self.resolve_params(params)
        float64 = np.dtype(np.float64).itemsize
        inputs, outputs = int(self.input_elements(size, **p)), int(self.output_elements(size, **p))
        return (inputs + outputs) * float64 + outputs * np.dtype(dtype).itemsize

    def tolerance_for(self, family: str, dtype: str) -> float:
        if family in self.approximate:
            return self.approx_tolerance[dtype]
        return self.tolerance[dtype]

    def mutated_by(self, family: str) -> tuple[str, ...]:
        """The inputs ``family``'s implementation writes into by design (``mutates_inputs``)."""
        if isinstance(self.mutates_inputs, dict):
            return tuple(self.mutates_inputs.get(family, ()))
        return tuple(self.mutates_inputs)

    def unsupported_reason(self, family: str, dtype: str | None = None) -> str | None:
        """Why a cell of ``family`` (and ``dtype``, where given) is ``unsupported``, or None."""
        if dtype is not None and dtype not in self.dtypes:
            return f"{self.name} supports only {', '.join(self.dtypes)}, not {dtype} (its dtypes)"
        if family in self.unsupported:
            return self.unsupported[family]
        if family not in self.implementations:
            return f"no {family} implementation of {self.name}"
        return None


def params_json(params: dict[str, Any]) -> str:
    """The canonical text of an operation's parameters ("" when it has none)."""
    return json.dumps(params, sort_keys=True) if params else ""


def as_outputs(value: Any) -> tuple[np.ndarray, ...]:
    """Normalise one array, a tuple of arrays or a dict of them (in its order) to a tuple
    of NumPy arrays."""
    if isinstance(value, dict):
        return tuple(np.asarray(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return tuple(np.asarray(v) for v in value)
    return (np.asarray(value),)


def paired_outputs(result: Any, reference: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, result's array, reference's array) of each output, in the reference's order.
    A reference that is a dict names its outputs (``output 'u'``), and a result may then be
    a dict of the same keys or a tuple in the reference's order; otherwise outputs are
    numbered (``output 0``). ValueError where the count or the keys differ."""
    if isinstance(reference, dict):
        names = list(reference)
        labels = [f"output {n!r}" for n in names]
        if isinstance(result, dict):
            if set(result) != set(names):
                raise ValueError(
                    f"outputs {sorted(map(str, result))} differ from the reference's "
                    f"{sorted(map(str, names))}"
                )
            result = tuple(result[n] for n in names)
    elif isinstance(result, dict):
        raise ValueError(
            f"a dict of outputs ({', '.join(map(str, result))}), but the reference gives "
            "no names: return a tuple in the reference's order"
        )
    outs, refs = as_outputs(result), as_outputs(reference)
    if len(outs) != len(refs):
        raise ValueError(f"expected {len(refs)} outputs, got {len(outs)}")
    if not isinstance(reference, dict):
        labels = [f"output {i}" for i in range(len(refs))]
    return list(zip(labels, outs, refs, strict=True))


def _one_error(out: np.ndarray, ref: np.ndarray) -> float:
    ref128 = ref.astype(np.complex128 if np.iscomplexobj(ref) else np.float64)
    diff = out.astype(ref128.dtype) - ref128
    if not np.all(np.isfinite(diff)):
        return float("inf")
    denom = float(np.linalg.norm(ref128.ravel()))
    num = float(np.linalg.norm(diff.ravel()))
    return num / denom if denom > 0 else num


def output_errors(result: Any, reference: Any) -> list[tuple[str, float]]:
    """(label, norm-wise relative error ||r - ref|| / ||ref||) of each output; ValueError
    naming the output whose shape differs from the reference's."""
    errors = []
    for label, out, ref in paired_outputs(result, reference):
        if out.shape != ref.shape:
            what = label if len(as_outputs(reference)) > 1 else "output"
            raise ValueError(f"{what} shape {out.shape} differs from reference {ref.shape}")
        errors.append((label, _one_error(out, ref)))
    return errors


def relative_error(result: Any, reference: Any) -> float:
    """Largest norm-wise relative error over the outputs: ||r - ref|| / ||ref||."""
    return max((e for _, e in output_errors(result, reference)), default=0.0)


def outputs_over(errors: list[tuple[str, float]], tolerance: float, dtype: str) -> str | None:
    """Which of several outputs miss the tolerance, named with their errors; None where all
    are within it, or where there is one output only (the error alone says it)."""
    over = [(label, e) for label, e in errors if not e <= tolerance]
    if len(errors) < 2 or not over:
        return None
    named = "; ".join(
        f"{label}: relative error {e:.3g} exceeds the {dtype} tolerance {tolerance:g}"
        for label, e in over
    )
    return f"{named} ({len(over)} of {len(errors)} outputs)"


def mismatch_report(result: Any, reference: Any, worst: int = 5) -> str:
    """Where ``result`` departs from ``reference``, for the log of a cell that failed its
    check: per output, its relative error, how many elements are off by more than 1e-3 of
    the reference's largest magnitude, and the ``worst`` elements (index, result, reference).
    A one-off wrong element (a flipped bit) reads differently here from an inaccurate kernel
    (every element a little off)."""
    try:
        paired = paired_outputs(result, reference)
    except ValueError as exc:
        return str(exc)
    lines = []
    for label, out, ref in paired:
        if out.shape != ref.shape:
            lines.append(f"{label}: shape {out.shape}, reference {ref.shape}")
            continue
        ref128 = ref.astype(np.complex128 if np.iscomplexobj(ref) else np.float64).ravel()
        got = out.astype(ref128.dtype).ravel()
        err = np.abs(got - ref128)
        err = np.where(np.isfinite(err), err, np.inf)
        scale = float(np.max(np.abs(ref128))) if ref128.size else 0.0
        one = _one_error(out, ref)
        far = int(np.sum(err > 1e-3 * scale)) if scale > 0 else int(np.sum(err > 0))
        lines.append(
            f"{label} ({out.dtype}, shape {out.shape}): relative error {one:.3g}; "
            f"{far} of {err.size} elements off by more than 1e-3 of the largest |reference| "
            f"({scale:.4g})"
        )
        for j in np.argsort(-err, kind="stable")[: min(worst, err.size)]:
            index = np.unravel_index(int(j), out.shape) if out.ndim else ()
            lines.append(
                f"  [{', '.join(map(str, index))}] {got[j].item():.9g} "
                f"against {ref128[j].item():.9g}"
            )
    return "\n".join(lines)


def expected_dtype(reference: np.ndarray, dtype: str) -> np.dtype | None:
    """The dtype a cell of ``dtype`` must return for an output whose float64 reference is
    ``reference``: ``dtype`` for a real one, its complex counterpart for a complex one; None
    (any of the same kind) for a reference of whole numbers or booleans."""
    if np.iscomplexobj(reference):
        return np.result_type(np.dtype(dtype), np.complex64)
    if reference.dtype.kind == "f":
        return np.dtype(dtype)
    return None


def dtype_problem(result: Any, reference: Any, dtype: str) -> str | None:
    """Why ``result`` (NumPy arrays) is not of the dtype a ``dtype`` cell must return, or
    None: a float32 cell that returns float64 measured other work than it says."""
    for label, out, ref in paired_outputs(result, reference):
        want = expected_dtype(ref, dtype)
        if want is not None and out.dtype != want:
            return f"{label} has dtype {out.dtype}; a {dtype} cell must return {want}"
        if want is None and out.dtype.kind != ref.dtype.kind:
            return f"{label} has dtype {out.dtype}; the reference's is {ref.dtype}"
    return None


def array_digest(array: np.ndarray) -> str:
    """A checksum of an array's bytes (and shape and dtype), to tell whether a call changed
    it without keeping a copy of it. Every worker takes one of each input before and after
    its calls, so it is CRC-32 (zlib's), a few times faster than a cryptographic hash: it
    guards against a kernel that writes into its inputs, not against an adversary, and a
    change it misses has a chance of one in 2^32."""
    import zlib

    data = np.ascontiguousarray(array)
    crc = zlib.crc32(f"{data.dtype.str}{data.shape}".encode())
    crc = zlib.crc32(memoryview(data.reshape(-1)).cast("B"), crc) if data.size else crc
    return f"{crc:08x}"
