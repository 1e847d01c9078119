"""The worker's checks of what a cell got and gave, apart from its timing: the threads and
CPUs it really ran with against those asked, the inputs an implementation must not write into
(a digest before the first call, compared after the samples), the inputs placed from
copies of their own, fresh copies of those an operation declares it writes into, and the output against the float64 reference.

They run in the measured process, so like the worker they import no pyarrow.
"""

from __future__ import annotations

import sys


def threads_seen(adapter, asked: int) -> tuple[int | None, str | None]:
    """The threads the library reports running with, and a note where they differ from
    those asked (None where it matches, or where the library has no CPU threads to say)."""
    try:
        used = adapter.threads_used()
    except Exception as exc:  # noqa: BLE001 - metadata only, never fatal
        return None, f"asked for {asked}; {adapter.name} could not say how many it runs: {exc}"
    if used is None or used == asked:
        return used, None
    return used, f"asked for {asked}, {adapter.name} runs {used}"


def cpus_note(cpus: int, asked: int) -> str | None:
    """A note where the worker may run on fewer CPUs than the cell's threads."""
    if cpus >= asked:
        return None
    return f"asked for {asked} threads, the worker may run on {cpus} CPUs"


def input_digests(adapter, args: tuple) -> list[str]:
    """A digest of each input as the implementation receives it (``base.array_digest``)."""
    from numbench.operations.base import array_digest

    return [array_digest(adapter.to_numpy(a)) for a in args]


def inputs_changed(adapter, op, args: tuple, before: list[str]) -> str | None:
    """The error of a cell whose implementation wrote into its inputs during the timed
    loop (every call after the first then timed other data), or None. Read after the
    loop, from a digest taken before the first call: no copy of the inputs is kept."""
    from numbench.operations.check import changed_inputs, mutation_message

    names = changed_inputs(before, args, adapter.to_numpy, op.input_names)
    return mutation_message(adapter.family, names) if names else None


def placed_copies(adapter, inputs: list, dtype: str) -> tuple:
    """The inputs on the cell's device, each placed from a copy of its own in the cell's
    dtype: an adapter may hand the host array itself to the implementation (NumPy and Numba
    on the CPU at the array's own dtype, torch's ``from_numpy``), and one that writes into
    its argument would then change ``inputs``, from which the fresh copies of
    ``mutates_inputs``, the transfers and the check are made."""
    import numpy as np

    return tuple(adapter.to_device(np.array(a, dtype=dtype, copy=True)) for a in inputs)


def fresh_inputs(adapter, op, inputs: list, args: tuple):
    """For an operation that declares inputs its implementations write into
    (``Operation.mutates_inputs``, for the adapter's family): a function making one call's
    arguments, with a fresh
    device copy of each of those made from the untouched host arrays; else None. The
    timer makes them before each sample's calls, outside the timed region."""
    declared = op.mutated_by(adapter.family)
    if not declared:
        return None
    import numpy as np

    mutated = [name in declared for name in op.input_names]

    def fresh() -> tuple:
        return tuple(
            adapter.to_device(np.array(host, copy=True)) if mutates else arg
            for mutates, host, arg in zip(mutated, inputs, args, strict=True)
        )

    return fresh


def log_mismatch(adapter, result, reference, error: str | None) -> None:
    """Say in the cell's log (the worker's stderr) where a result that failed its check
    departs from the reference, element by element: the report keeps only the figure."""
    from numbench import operations

    print(f"the result fails its check: {error}", file=sys.stderr)
    try:
        print(operations.mismatch_report(adapter.to_numpy(result), reference), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - a diagnosis only, never fatal
        print(f"(no element-wise report: {type(exc).__name__}: {exc})", file=sys.stderr)
    sys.stderr.flush()


def check_output(
    adapter, result, reference, which: str, dtype: str, tolerance: float
) -> tuple[float, str | None]:
    """(largest relative error of ``result``'s outputs against the reference's, error text or
    None). Each output is checked against its own reference; where there are several, the
    text names those beyond ``tolerance``. An output of another count, keys or shape than the
    reference's, or of another dtype than the cell's, has an infinite error: the cell is a
    ``mismatch`` saying why."""
    from numbench.operations.base import dtype_problem, output_errors, outputs_over

    host = adapter.to_numpy(result)
    try:
        errors = output_errors(host, reference)
    except ValueError as exc:
        return float("inf"), f"{which}output does not match the reference: {exc}"
    wrong = dtype_problem(host, reference, dtype)
    if wrong:
        return float("inf"), f"{which}output does not match the reference: {wrong}"
    over = outputs_over(errors, tolerance, dtype)
    return max(e for _, e in errors), (f"{which}{over}" if over else None)
