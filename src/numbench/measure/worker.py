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
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

from numbench.spec import MACHINERY_FAULT_EXIT, SUPERVISOR_ENV, CellSpec, ProcessReport


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
    if expected and os.getppid() != int(expected):
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


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


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
    while the partner waits."""
    from numbench.libraries import Unavailable, get
    from numbench.libraries.slowed import slowed_if_asked

    adapter = slowed_if_asked(get(spec.library)(spec.device, spec.dtype, spec.threads))

    # Import the library first, in a fresh interpreter, so import_s is the whole import
    # (NumPy included) as a user's script would pay it.
    t0 = time.perf_counter()
    try:
        adapter.load()
    except Unavailable as exc:
        return ProcessReport(status="unavailable", error=str(exc))
    except ImportError as exc:
        return ProcessReport(
            status="unavailable", error=f"{adapter.module} cannot be imported: {exc}"
        )
    out = ProcessReport(status="failed", import_s=time.perf_counter() - t0)

    from numbench import operations
    from numbench.errors import MachineryFault

    try:
        op = operations.load(spec.operation, spec.operation_file, spec.operation_hash).operation
    except operations.OperationChanged as exc:  # not the library's outcome: the job fails
        raise MachineryFault(str(exc)) from None
    except operations.OperationError as exc:  # the user's file does not import here
        out.error = str(exc)
        return out
    reason = op.unsupported_reason(adapter.family)
    if reason is not None:
        out.status, out.error = "unsupported", reason
        return out
    out.library_version = adapter.version()
    out.device_name = adapter.device_name()
    details = adapter.device_details()
    out.device_details = json.dumps(details) if details else ""
    out.blas = adapter.blas()
    out.threads_used, out.threads_note = threads_seen(adapter, spec.threads)

    from numbench.errors import CorruptFile
    from numbench.measure import inputs as inputs_file
    from numbench.measure.cpu_taken import CpuTaken
    from numbench.timing import Timer

    params = op.resolve_params(spec.params)
    try:
        inputs, reference, inputs_params, inputs_code = inputs_file.load(
            spec.inputs, op.input_names
        )
    except CorruptFile as exc:
        out.error = str(exc)
        return out
    if inputs_params != operations.params_json(params):
        out.error = (
            f"the inputs file was made with parameters {inputs_params or '{}'} but the "
            f"cell asks for {operations.params_json(params) or '{}'}; remake the inputs"
        )
        return out
    if inputs_code != spec.operation_hash:
        out.error = (
            f"the inputs file was made by other code of {spec.operation} (hash "
            f"{inputs_code[:12] or 'not recorded'}, the cell's is {spec.operation_hash[:12]}); "
            "remake the inputs"
        )
        return out

    args = tuple(adapter.to_device(a) for a in inputs)
    fn = adapter.compile(op.build(adapter.family, adapter.xp, spec.dtype, params))
    adapter.reset_device_peak()
    digests = input_digests(adapter, args)

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
        return out
    changed = inputs_changed(adapter, op, args, digests)
    if changed:
        out.error = changed
        return out

    # Memory as the per-call measurement used it: the pipelined window and the transfer
    # repeats below hold more, and CuPy's pool and XLA's peak never shrink.
    out.device_peak_mb = adapter.device_peak_mb()
    out.peak_rss_mb = _peak_rss_mb()
    tolerance = op.tolerance_for(adapter.family, spec.dtype)
    rel_error, out.error = check_output(adapter, m.result, reference, "", spec.dtype)
    worst_result = m.result
    out.first_call_s = m.first_call_s
    out.sampling_s = m.sampling_s
    out.loops = m.loops
    out.samples_s = m.samples_s
    out.rel_error = rel_error
    out.tolerance = tolerance
    out.dispatch = "asynchronous" if adapter.asynchronous else "synchronous"

    # The second mode and the transfers add figures; a failure in either (a device out of
    # memory with the window, say) leaves them null with a note and keeps the latency.
    notes = []
    if adapter.asynchronous:
        try:
            pipelined = timer.measure_pipelined(spec.timing, loops_from=m.loops)
        except Exception as exc:  # noqa: BLE001 - said in the cell's error, figures null
            traceback.print_exc()
            notes.append(f"pipelined loop not measured: {error_status(exc)[1]}")
        else:
            out.pipelined_sampling_s = pipelined.sampling_s
            out.pipelined_loops = pipelined.loops
            out.pipelined_samples_s = pipelined.samples_s
            out.pipelined_window = pipelined.window
            out.pipelined_rel_error, error = check_output(
                adapter, pipelined.result, reference, "the pipelined loop's ", spec.dtype
            )
            out.error = out.error or error
            if out.pipelined_rel_error > rel_error:
                worst_result = pipelined.result
    if not adapter.host_memory:
        from numbench.measure import transfers

        try:
            # a fresh, computed result for each read-back: JAX caches an array's host copy
            moved = transfers.measure(adapter, inputs, lambda: timer.first_call()[1])
        except Exception as exc:  # noqa: BLE001 - said in the cell's error, figures null
            traceback.print_exc()
            notes.append(f"transfers not measured: {error_status(exc)[1]}")
        else:
            out.h2d_s, out.d2h_s = moved.h2d_s, moved.d2h_s
            out.h2d_bytes, out.d2h_bytes = moved.h2d_bytes, moved.d2h_bytes

    worst = max(rel_error, out.pipelined_rel_error or 0.0)
    if worst <= tolerance:
        out.status = "ok"
    else:
        out.status = "mismatch"
        if out.error is None:
            which = "the pipelined loop's " if worst > rel_error else ""
            out.error = (
                f"{which}relative error {worst:.3g} exceeds the {spec.dtype} "
                f"tolerance {tolerance:g}"
            )
        log_mismatch(adapter, worst_result, reference, out.error)
    if notes:
        out.error = "; ".join(([out.error] if out.error else []) + notes)
    return out


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


def fresh_inputs(adapter, op, inputs: list, args: tuple):
    """For an operation that declares inputs its implementations write into
    (``Operation.mutates_inputs``): a function making one call's arguments, with a fresh
    device copy of each of those made from the untouched host arrays; else None. The
    timer makes them before each sample's calls, outside the timed region."""
    if not op.mutates_inputs:
        return None
    import numpy as np

    mutated = [name in op.mutates_inputs for name in op.input_names]

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


def check_output(adapter, result, reference, which: str, dtype: str) -> tuple[float, str | None]:
    """(relative error of ``result`` against the reference, error text or None). An output
    of another count or shape than the reference's, or of another dtype than the cell's,
    has an infinite error: the cell is a ``mismatch`` saying why."""
    from numbench import operations
    from numbench.operations.base import dtype_problem

    host = adapter.to_numpy(result)
    try:
        error = operations.relative_error(host, reference)
    except ValueError as exc:
        return float("inf"), f"{which}output does not match the reference: {exc}"
    wrong = dtype_problem(host, reference, dtype)
    if wrong:
        return float("inf"), f"{which}output does not match the reference: {wrong}"
    return error, None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m numbench.measure.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
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


if __name__ == "__main__":
    leave(main())
