"""The worker's set-up of a cell before anything is timed: the library imported first, the
operation loaded (or the cell ``unsupported``), what the library is, the inputs and the
reference loaded and checked against the spec, and the kernel to time built. Each step
returns None, with the report saying why, where the cell cannot go on.

Like the worker, it imports no pyarrow: it runs in the measured process.
"""

from __future__ import annotations

import json
import time

from numbench.measure.worker_checks import threads_seen
from numbench.spec import CellSpec, ProcessReport


def import_library(spec: CellSpec):
    """(the cell's library adapter, the report begun): the library imported first, in a fresh
    interpreter, so that ``import_s`` is the whole import (NumPy included) as a user's
    script would pay it. A library that is missing here gives an ``unavailable`` report."""
    from numbench.libraries import Unavailable, get
    from numbench.libraries.slowed import slowed_if_asked

    adapter = slowed_if_asked(get(spec.adapter_name)(spec.device, spec.dtype, spec.threads))
    t0 = time.perf_counter()
    try:
        adapter.load()
    except Unavailable as exc:
        return adapter, ProcessReport(status="unavailable", error=str(exc))
    except ImportError as exc:
        return adapter, ProcessReport(
            status="unavailable", error=f"{adapter.module} cannot be imported: {exc}"
        )
    return adapter, ProcessReport(status="failed", import_s=time.perf_counter() - t0)


def load_operation(spec: CellSpec, adapter, out: ProcessReport):
    """The cell's operation, or None with the report saying why: its file does not import
    here (``failed``), or the library cannot express it or the operation does not support
    the cell's dtype (``unsupported``). An operation whose
    code changed since the spec was written is not the library's outcome: the job fails."""
    from numbench import operations
    from numbench.errors import MachineryFault

    try:
        op = operations.load(spec.operation, spec.operation_file, spec.operation_hash).operation
    except operations.OperationChanged as exc:
        raise MachineryFault(str(exc)) from None
    except operations.OperationError as exc:
        out.error = str(exc)
        return None
    reason = op.unsupported_reason(adapter.family, spec.dtype)
    if reason is not None:
        out.status, out.error = "unsupported", reason
        return None
    return op


def kernel(spec: CellSpec, adapter, op, params: dict, out: ProcessReport):
    """The function the cell times: what the builder returned, compiled by the adapter, or
    the kernel it handed over as it is (``numbench.as_is``; ``out.as_is`` says which).
    None with the report ``unsupported`` where a variant library would time a kernel handed
    over as it is (it would be the family's own cell again)."""
    from numbench.operations.kernels import AsIs, library_options, prepared, variant_reason

    built = op.build(adapter.family, adapter.xp, spec.dtype, params)
    options = library_options(op, adapter.name, spec.options)
    if isinstance(built, AsIs) and (adapter.variant or spec.adapter):
        # a variant library, or a library variant of the config (other options): it would
        # time the same kernel as the family's own cell
        out.status, out.error = "unsupported", variant_reason(adapter, adapter.family)
        if spec.adapter:
            out.error = (
                f"{spec.library} runs {adapter.name} with other compile options; the "
                f"{adapter.family} builder hands its kernel over as it is (numbench.as_is), "
                f"with options of its own, so it would time the same kernel as {adapter.name}"
            )
        return None
    # a kernel handed over as it is takes no options (the config's raise, as a failed cell)
    fn, out.as_is = prepared(adapter, built, spec.options if isinstance(built, AsIs) else options)
    return fn


def describe_library(spec: CellSpec, adapter, out: ProcessReport) -> None:
    """What a reviewer needs of the library as loaded: its version, the device, the BLAS,
    and the threads it really runs with."""
    out.library_version = adapter.version()
    out.device_name = adapter.device_name()
    details = adapter.device_details()
    out.device_details = json.dumps(details) if details else ""
    out.blas = adapter.blas()
    out.threads_used, out.threads_note = threads_seen(adapter, spec.threads)


def load_inputs(spec: CellSpec, op, out: ProcessReport):
    """(host inputs, float64 reference, the operation's parameters), or None with the
    report's error saying why: the inputs file cannot be read, or it was made with other
    parameters, another seed or by other code of the operation than the cell's (remake
    it)."""
    from numbench import operations
    from numbench.errors import CorruptFile
    from numbench.measure import inputs as inputs_file

    params = op.resolve_params(spec.params)
    try:
        inputs, reference, inputs_params, inputs_code, inputs_seed = inputs_file.load(
            spec.inputs, op.input_names
        )
    except CorruptFile as exc:
        out.error = str(exc)
        return None
    if inputs_params != operations.params_json(params):
        out.error = (
            f"the inputs file was made with parameters {inputs_params or '{}'} but the "
            f"cell asks for {operations.params_json(params) or '{}'}; remake the inputs"
        )
        return None
    if inputs_code != spec.operation_hash:
        out.error = (
            f"the inputs file was made by other code of {spec.operation} (hash "
            f"{inputs_code[:12] or 'not recorded'}, the cell's is {spec.operation_hash[:12]}); "
            "remake the inputs"
        )
        return None
    if spec.seed is not None and inputs_seed != spec.seed:
        # Snakemake remakes the file when the seed changes (a rule parameter); this is for a
        # file copied in, or a spec run by hand against another run's inputs
        out.error = (
            f"the inputs file {spec.inputs} was drawn with seed {inputs_seed} but the cell "
            f"asks for seed {spec.seed}; remake the inputs"
        )
        return None
    return inputs, reference, params
