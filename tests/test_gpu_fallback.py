"""GPU cells on a host without a GPU: each is 'unavailable' with the library's reason, the
workflow exits 0, and the summary's notice says no GPU was found.

Every test here runs on the CPU. The GPU code paths that can run without a GPU are run
through stand-ins: Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), a fake ``cupy`` module
and fake CUDA events.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pandas as pd
import pytest
from conftest import make_spec, snakemake

from numbench import inputs_file as inputs
from numbench import libraries, operations
from numbench.analyse.findings import gpu_notice
from numbench.libraries import Unavailable
from numbench.measure.process import run_worker
from numbench.report import sections
from numbench.timing import EventTimer, Timer, TimingSettings

GPU_LIBRARIES = ("jax", "torch", "tensorflow", "numba", "cupy")
TINY_TIMING = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
# No GPU, whatever the host has: the tests mean "a host where no GPU is visible".
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "NUMBA_ENABLE_CUDASIM": "0"}


def no_gpu_notice(bench) -> str | None:
    """The summary's no-GPU paragraph for these cells: decided by analyse, worded by report."""
    return sections.no_gpu_notice(gpu_notice(bench))


def gpu_gaps_notice(bench) -> str | None:
    return sections.gpu_gaps_notice(gpu_notice(bench))


# -- the workflow end to end -----------------------------------------------------------------
@pytest.mark.e2e
def test_device_gpu_without_a_gpu_exits_0_and_says_so(workdir):
    proc = snakemake(
        workdir,
        "--cores",
        "1",
        "--config",
        "device=gpu",
        "--configfile",
        "tests/gpu_fallback.yaml",
        timeout=900,
        env=NO_GPU_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    df = pd.read_parquet(workdir / "results" / "benchmarks.parquet")

    gpu = df[df["device"] == "gpu"]
    assert set(gpu["library"]) == set(GPU_LIBRARIES)
    assert len(gpu) == len(GPU_LIBRARIES)  # one operation at one size
    assert (gpu["status"] == "unavailable").all(), gpu[["library", "status", "error"]]
    assert gpu["error"].str.len().gt(0).all()
    reasons = dict(zip(gpu["library"], gpu["error"], strict=False))
    assert "no CUDA device visible to torch" in reasons["torch"]
    assert "no CUDA device visible to jax" in reasons["jax"]
    assert "no GPU visible to tensorflow" in reasons["tensorflow"]
    assert "numba.cuda" in reasons["numba"]
    assert "cupy" in reasons["cupy"]

    cpu = df[df["device"] == "cpu"]
    assert set(cpu["library"]) == {"numpy"}  # only the baseline runs on the CPU
    assert (cpu["status"] == "ok").all(), cpu[["library", "operation", "status", "error"]]
    assert len(cpu) == 1

    notice = no_gpu_notice(df)
    assert notice is not None
    assert "No GPU was found" in notice
    assert f"All {len(GPU_LIBRARIES)} GPU cells" in notice
    for lib in GPU_LIBRARIES:
        assert f"**{lib}**: 1 cell, elementwise (1000)" in notice
    assert (workdir / "results" / "summary.md").exists()

    # the GPU's roofs: every one unavailable, with the reason; the CPU's (the baseline's) measured
    roofs = pd.read_parquet(workdir / "results" / "roofs.parquet")
    gpu_roofs = roofs[roofs["device"] == "gpu"]
    assert set(gpu_roofs["roof"]) == {"dram", "h2d", "d2h", "compute"}
    assert (gpu_roofs["status"] == "unavailable").all(), gpu_roofs[["roof", "status", "error"]]
    assert gpu_roofs["value"].isna().all() and gpu_roofs["error"].str.contains("torch").all()
    cpu_roofs = roofs[(roofs["device"] == "cpu") & (roofs["status"] == "ok")]
    assert {"dram", "compute"} <= set(cpu_roofs["roof"])
    # only NumPy has CPU cells, so only its GEMM is timed for the CPU's compute roof
    (cpu_compute,) = cpu_roofs.loc[cpu_roofs["roof"] == "compute", "candidates"]
    assert sorted(json.loads(cpu_compute)) == ["numpy"]
    assert df.loc[df["device"] == "gpu", "roof"].isna().all()


# -- the adapters' unavailable paths, in the worker as a cell runs them -----------------------
@pytest.fixture(scope="module")
def elementwise_inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "elementwise-100.npz"
    inputs.write("elementwise", 100, 1, path)
    return str(path)


def _run_gpu_cell(library: str, inputs_path: str, operation: str = "elementwise") -> dict:
    spec = make_spec(library, "gpu", operation, 100, inputs_path, TINY_TIMING)
    return run_worker(spec)


@pytest.mark.parametrize("library", ["cupy", "numba", "torch", "jax"])
def test_gpu_cell_without_a_gpu_is_unavailable_with_the_reason(
    library, elementwise_inputs, monkeypatch
):
    for key, value in NO_GPU_ENV.items():
        monkeypatch.setenv(key, value)
    report = run_worker(
        make_spec(library, "gpu", "elementwise", 100, elementwise_inputs, TINY_TIMING)
    )
    assert report.status == "unavailable", report
    expected = {
        "cupy": "cupy cannot be imported",
        "numba": "no CUDA device visible to numba.cuda",
        "torch": "no CUDA device visible to torch",
        "jax": "no CUDA device visible to jax",
    }[library]
    assert expected in report.error
    assert f"(device=gpu asked for {library})" in report.error


def test_cupy_missing_is_unavailable_in_process(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    adapter = libraries.get("cupy")("gpu", "float64", 1)
    with pytest.raises(Unavailable, match="cupy cannot be imported"):
        adapter.load()


def test_cupy_is_gpu_only():
    assert libraries.get("cupy").devices == ("gpu",)
    with pytest.raises(Unavailable, match="CUDA GPUs only"):
        libraries.get("cupy")("cpu", "float64", 1).load()


def test_cupy_without_a_device_is_unavailable(monkeypatch):
    def no_device():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_device))
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(Unavailable, match="no CUDA device visible to cupy: cudaErrorNoDevice"):
        libraries.get("cupy")("gpu", "float64", 1).load()


def test_numba_gpu_family_and_cpu_path_unchanged():
    assert libraries.get("numba")("gpu", "float64", 1).family == "numba-cuda"
    assert libraries.get("numba")("cpu", "float64", 1).family == "numba"
    assert libraries.get("numba")("cpu", "float64", 1).device_timer() is None


# -- GPU code paths through stand-ins ---------------------------------------------------------
def test_numba_gpu_cell_runs_in_the_cuda_simulator(elementwise_inputs, monkeypatch):
    """The numba-cuda kernel, placement, sync and read-back, on the CPU via the simulator."""
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    report = _run_gpu_cell("numba", elementwise_inputs)
    assert report.status == "ok", report
    assert report.rel_error == 0.0
    assert "simulator" in report.device_name
    assert json.loads(report.device_details)["simulator"] == "NUMBA_ENABLE_CUDASIM=1"


def test_numba_gpu_poly_kernel_runs_in_the_cuda_simulator(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    path = tmp_path / "poly-100.npz"
    inputs.write("poly", 100, 1, path)
    report = _run_gpu_cell("numba", str(path), operation="poly")
    assert report.status == "ok", report
    assert report.rel_error <= report.tolerance


def test_numba_gpu_unsupported_operation_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    path = tmp_path / "fft-64.npz"
    inputs.write("fft", 64, 1, path)
    report = run_worker(make_spec("numba", "gpu", "fft", 64, path, TINY_TIMING))
    assert report.status == "unsupported"
    assert "numba.cuda has no FFT" in report.error


def test_every_operation_has_a_cupy_and_numba_cuda_answer():
    for op in operations.OPERATIONS.values():
        for family in ("cupy", "numba-cuda"):
            reason = op.unsupported.get(family)
            assert family in op.implementations or reason, (op.name, family)
    assert "cupy" in operations.get("grad").approximate


def test_cupy_grad_builder_matches_the_numpy_finite_differences():
    grad = operations.get("grad")
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal(64), rng.standard_normal(64)
    # numpy stands in for cupy: the builder only uses the array-module API
    via_xp = grad.implementations["cupy"](np, "float64")(w.copy(), x)
    via_numpy = grad.implementations["numpy"](np, "float64")(w.copy(), x)
    np.testing.assert_array_equal(via_xp, via_numpy)


class _FakeEvent:
    """A CUDA event on a fake device clock that advances 1 ms per recorded event."""

    clock = [0.0]

    def record(self):
        _FakeEvent.clock[0] += 1.0
        self.t_ms = _FakeEvent.clock[0]

    def synchronize(self):
        self.synced = True


def test_timer_with_events_syncs_every_call_and_reads_the_events():
    calls, syncs = [], []
    timer = EventTimer(_FakeEvent, lambda s, e: e.t_ms - s.t_ms)
    t = Timer(lambda a: calls.append(a) or a, (1,), syncs.append, device_timer=timer)
    assert t.time_loops(7) == pytest.approx(1e-3)  # one fake millisecond between the events
    assert len(calls) == 7 and len(syncs) == 7


def test_timer_host_path_is_unchanged_without_events():
    ticks = iter(range(100))
    t = Timer(lambda: None, (), None, clock=lambda: float(next(ticks)))
    assert t.device_timer is None
    assert t.time_loops(3) == 1.0  # one tick around the bare loop
    m = Timer(lambda: 1, ()).measure(
        TimingSettings(min_sample_time_s=1e-4, min_samples=5, max_samples=5, budget_s=2.0)
    )
    assert m.result == 1 and len(m.samples_s) >= 5


class _FakePool:
    def __init__(self):
        self.held = 123e6

    def free_all_blocks(self):
        self.held = 0.0

    def total_bytes(self):
        return self.held


def _fake_cupy():
    pool = _FakePool()

    class Device:
        def __init__(self, index=0):
            pass

        def use(self):
            pass

        def synchronize(self):
            pass

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda i: {
            "name": b"Fake GPU",
            "major": 9,
            "minor": 0,
            "totalGlobalMem": 80e9,
        },
        runtimeGetVersion=lambda: 12040,
        driverGetVersion=lambda: 12080,
    )
    cuda = types.SimpleNamespace(
        Device=Device,
        Event=_FakeEvent,
        get_elapsed_time=lambda s, e: e.t_ms - s.t_ms,
        runtime=runtime,
    )
    return types.SimpleNamespace(
        __version__="0.fake",
        cuda=cuda,
        asarray=np.asarray,
        asnumpy=np.asarray,
        get_default_memory_pool=lambda: pool,
        add=np.add,
        multiply=np.multiply,
        sin=np.sin,
    )


def test_cupy_adapter_gpu_path_with_a_fake_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    adapter = libraries.get("cupy")("gpu", "float32", 1)
    adapter.load()
    a = adapter.to_device(np.arange(4.0))
    assert a.dtype == np.float32
    assert adapter.device_name() == "Fake GPU"
    details = adapter.device_details()
    assert details["cuda_runtime_version"] == "12.4"
    assert details["compute_capability"] == "9.0"
    assert "cuda_driver_version" in details
    adapter.reset_device_peak()
    assert adapter.device_peak_mb() == 0.0
    fn = adapter.compile(
        operations.get("elementwise").implementations["cupy"](adapter.xp, "float32")
    )
    timer = Timer(fn, (a, a), adapter.sync, device_timer=adapter.device_timer())
    assert timer.time_loops(3) == pytest.approx(1e-3)
    out = adapter.to_numpy(fn(a, a))
    np.testing.assert_allclose(out[0], 2 * np.arange(4.0))


# -- the notice ---------------------------------------------------------------------------------
def _rows(*cells):
    return pd.DataFrame(
        [
            {
                "library": lib,
                "device": dev,
                "operation": op,
                "size": size,
                "status": status,
                "error": error,
                "host": "node1",
            }
            for lib, dev, op, size, status, error in cells
        ]
    )


def test_no_gpu_notice_groups_skipped_cells_by_library_and_reason():
    df = _rows(
        ("numpy", "cpu", "matmul", 64, "ok", None),
        (
            "torch",
            "gpu",
            "matmul",
            64,
            "unavailable",
            "no CUDA device visible to torch: CPU-only build (device=gpu asked for torch)",
        ),
        (
            "torch",
            "gpu",
            "matmul",
            128,
            "unavailable",
            "no CUDA device visible to torch: CPU-only build (device=gpu asked for torch)",
        ),
        (
            "torch",
            "gpu",
            "sort",
            10,
            "unavailable",
            "no CUDA device visible to torch: CPU-only build (device=gpu asked for torch)",
        ),
        (
            "cupy",
            "gpu",
            "sort",
            10,
            "unavailable",
            "cupy cannot be imported: No module named 'cupy'",
        ),
    )
    notice = no_gpu_notice(df)
    assert notice.startswith("**No GPU was found on this host (node1).**")
    assert "All 4 GPU cells" in notice
    assert "The 1 CPU cell ran as usual." in notice
    assert (
        "- **torch**: 3 cells, matmul (64, 128), sort (10): "
        "no CUDA device visible to torch: CPU-only build"
    ) in notice
    assert "- **cupy**: 1 cell, sort (10): cupy cannot be imported" in notice
    assert "(device=gpu asked for" not in notice
    assert "envs/requirements-cuda.txt" in notice
    assert gpu_gaps_notice(df) is None


def test_no_gpu_notice_counts_one_cell_in_the_singular():
    """'The 1 CPU cell ran', 'The 1 GPU cell ... was skipped'; several in the plural."""
    from numbench.contract.facts import GpuNotice, SkippedGpuCells

    def notice(gpu_cells: int, cpu_cells: int, baseline: str | None) -> str:
        skipped = (SkippedGpuCells("torch", "no CUDA", gpu_cells, (("fft", (10,)),)),)
        made = GpuNotice(True, gpu_cells, skipped, gpu_cells, ("node1",), cpu_cells, baseline)
        return sections.no_gpu_notice(made)

    one = notice(1, 1, "numpy")
    assert "The 1 GPU cell asked for (`device=gpu`) was skipped" in one
    assert "The 1 CPU cell (the NumPy baseline) ran as usual." in one
    assert "cells" not in one.split("Skipped, by library")[0]
    several = notice(2, 3, "numpy")
    assert "All 2 GPU cells asked for (`device=gpu`) were skipped" in several
    assert "The 3 CPU cells (the NumPy baseline included) ran as usual." in several
    assert "The 2 CPU cells ran as usual." in notice(2, 2, None)
    assert "CPU cell" not in notice(2, 0, None)


def test_no_gpu_notice_is_silent_when_no_gpu_was_asked_or_one_ran():
    cpu_only = _rows(("numpy", "cpu", "sort", 10, "ok", None))
    assert no_gpu_notice(cpu_only) is None
    some_ran = _rows(
        ("torch", "gpu", "sort", 10, "ok", None),
        ("cupy", "gpu", "sort", 10, "unavailable", "cupy cannot be imported: x"),
    )
    assert no_gpu_notice(some_ran) is None
    gaps = gpu_gaps_notice(some_ran)
    assert gaps.startswith("**1 GPU cell was unavailable**")
    assert "- **cupy**: 1 cell, sort (10): cupy cannot be imported: x" in gaps


def test_no_gpu_notice_accepts_an_arrow_table_and_shortens_long_reasons():
    import pyarrow as pa

    df = _rows(("numba", "gpu", "sort", 10, "unavailable", "driver " * 200))
    notice = no_gpu_notice(pa.Table.from_pandas(df))
    line = next(s for s in notice.splitlines() if s.startswith("- **numba**"))
    assert line.endswith("…") and len(line) < 320
