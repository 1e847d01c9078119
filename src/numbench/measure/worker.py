"""The measuring worker: one fresh process per cell, started by ``numbench.measure.supervisor``.

Usage: ``python -m numbench.measure.worker SPEC.json RESULT.json``. It pins the CPUs and imports the
library first (the supervisor has already set the environment), then loads inputs, places
them on the device, compiles, measures, checks the output and writes its result as JSON.
Anything that goes wrong inside is caught and reported as a status (a ``MemoryError`` is
said as out of memory; an inputs file that cannot be read names itself and the command that
remakes it); a crash, a hang or memory beyond the limit is seen by the supervisor instead.
A worker that cannot read its spec or write its report (a full disk) says why on stderr and
exits with ``MACHINERY_FAULT_EXIT``: that is numbench's fault or the host's, not the
library's, and the supervisor fails the cell's job rather than store a status.
The worker dies with its supervisor (``PR_SET_PDEATHSIG``), so a killed run leaves no
orphan measuring on.

It records the CPUs it could run on once pinned (``cpus_allowed``): the threads the cell
really got, which under a cluster's allocation may be fewer than the config asks, since
the config is checked against the host that submits the jobs.

Before anything is timed it sets the cell up: the library imported first, the operation
loaded (or the cell ``unsupported``), what the library is, the inputs and the reference
loaded and checked against the spec, and the kernel to time built; each step returns None,
with the report saying why, where the cell cannot go on. Apart from the timing it checks what
the cell got and gave: the threads and CPUs it really ran with against those asked, the inputs
an implementation must not write into (a digest before the first call, compared after the
samples), the inputs placed from copies of their own, fresh copies of those an operation
declares it writes into, and the output against the float64 reference. Everything here runs
in the measured process, so it imports no pyarrow.

**Transfers** (``measure_transfers``): moving data between the host and the device, timed
apart from the samples.

The samples never hold a copy: inputs are placed on the device, and waited for, before
anything is timed, and results stay there. That is right for the compute figures, but "is it
worth moving my arrays to the GPU?" needs the other half of the cost. So a cell on a device
that does not compute in the host's memory also records, after its samples:

- ``h2d_s``: the time to place every input, already in the cell's dtype, on the device as the
  cell places them (the adapter's ``to_device``, which waits until the copy is complete),
  median of a few repeats after the first placement;
- ``d2h_s``: the time to bring a result back into a NumPy array (``to_numpy``), median of a
  few repeats, each reading a fresh result;
- ``h2d_bytes`` and ``d2h_bytes``: the bytes each way (the inputs in the cell's dtype, the
  result as it arrives on the host).

The first placement (the one the samples use) warms the path (CUDA context, pinned staging
buffers) and is not among the repeats; the output check has already read one result back. On
the CPU nothing is moved: the figures are null, not zero.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from numbench.measure import compile_cache
from numbench.spec import MACHINERY_FAULT_EXIT, SUPERVISOR_ENV, CellSpec, ProcessReport


@dataclass(frozen=True)
class Forked:
    """How a worker forked from a zygote (``numbench.measure.zygote``) came to be, as the
    zygote tells it in ``zygote.FORKED_ENV``: the zygote's import of the library, whether
    this worker is its first (whose supervisor started the zygote and waited for that
    import), the zygote's resident memory once imported and this worker's just after the
    fork."""

    import_s: float
    first: bool
    import_rss_mb: float | None = None
    start_rss_mb: float | None = None


def forked_from_environment() -> Forked | None:
    """The worker's ``Forked``, where a zygote forked it; None in a fresh one."""
    from numbench.measure.zygote import FORKED_ENV

    text = os.environ.get(FORKED_ENV)
    return Forked(**json.loads(text)) if text else None


#: set in a worker forked from a zygote; None in a fresh one. Read by ``main`` from its
#: process's environment, not at import: a worker's zygote imports this module
FORKED: Forked | None = None


def die_with_supervisor() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed run or job)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    expected = os.environ.get(SUPERVISOR_ENV)
    if FORKED is None and expected and os.getppid() != int(expected):
        os._exit(1)  # the supervisor died before the request took effect


def error_status(exc: BaseException) -> tuple[str, str]:
    """(status, error) of an exception: ``failed`` with its message, said as out of memory
    when it is a MemoryError."""
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError):
        return "failed", f"out of memory: {message}"
    return "failed", message


def _write_json(obj: dict, path: str) -> None:
    """Write the report whole or not at all. It goes to the supervisor's private temporary
    folder, never to results/, so its mode does not matter; ``numbench.contract.replacing``
    is not used here because it would load pyarrow into the measured process."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def _own_peak_mb() -> float:
    """This process's peak resident memory, in MB: ``VmHWM`` where there is ``/proc``,
    else ``ru_maxrss`` (KiB on Linux, bytes on macOS)."""
    from numbench.measure.zygote import rss_mb

    peak_mb = rss_mb("self", "VmHWM")
    if peak_mb is not None:
        return peak_mb
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024.0


def _peak_rss_mb() -> float:
    """The process's peak resident memory, in MB. A forked worker's own peak counts only
    the pages it touched (the zygote's import mapped the rest, and a page is counted in a
    child once touched): its peak is the zygote's resident memory after the import plus
    what the worker grew past its state at the fork, what a fresh process that imported
    the library and then ran the cell would hold at its peak.

    The peak is this process's own high-water mark (``VmHWM``): ``ru_maxrss`` keeps the
    peak of the process that started it across the exec, so a worker its supervisor
    started would report the supervisor's peak where that is the larger."""
    own = _own_peak_mb()
    if FORKED is None or FORKED.import_rss_mb is None or FORKED.start_rss_mb is None:
        return own
    return max(own, FORKED.import_rss_mb + own - FORKED.start_rss_mb)


def import_library(spec: CellSpec):
    """(the cell's library adapter, the report begun): the library imported first, in a fresh
    interpreter, so that ``import_s`` is the whole import (NumPy included) as a user's
    script would pay it. A library that is missing here gives an ``unavailable`` report.

    A worker forked from a zygote finds the library's modules imported already: its
    ``import_s`` is the zygote's import and its own rest of it (the device asked for, the
    settings made), what a user's script pays all the same, and ``import_paid_s`` the part
    this process paid (the zygote's import too for its first worker, which waited for it)."""
    from numbench.libraries import Unavailable, get

    adapter = get(spec.adapter_name)(spec.device, spec.dtype, spec.threads)
    cache = None
    if adapter.caches_compiles and os.environ.get(compile_cache.FOLDER_ENV):
        cache = compile_cache.open_folder(os.environ[compile_cache.FOLDER_ENV])
        if cache is not None:
            adapter.compile_folder = os.environ[compile_cache.FOLDER_ENV]
    t0 = time.perf_counter()
    try:
        adapter.load()
    except Unavailable as exc:
        return adapter, ProcessReport(status="unavailable", error=str(exc))
    except ImportError as exc:
        return adapter, ProcessReport(
            status="unavailable", error=f"{adapter.module} cannot be imported: {exc}"
        )
    own = time.perf_counter() - t0
    if FORKED is None:
        out = ProcessReport(status="failed", import_s=own, import_paid_s=own)
    else:
        shared = FORKED.import_s
        out = ProcessReport(
            status="failed",
            import_s=shared + own,
            import_paid_s=own + (shared if FORKED.first else 0.0),
        )
    out.compile_cache = cache
    return adapter, out


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
    from numbench import inputs_file, operations
    from numbench.errors import CorruptFile

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


def measure(spec: CellSpec, turns=None) -> ProcessReport:
    """Measure the cell in this process, pinned to the cell's threads; the report says how
    many CPUs it could run on (``cpus_allowed``), read once pinned, before the library's
    import (an OpenMP runtime may bind this thread to one CPU of them)."""
    from numbench.libraries import pin_cpus
    from numbench.libraries.base import affinity_count

    pin_cpus(spec.threads)
    cpus = affinity_count()
    out = _measure_pinned(spec, turns)
    out.cpus_allowed = cpus
    note = cpus_note(cpus, spec.threads)
    if note:
        out.threads_note = "; ".join(n for n in (out.threads_note, note) if n)
    return out


def _measure_pinned(spec: CellSpec, turns=None) -> ProcessReport:
    """Measure the cell in this process. ``turns``: take the samples in turns with a
    partner process (a lockstep round, ``numbench.measure.lockstep``); everything else runs as alone,
    while the partner waits. Each step below returns early with the report as it stands
    where the cell cannot go on (its status and error already said)."""
    adapter, out = import_library(spec)
    if out.status == "unavailable":
        return out
    op = load_operation(spec, adapter, out)
    if op is None:
        return out
    describe_library(spec, adapter, out)
    loaded = load_inputs(spec, op, out)
    if loaded is None:
        return out
    inputs, reference, params = loaded

    fn = kernel(spec, adapter, op, params, out)
    if fn is None:
        return out
    args = placed_copies(adapter, inputs, spec.dtype)
    adapter.reset_device_peak()
    digests = input_digests(adapter, args)
    sampled = _sample(spec, adapter, op, fn, inputs, args, turns, out)
    if sampled is None:
        return out
    timer, m = sampled
    changed = inputs_changed(adapter, op, args, digests)
    if changed:
        out.error = changed
        return out

    _report_latency(spec, adapter, op, m, reference, out)
    if out.compile_cache is not None:
        out.compile_cache = compile_cache.label(adapter.cache_seen())
    # The second mode and the transfers add figures; a failure in either (a device out of
    # memory with the window, say) leaves them null with a note and keeps the latency.
    notes = []
    worst_result = m.result
    if adapter.asynchronous:
        pipelined, note = _sample_pipelined(spec, adapter, timer, m.loops, reference, out)
        notes += [note] if note else []
        if pipelined is not None and out.pipelined_rel_error > out.rel_error:
            worst_result = pipelined
    if not adapter.host_memory:
        note = _measure_transfers(adapter, inputs, timer, out)
        notes += [note] if note else []
    _judge(spec, adapter, worst_result, reference, out)
    if notes:
        out.error = "; ".join(([out.error] if out.error else []) + notes)
    return out


def _sample(spec: CellSpec, adapter, op, fn, inputs: list, args: tuple, turns, out):
    """(the timer, its measurement) of the per-call latency: the first call timed alone,
    calibration, then the samples (``numbench.timing.Timer.measure``), with the share of the
    CPUs something else took meanwhile. None where the library's code raised: the report
    is ``failed`` with its message (said as out of memory where it is)."""
    from numbench.measure.cpu_taken import CpuTaken
    from numbench.timing import Timer

    try:
        timer = Timer(
            fn,
            args,
            adapter.sync,
            device_timer=adapter.device_timer(),
            fresh_args=fresh_inputs(adapter, op, inputs, args),
        )
        taken = CpuTaken()
        if turns is not None:
            turns.cpu_taken = taken
        m = timer.measure(spec.timing, turns=turns)
        out.cpu_taken = taken.share()
    except Exception as exc:  # noqa: BLE001 - the library's own error is the message
        traceback.print_exc()
        out.status, out.error = error_status(exc)
        return None
    return timer, m


def _report_latency(spec: CellSpec, adapter, op, m, reference, out: ProcessReport) -> None:
    """The latency's figures in the report, its result checked against the reference, and
    the memory as the per-call measurement used it: the pipelined window and the transfer
    repeats after it hold more, and CuPy's pool and XLA's peak never shrink. The result's
    bytes are recorded as the analysis reads them (``output_bytes``: fresh memory a call
    writes), so the analysis never loads the operation again to count them."""
    from numbench.timing import result_nbytes

    out.output_bytes = result_nbytes(m.result)
    out.device_peak_mb = adapter.device_peak_mb()
    out.peak_rss_mb = _peak_rss_mb()
    tolerance = op.tolerance_for(adapter.family, spec.dtype)
    rel_error, out.error = check_output(adapter, m.result, reference, "", spec.dtype, tolerance)
    out.first_call_s = m.first_call_s
    out.sampling_s = m.sampling_s
    out.loops = m.loops
    out.samples_s = m.samples_s
    out.rel_error = rel_error
    out.tolerance = tolerance
    out.dispatch = "asynchronous" if adapter.asynchronous else "synchronous"


def _sample_pipelined(spec: CellSpec, adapter, timer, loops: int, reference, out):
    """(the pipelined loop's last result, None) with its figures and its check in the report,
    for an asynchronous library (calls queued back to back, one sync per sample); or (None,
    a note) where it could not be measured, its figures left null."""
    try:
        pipelined = timer.measure_pipelined(spec.timing, loops_from=loops)
    except Exception as exc:  # noqa: BLE001 - said in the cell's error, figures null
        traceback.print_exc()
        return None, f"pipelined loop not measured: {error_status(exc)[1]}"
    out.pipelined_sampling_s = pipelined.sampling_s
    out.pipelined_loops = pipelined.loops
    out.pipelined_samples_s = pipelined.samples_s
    out.pipelined_window = pipelined.window
    out.pipelined_rel_error, error = check_output(
        adapter, pipelined.result, reference, "the pipelined loop's ", spec.dtype, out.tolerance
    )
    out.error = out.error or error
    return pipelined.result, None


def _measure_transfers(adapter, inputs: list, timer, out: ProcessReport) -> str | None:
    """The transfers' figures in the report, for a library whose arrays live off the host
    (inputs placed on the device, a result read back); or a note where they could not be
    measured, their figures left null."""
    try:
        # a fresh, computed result for each read-back: JAX caches an array's host copy
        moved = measure_transfers(adapter, inputs, lambda: timer.first_call()[1])
    except Exception as exc:  # noqa: BLE001 - said in the cell's error, figures null
        traceback.print_exc()
        return f"transfers not measured: {error_status(exc)[1]}"
    out.h2d_s, out.d2h_s = moved.h2d_s, moved.d2h_s
    out.h2d_bytes, out.d2h_bytes = moved.h2d_bytes, moved.d2h_bytes
    return None


def _judge(spec: CellSpec, adapter, worst_result, reference, out: ProcessReport) -> None:
    """The status from the worse of the two modes' errors: ``ok`` within the dtype's
    tolerance, else ``mismatch``, saying which loop missed and by how much, with where the
    worse result departs from the reference written to the cell's log."""
    worst = max(out.rel_error, out.pipelined_rel_error or 0.0)
    if worst <= out.tolerance:
        out.status = "ok"
        return
    out.status = "mismatch"
    if out.error is None:
        which = "the pipelined loop's " if worst > out.rel_error else ""
        out.error = (
            f"{which}relative error {worst:.3g} exceeds the {spec.dtype} "
            f"tolerance {out.tolerance:g}"
        )
    log_mismatch(adapter, worst_result, reference, out.error)


# -- moving data between the host and the device, timed apart from the samples ------------
#: timed placements and read-backs per process; the median of each is recorded
TRANSFER_REPEATS = 5


@dataclass(frozen=True)
class Transfers:
    h2d_s: float
    d2h_s: float
    h2d_bytes: int
    d2h_bytes: int


def measure_transfers(
    adapter: Any,
    inputs: Sequence[Any],
    fresh_result: Callable[[], Any],
    repeats: int = TRANSFER_REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> Transfers:
    """Time placing ``inputs`` (host arrays) on the adapter's device and reading a result
    back, ``repeats`` times each; medians.

    The inputs are converted to the cell's dtype first, outside the timing (the inputs file
    is float64), so a placement times the copy to the device. ``fresh_result()`` makes a new,
    computed result on the device for each read-back, outside the timing: a JAX array keeps
    its host copy once made, so reading one array back twice would time a cache."""
    import numpy as np

    from numbench.timing import result_nbytes

    host = [np.ascontiguousarray(a, dtype=adapter.dtype) for a in inputs]
    h2d, d2h = [], []
    for _ in range(repeats):
        t0 = clock()
        placed = [adapter.to_device(a) for a in host]
        h2d.append(clock() - t0)
        del placed
    back = None
    for _ in range(repeats):
        result = fresh_result()
        t0 = clock()
        back = adapter.to_numpy(result)
        d2h.append(clock() - t0)
        del result
    return Transfers(
        h2d_s=statistics.median(h2d),
        d2h_s=statistics.median(d2h),
        h2d_bytes=sum(int(a.nbytes) for a in host),
        d2h_bytes=result_nbytes(back),
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m numbench.measure.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
    global FORKED
    FORKED = forked_from_environment()
    die_with_supervisor()
    try:
        with open(spec_path, encoding="utf-8") as fh:
            spec = CellSpec.from_json(fh.read())
    except (OSError, ValueError, TypeError) as exc:
        print(f"worker: cannot read its spec {spec_path}: {exc}", file=sys.stderr)
        return MACHINERY_FAULT_EXIT
    from numbench.errors import MachineryFault
    from numbench.measure.lockstep import Turns

    try:
        result = measure(spec, Turns.from_environment())
    except MachineryFault as exc:  # numbench's or the host's, not the library's
        print(f"worker: {exc}", file=sys.stderr)
        return MACHINERY_FAULT_EXIT
    except Exception as exc:  # noqa: BLE001 - reported as the cell's status
        traceback.print_exc()
        status, error = error_status(exc)
        result = ProcessReport(status=status, error=error)
    if result.peak_rss_mb is None:
        result.peak_rss_mb = _peak_rss_mb()
    try:
        _write_json(result.to_dict(), result_path)
    except OSError as exc:
        print(f"worker: cannot write its report {result_path}: {exc}", file=sys.stderr)
        return MACHINERY_FAULT_EXIT
    print(
        f"worker: {spec.library}/{spec.device}/{spec.operation}/{spec.size}: "
        f"{result.status}" + (f" ({result.error})" if result.error else "")
    )
    return 0


def leave(status: int) -> None:
    """Exit with ``status`` once everything is written, without the interpreter's teardown.

    In that teardown TensorFlow and PyTorch spend a third to most of a second per cell
    (atexit handlers, thread pools, module finalisers) that nobody waits for, and a native
    library's teardown once aborted a finished process (SIGABRT, "terminate called without
    an active exception") after its result was printed. The streams are flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def forked(argv: list[str]) -> None:
    """Run the worker in a process its zygote forked, and exit with its status."""
    leave(main(argv))


if __name__ == "__main__":
    leave(main())
