"""Pipelined throughput beside per-call latency, and transfers to the device.

Constructed asynchronous calls whose dispatch is cheap and whose work is slow must show
throughput beating latency by the expected factor; synchronous calls must show one figure.
JAX on the CPU records both; transfers run through Numba's CUDA simulator (a device that is
not the host's memory, on the CPU) and are null on the CPU.
"""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import weakref

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import MARGIN, constructed_results, make_spec

from numbench import inputs_file as inputs
from numbench.analyse.aggregate import cell_row, end_to_end_s, pipelined_row, sample_rows
from numbench.analyse.findings import pipeline_facts, pipeline_gaps
from numbench.contract.facts import Findings
from numbench.measure import worker
from numbench.measure.process import run_worker
from numbench.report.sections import (
    gap_sentence,
    pipeline_sections,
    pipeline_table,
    transfer_table,
)
from numbench.report.sections import pipeline_findings as findings_lines
from numbench.spec import CellMeta, ProcessReport
from numbench.timing import Timer, TimingSettings, pipeline_window, result_nbytes

TINY = TimingSettings(min_sample_time_s=0.005, min_samples=3, max_samples=5, budget_s=0.02)
#: on the constructed clock: samples of half a second, so a loop holds hundreds of calls
LONG = TimingSettings(min_sample_time_s=0.5, min_samples=3, max_samples=5, budget_s=0.02)


# -- a device on a constructed clock -----------------------------------------------------------
class FakeDevice:
    """Calls cost ``dispatch`` seconds of the caller's time and ``work`` seconds of the
    device's, which runs them one after another; a sync waits until the result is done. On
    this clock a waited-for call takes dispatch + work, and queued calls max(dispatch, work)."""

    def __init__(self, dispatch: float, work: float, asynchronous: bool = True):
        self.now, self.busy_until = 0.0, 0.0
        self.dispatch, self.work, self.asynchronous = dispatch, work, asynchronous
        self.syncs = 0

    def clock(self) -> float:
        return self.now

    def call(self):
        self.now += self.dispatch
        start = max(self.now, self.busy_until)
        self.busy_until = start + self.work
        done = self.busy_until
        if not self.asynchronous:
            self.now = done  # the call returns when its work is done
        return {"done": done}

    def sync(self, result) -> None:
        self.syncs += 1
        results = result if isinstance(result, list) else [result]
        self.now = max([self.now] + [r["done"] for r in results if r is not None])


@pytest.mark.parametrize(
    ("dispatch", "work", "factor"),
    [(1e-4, 1e-3, 1.1), (1e-3, 1e-3, 2.0), (1e-3, 1e-4, 1.1), (2e-4, 6e-4, 8 / 6)],
)
def test_queued_calls_take_max_of_dispatch_and_work(dispatch, work, factor):
    dev = FakeDevice(dispatch, work)
    timer = Timer(dev.call, (), dev.sync, clock=dev.clock)
    latency = timer.measure(LONG)
    pipelined = timer.measure_pipelined(LONG, loops_from=latency.loops)
    assert np.median(latency.samples_s) == pytest.approx(dispatch + work)
    # one sync per sample: the queue's first call and its last wait are not hidden, so the
    # time per call tends to max(dispatch, work) as the loop grows
    per_call = np.median(pipelined.samples_s)
    loops = pipelined.loops
    expected = (max(dispatch, work) * (loops - 1) + dispatch + work) / loops
    assert per_call == pytest.approx(expected)
    assert np.median(latency.samples_s) / per_call == pytest.approx(factor, rel=0.05)


def test_synchronous_calls_give_the_same_figure_both_ways():
    dev = FakeDevice(1e-3, 1e-3, asynchronous=False)
    timer = Timer(dev.call, (), dev.sync, clock=dev.clock)
    latency = timer.measure(TINY)
    pipelined = timer.measure_pipelined(TINY, loops_from=latency.loops)
    assert np.median(pipelined.samples_s) == pytest.approx(np.median(latency.samples_s))


def test_pipelined_loop_on_device_events_times_the_whole_queue():
    """With CUDA events (torch, CuPy, Numba on a GPU) the pipelined region is timed by a
    pair of events around the loop and its one sync, as the per-call loop is."""
    from numbench.timing import EventTimer

    dev = FakeDevice(1e-3, 1e-3)

    class Event:
        def record(self):
            self.at = dev.busy_until if dev.busy_until > dev.now else dev.now

        def synchronize(self):
            dev.now = max(dev.now, dev.busy_until)

    events = EventTimer(Event, lambda start, end: (end.at - start.at) * 1e3)
    timer = Timer(dev.call, (), dev.sync, clock=dev.clock, device_timer=events)
    elapsed = timer.time_pipelined(100)
    # 100 calls queued: the device is busy 1 ms each, back to back after the first dispatch
    assert elapsed == pytest.approx(0.1 + 1e-3, rel=0.02)
    assert dev.syncs == 1


def test_a_pipelined_loop_needs_a_sync():
    with pytest.raises(ValueError, match="sync"):
        Timer(lambda: None, (), None).time_pipelined(3)


def test_thread_pool_futures_overlap_dispatch_and_work():
    """Real threads, a constructed clock: each call is dispatched (1 ms on the clock) to a
    worker thread whose work waits for a gate that only the sync opens. Waited for, each
    sync finds its one call still queued; pipelined, the loop dispatches every call of the
    sample before its one sync, which finds them all still queued: dispatch never waited
    for work.
    """
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    gate = threading.Event()
    clock = {"now": 0.0}
    pending_at_sync: list[int] = []

    def call():
        clock["now"] += 1e-3
        return pool.submit(gate.wait)

    def sync(result):
        futures = [f for f in (result if isinstance(result, list) else [result]) if f is not None]
        pending_at_sync.append(sum(not f.done() for f in futures))
        gate.set()
        for f in futures:
            f.result()
        gate.clear()

    settings = TimingSettings(min_sample_time_s=0.01, min_samples=3, max_samples=3, budget_s=1e-9)
    try:
        timer = Timer(call, (), sync, clock=lambda: clock["now"])
        latency = timer.measure(settings)
        del pending_at_sync[:]
        pipelined = timer.measure_pipelined(settings, loops_from=latency.loops)
    finally:
        gate.set()
        pool.shutdown()
    loops = pipelined.loops
    assert loops == latency.loops > 1  # calibrated per call: 1 ms a call on the clock
    assert pipelined.samples_s == pytest.approx([1e-3] * 3)
    # the probe call alone, then one sync per loop (calibration's, then the 3 samples'),
    # each finding every call of its loop still queued
    assert pending_at_sync[0] == 1 and pending_at_sync[1:] == [loops] * (len(pending_at_sync) - 1)
    assert len(pending_at_sync) >= 4


# -- every result alive until its sync; a bounded window -------------------------------------
class Result:
    """A result that knows whether it was waited for before it was freed."""

    freed_unsynced = 0

    def __init__(self):
        self.synced = False
        self.nbytes = 1000

    def __del__(self):
        if not self.synced:
            Result.freed_unsynced += 1


def _sync(result):
    for r in result if isinstance(result, list) else [result]:
        if r is not None:
            r.synced = True


def test_no_result_is_freed_before_it_is_waited_for():
    Result.freed_unsynced = 0
    made: list[weakref.ref] = []

    def call():
        r = Result()
        made.append(weakref.ref(r))
        return r

    timer = Timer(call, (), _sync)
    timer.time_pipelined(50)
    timer.time_pipelined(50, window=7)
    del timer
    gc.collect()
    assert len(made) == 100
    assert Result.freed_unsynced == 0


def test_window_bounds_the_results_held_alive():
    held = []

    def call():
        held.append(sum(1 for r in made if r() is not None and not r().synced))
        r = Result()
        made.append(weakref.ref(r))
        return r

    made: list[weakref.ref] = []
    syncs = []

    def device_wide_sync(result):  # like torch.cuda.synchronize: waits for everything
        syncs.append(1)
        for r in made:
            if r() is not None:
                r().synced = True

    Timer(call, (), device_wide_sync).time_pipelined(40, window=5)
    assert max(held) <= 5
    # one wait per full window and one at the end, not one per call: the queue stays full
    assert len(syncs) == 8
    assert pipeline_window(Result(), memory_bytes=5000) == 5
    assert pipeline_window(np.zeros(10), memory_bytes=8) == 1


def test_result_nbytes_of_arrays_and_tuples():
    assert result_nbytes(np.zeros(10)) == 80
    assert result_nbytes((np.zeros(2, np.float32), np.zeros(3))) == 8 + 24

    class Shaped:  # TensorFlow's tensors: a shape and a dtype with a size
        shape = (4, 5)
        dtype = type("D", (), {"size": 4})()

    assert result_nbytes(Shaped()) == 80


# -- the worker: JAX on the CPU, synchronous NumPy, the simulator's transfers -----------------
@pytest.fixture(scope="module")
def elementwise_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "elementwise-1000.npz"
    inputs.write("elementwise", 1000, 1, path)
    return str(path)


WORKER_TIMING = {"min_sample_time_s": 0.002, "min_samples": 3, "max_samples": 4, "budget_s": 0.02}


def test_jax_on_the_cpu_records_latency_and_pipelined_samples(elementwise_file):
    spec = make_spec("jax", "cpu", "elementwise", 1000, elementwise_file, WORKER_TIMING)
    report = run_worker(spec)
    assert report.status == "ok", report.error
    assert report.dispatch == "asynchronous"
    assert len(report.samples_s) >= 3 and len(report.pipelined_samples_s) >= 3
    assert report.pipelined_loops >= report.loops
    assert report.pipelined_window == report.pipelined_loops  # small results: no bound
    assert report.pipelined_rel_error <= report.tolerance
    # on the CPU nothing is moved: null, not zero
    assert report.h2d_s is None and report.d2h_s is None and report.h2d_bytes is None


def test_numpy_is_timed_once_and_says_it_is_synchronous(elementwise_file):
    spec = make_spec("numpy", "cpu", "elementwise", 1000, elementwise_file, WORKER_TIMING)
    report = run_worker(spec)
    assert report.status == "ok"
    assert report.dispatch == "synchronous"
    assert report.pipelined_samples_s == [] and report.pipelined_loops is None


def test_transfers_through_the_cuda_simulator(elementwise_file, monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    spec = make_spec("numba", "gpu", "elementwise", 1000, elementwise_file, WORKER_TIMING)
    report = run_worker(spec)
    assert report.status == "ok", report.error
    assert report.h2d_s > 0 and report.d2h_s > 0
    assert report.h2d_bytes == 2 * 1000 * 8  # a and b, float64
    assert report.d2h_bytes == 3 * 1000 * 8  # a + b, a * b and sin(a)
    assert report.pipelined_samples_s  # a kernel launch is asynchronous


def test_transfers_measure_places_and_reads_back_through_the_adapter():
    calls = {"to_device": 0, "to_numpy": 0, "fresh": 0}

    class CachedResult:  # like a JAX array: its host copy is made once, then reused
        def __init__(self):
            self.host = None

    class Adapter:
        dtype = "float32"

        def to_device(self, a):
            assert a.dtype == np.float32  # converted before the timing, not inside it
            calls["to_device"] += 1
            return a.copy()

        def to_numpy(self, r):
            calls["to_numpy"] += 1
            if r.host is None:
                r.host = np.zeros(3, np.float32)
                ticks.append(5)  # a real copy: five ticks
            return r.host

    def fresh():
        calls["fresh"] += 1
        return CachedResult()

    ticks: list[int] = []
    clock_values = iter(range(0, 10_000, 1))

    def clock():
        return next(clock_values) + sum(ticks)

    moved = worker.measure_transfers(Adapter(), [np.zeros(10), np.zeros(5)], fresh, 3, clock)
    assert calls == {"to_device": 6, "to_numpy": 3, "fresh": 3}
    assert moved.h2d_s == 1
    assert moved.d2h_s == 6  # every read-back copied: a fresh result each time
    assert moved.h2d_bytes == 15 * 4 and moved.d2h_bytes == 12


def queued_numpy(on_queued):
    """An adapter class: NumPy said to be asynchronous, whose call ``on_queued(out)`` decides
    what a call made before the previous one was waited for returns (or raises)."""
    from numbench.libraries.numpy_ import NumpyAdapter

    class Queued(NumpyAdapter):
        pending = 0

        @property
        def asynchronous(self):
            return True

        def sync(self, result):
            Queued.pending = 0
            return result

        def compile(self, fn):
            def call(*args):
                Queued.pending += 1
                out = fn(*args)
                return out if Queued.pending == 1 else on_queued(out)

            return call

    return Queued


def test_a_wrong_pipelined_result_is_a_mismatch(elementwise_file, monkeypatch, capsys):
    """A library whose queued calls go wrong (here: any call made before the previous one
    was waited for) passes the per-call check and fails the pipelined one."""
    from numbench import libraries

    def off_by_one(out):
        return tuple(o + 1.0 for o in out) if isinstance(out, tuple) else out + 1.0

    queue_breaks = queued_numpy(off_by_one)
    monkeypatch.setattr(libraries, "get", lambda name: queue_breaks)
    spec = make_spec("numpy", "cpu", "elementwise", 1000, elementwise_file, WORKER_TIMING)
    report = worker.measure(spec)
    assert report.rel_error == 0.0
    assert report.status == "mismatch"
    assert report.pipelined_rel_error > report.tolerance
    # elementwise has three outputs: the error names those that miss (here all three)
    assert report.error.startswith("the pipelined loop's output 0: relative error")
    assert report.error.endswith("exceeds the float64 tolerance 1e-12 (3 of 3 outputs)")
    # the cell's log (the worker's stderr) shows the wrong elements: every one is 1 off
    log = capsys.readouterr().err
    assert f"the result fails its check: {report.error}" in log
    assert "1000 of 1000 elements off by more than 1e-3" in log


# -- the cell file and benchmarks.parquet ----------------------------------------------------
def _table(reports):
    from numbench.contract import cell_table
    from numbench.measure.replicates import MEASURED, ProcessRun

    runs = [ProcessRun(MEASURED, i, 0.0, r) for i, r in enumerate(reports)]
    key = {"library": "jax", "device": "cpu", "operation": "matmul", "size": 100}
    key["dtype"] = "float64"
    return cell_table(key, CellMeta(status="ok", threads=1, host="h"), runs)


def test_cell_rows_tell_the_modes_apart_and_samples_parquet_keeps_latency():
    report = ProcessReport(
        status="ok",
        dispatch="asynchronous",
        loops=10,
        samples_s=[2e-3, 2.1e-3, 1.9e-3],
        pipelined_loops=20,
        pipelined_samples_s=[1e-3, 1.1e-3],
    )
    table = _table([report, report])
    modes = table.column("mode").to_pylist()
    assert modes.count("latency") == 6 and modes.count("pipelined") == 4
    loops = dict(zip(modes, table.column("loops").to_pylist(), strict=False))
    assert loops == {"latency": 10, "pipelined": 20}
    kept = sample_rows(table)
    assert kept.num_rows == 6 and set(kept.column("seconds").to_pylist()) == {
        2e-3,
        2.1e-3,
        1.9e-3,
    }
    row = cell_row(table)
    assert row["median_s"] == pytest.approx(2e-3)
    assert row["pipelined_median_s"] == pytest.approx(1.05e-3)
    assert row["pipelined_speedup"] == pytest.approx(2e-3 / 1.05e-3)
    assert row["pipelined_speedup_ci_low"] <= row["pipelined_speedup"]
    assert row["pipelined_speedup"] <= row["pipelined_speedup_ci_high"]
    assert row["pipelined_n_samples"] == 4
    assert row["end_to_end_s"] is None  # on the CPU


def test_a_synchronous_cell_repeats_its_latency_as_its_pipelined_figure():
    stats = {"median_s": 2.0, "ci_low_s": 1.9, "ci_high_s": 2.1}
    row = pipelined_row([[2.0, 2.1, 1.9]], [], stats, "synchronous")
    assert row["pipelined_median_s"] == 2.0 and row["pipelined_n_samples"] == 0
    assert row["pipelined_speedup"] == 1.0 == row["pipelined_speedup_ci_low"]
    assert all(v is None for v in pipelined_row([], [], stats, "synchronous").values())
    # a cell file from before the pipelined mode: not measured, so not claimed either way
    assert all(v is None for v in pipelined_row([[2.0]], [], stats, None).values())


def test_a_cell_file_from_before_the_pipelined_mode_still_reads(tmp_path):
    import pyarrow.parquet as pq

    from numbench.contract import LATER_COLUMNS, read_cell

    report = ProcessReport(status="ok", dispatch="asynchronous", loops=1, samples_s=[1.0, 2.0])
    old = _table([report])
    old = old.drop_columns(list(LATER_COLUMNS))
    pq.write_table(old, tmp_path / "old.parquet")
    table = read_cell(tmp_path / "old.parquet")
    assert table.column("mode").to_pylist() == ["latency", "latency"]
    row = cell_row(table)
    assert row["median_s"] == 1.5 and row["dispatch"] is None
    assert row["pipelined_median_s"] is None and row["pipelined_speedup"] is None
    # any other missing column is still a corrupt file that names it
    pq.write_table(old.drop_columns(["loops"]), tmp_path / "bad.parquet")
    with pytest.raises(Exception, match=r"lacks the columns \['loops'\]"):
        read_cell(tmp_path / "bad.parquet")


def test_end_to_end_is_transfers_plus_one_call():
    assert end_to_end_s({"h2d_s": 1.0, "d2h_s": 0.5}, 0.25) == 1.75
    assert end_to_end_s({"h2d_s": None, "d2h_s": None}, 0.25) is None


# -- the summary and the chart ---------------------------------------------------------------
def with_pipelined(gpu: str | None = None) -> pd.DataFrame:
    """The constructed results, with JAX asynchronous: queuing gains 1.8x on fft at 10^3,
    nothing elsewhere; the others synchronous."""
    bench, _, _ = constructed_results(gpu)
    bench = bench.copy()
    ok = bench["status"] == "ok"
    jax = ok & (bench["library"] == "jax")
    bench["dispatch"] = np.where(jax, "asynchronous", np.where(ok, "synchronous", None))
    gain = np.where(jax & (bench["operation"] == "fft") & (bench["size"] == 1000), 1.8, 1.0)
    bench["pipelined_median_s"] = bench["median_s"] / gain
    bench["pipelined_ci_low_s"] = bench["pipelined_median_s"] * 0.98
    bench["pipelined_ci_high_s"] = bench["pipelined_median_s"] * 1.02
    bench["pipelined_n_samples"] = np.where(jax, 25, 0)
    bench["pipelined_speedup"] = gain
    bench["pipelined_speedup_ci_low"] = gain * 0.97
    bench["pipelined_speedup_ci_high"] = gain * 1.03
    return bench


def pipeline_findings(bench: pd.DataFrame, margin: float, multi_device: bool) -> list[str]:
    """The key findings' lines on pipelining: the facts analyse decides, worded by report."""
    gaps, same, sync = pipeline_facts(bench, margin)
    findings = Findings(
        baseline_library="numpy",
        baseline_device="cpu",
        margin=margin,
        multi_device=multi_device,
        gpu_notice=None,
        fastest=(),
        speedups=(),
        slowdowns=(),
        crossovers=(),
        warnings=(),
        pipeline_gaps=gaps,
        queued_same_speed=same,
        synchronous=sync,
    )
    return findings_lines(findings)


def test_a_sentence_for_the_library_whose_throughput_differs():
    bench = with_pipelined()
    gaps = pipeline_gaps(bench, MARGIN)
    assert [(g.library, g.direction, g.cells, g.of_cells) for g in gaps] == [
        ("jax", "faster", 1, 3)
    ]
    assert gaps[0].operation == "fft" and gaps[0].size == 1000
    text = gap_sentence(gaps[0], multi_device=False)
    assert text.startswith("JAX: calls queued back to back take less time per call")
    assert "1 of 3 cells" in text and "fft at n = 10^3 (1.8×" in text
    lines = "\n".join(pipeline_findings(bench, MARGIN, multi_device=False))
    assert "NumPy, PyTorch: calls finish before they return (synchronous)" in lines
    # within the margin: no sentence of its own
    quiet = bench.assign(pipelined_speedup=1.05, pipelined_speedup_ci_low=1.02)
    assert pipeline_gaps(quiet, MARGIN) == ()
    assert "the same speed as waited-for ones" in "\n".join(pipeline_findings(quiet, MARGIN, False))


def test_pipeline_table_holds_each_asynchronous_library_at_both_ends():
    table = pipeline_table(with_pipelined())
    rows = [r for r in table.splitlines()[2:]]
    assert len(rows) == 2  # jax on fft: 10^3 and 10^5 (its sort cells are not ok)
    assert rows[0].startswith("| jax | fft | 10^3 |") and "1.8×" in rows[0]
    assert "numpy" not in table


def test_summary_sections_appear_only_with_their_data():
    plain, _, _ = constructed_results()
    assert pipeline_sections(plain) == []
    sections = "\n".join(pipeline_sections(with_pipelined()))
    assert "## Pipelined throughput" in sections and "## Transfers" not in sections


def test_transfer_table_on_a_gpu_grid():
    bench = with_pipelined("ok")
    gpu = (bench["device"] == "gpu") & (bench["status"] == "ok")
    assert gpu.sum() == 1
    bench["h2d_s"] = np.where(gpu, 3e-5, np.nan)
    bench["d2h_s"] = np.where(gpu, 1e-5, np.nan)
    bench["h2d_bytes"] = np.where(gpu, 8e5, np.nan)
    bench["d2h_bytes"] = np.where(gpu, 8e5, np.nan)
    bench["end_to_end_s"] = bench["h2d_s"] + bench["median_s"] + bench["d2h_s"]
    table = transfer_table(bench)
    row = table.splitlines()[2]
    assert row.startswith("| torch (gpu) | sort | 10^5 | 30 µs | 10 µs | 10 µs | 50 µs | 80% |")
    assert row.endswith("| 1.6 |")
    assert "## Transfers" in "\n".join(pipeline_sections(bench))
    assert transfer_table(with_pipelined()) is None


def test_pipelined_chart_has_both_modes_for_asynchronous_cells_only():
    from numbench.report.drawing import (
        LATENCY_LABEL,
        PIPELINED_LABEL,
        pipelined_chart,
        pipelined_frame,
    )

    frame = pipelined_frame(with_pipelined())
    assert set(frame["series"]) == {"jax"}
    assert set(frame["mode"]) == {LATENCY_LABEL, PIPELINED_LABEL}
    fast = frame[(frame["size"] == 1000) & (frame["operation"] == "fft")]
    by_mode = dict(zip(fast["mode"], fast["seconds"], strict=True))
    assert by_mode[LATENCY_LABEL] / by_mode[PIPELINED_LABEL] == pytest.approx(1.8)
    spec = pipelined_chart(with_pipelined()).to_dict()
    assert "facet" in spec
    plain, _, _ = constructed_results()
    assert "no asynchronous library" in str(pipelined_chart(plain).to_dict())


def test_cell_schema_has_the_mode_and_transfer_columns():
    from numbench.contract import BENCHMARKS_SCHEMA, CELL_SCHEMA

    for name in ("mode", "dispatch", "h2d_s", "d2h_s", "h2d_bytes", "d2h_bytes"):
        assert name in CELL_SCHEMA.names
    for name in ("pipelined_median_s", "pipelined_speedup", "end_to_end_s", "dispatch"):
        assert name in BENCHMARKS_SCHEMA.names
    assert CELL_SCHEMA.field("h2d_bytes").type == pa.int64()


def test_a_failing_pipelined_loop_keeps_the_latency_and_says_why(elementwise_file, monkeypatch):
    """A device out of memory in the pipelined window leaves the per-call figures: the cell
    stays ok, its pipelined figures null, and its error says what was not measured."""
    from numbench import libraries
    from numbench.measure import worker

    def no_room(out):
        raise MemoryError("no room for the queue")

    window_too_deep = queued_numpy(no_room)
    monkeypatch.setattr(libraries, "get", lambda name: window_too_deep)
    spec = make_spec("numpy", "cpu", "elementwise", 1000, elementwise_file, WORKER_TIMING)
    report = worker.measure(spec)
    assert report.status == "ok" and report.rel_error == 0.0 and report.samples_s
    assert report.pipelined_samples_s == [] and report.pipelined_rel_error is None
    assert report.error == (
        "pipelined loop not measured: out of memory: MemoryError: no room for the queue"
    )


def test_process_figures_are_reduced_over_processes_not_sample_rows():
    """sampling_s is a per-process figure repeated on each sample row: the cell's sum is
    over its processes, whatever their number of samples (it was a sum over rows)."""
    a = ProcessReport(
        status="ok",
        dispatch="asynchronous",
        sampling_s=0.5,
        pipelined_sampling_s=0.25,
        import_s=1.0,
        loops=1,
        samples_s=[1.0] * 7,
        pipelined_loops=1,
        pipelined_samples_s=[0.5] * 3,
    )
    b = ProcessReport(**{**a.to_dict(), "import_s": 3.0, "samples_s": [1.0] * 2})
    row = cell_row(_table([a, b]))
    assert row["sampling_s"] == 1.0 and row["pipelined_sampling_s"] == 0.5
    assert row["import_s"] == 2.0  # the median of the two processes
