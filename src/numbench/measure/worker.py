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
import traceback

from numbench.measure.worker_checks import (
    check_output,
    cpus_note,
    fresh_inputs,
    input_digests,
    inputs_changed,
    log_mismatch,
    placed_copies,
)
from numbench.measure.worker_setup import (
    describe_library,
    import_library,
    kernel,
    load_inputs,
    load_operation,
)
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
    from numbench.measure import transfers

    try:
        # a fresh, computed result for each read-back: JAX caches an array's host copy
        moved = transfers.measure(adapter, inputs, lambda: timer.first_call()[1])
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
