"""Each cell on its host's roofline: the roof it is held against, its share of it, and the
labels of a cell past its roof (synthetic roofs and timings); the chart and the summary's
section; aggregate placing the cells from a roofs file."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest
from conftest import constructed_results

from numbench.contract import BENCHMARKS_SCHEMA, write_atomic
from numbench.roofline import analyse
from numbench.roofline.analyse import (
    CACHE_RESIDENT,
    COST_MODEL_ERROR,
    NO_ROOFS,
    WITHIN_NOISE,
    RoofSet,
    place,
    roofline_findings,
)
from numbench.roofline.contract import ROOFS_SCHEMA, read_roofs
from numbench.roofline.report import roofline_chart_names, roofline_charts, roofline_section

MIB = 2**20
#: this machine's shape: 1 MiB of L2, 32 MiB of L3, 250 / 120 / 40 GB/s, 100 GFLOP/s
ROOFS = RoofSet(
    bandwidth_gb_per_s={"l2": 250.0, "l3": 120.0, "dram": 40.0},
    compute_gflop_per_s=100.0,
    cache_bytes={"l2": MIB, "l3": 32 * MIB},
)


def poly(n: int, seconds: float) -> tuple[float, float, float]:
    """(flops, bytes, GFLOP/s) of poly at n (9 flops, 16 bytes per element) in ``seconds``."""
    return 9.0 * n, 16.0 * n, 9.0 * n / seconds / 1e9


def test_a_memory_bound_cell_beyond_the_caches_is_held_against_dram():
    flops, nbytes, gflops = poly(10**7, 0.008)  # 160 MB in 8 ms: 20 GB/s
    got = place(flops, nbytes, gflops, ROOFS)
    assert got["arithmetic_intensity"] == pytest.approx(9 / 16)
    assert got["roof"] == "dram"
    assert got["attainable_gflop_per_s"] == pytest.approx(9 / 16 * 40.0)
    assert got["roof_fraction"] == pytest.approx(0.5)
    assert got["roof_note"] is None


def test_a_cell_whose_working_set_fits_a_cache_is_held_against_that_cache_and_says_so():
    flops, nbytes, gflops = poly(10**6, 16e6 / 60e9)  # 16 MB (in the L3) at 60 GB/s
    got = place(flops, nbytes, gflops, ROOFS)
    assert got["roof"] == "l3" and got["roof_note"] == CACHE_RESIDENT
    assert got["roof_fraction"] == pytest.approx(0.5)
    # elementwise at 1e4 (3 flops, 40 bytes an element): 400 KB, in the L2
    got = place(3e4, 4e5, 3e4 / (4e5 / 100e9) / 1e9, ROOFS)
    assert got["roof"] == "l2" and got["roof_fraction"] == pytest.approx(100 / 250)
    # poly there would need more than the compute roof: arithmetic bounds it
    flops, nbytes, gflops = poly(10**4, 160e3 / 100e9)
    assert place(flops, nbytes, gflops, ROOFS)["roof"] == "compute"


def test_a_cell_past_the_dram_roof_with_a_working_set_near_the_l3_is_cache_resident():
    """64 MB is twice the L3, but within 4x of it: a repeated call finds part of it there. At
    70 GB/s it is past the DRAM roof (40): it is held against the L3 roof instead."""
    flops, nbytes, gflops = poly(4 * 10**6, 64e6 / 70e9)
    got = place(flops, nbytes, gflops, ROOFS)
    assert got["roof"] == "l3" and got["roof_note"] == CACHE_RESIDENT
    assert got["roof_fraction"] == pytest.approx(70 / 120)


def test_a_cell_past_its_roof_is_within_noise_or_a_cost_model_error():
    flops, nbytes, gflops = poly(10**8, 1.6e9 / 42e9)  # 1.6 GB: no cache helps; 5% past
    got = place(flops, nbytes, gflops, ROOFS)
    assert got["roof"] == "dram" and got["roof_note"] == WITHIN_NOISE
    assert got["roof_fraction"] == pytest.approx(1.05)
    flops, nbytes, gflops = poly(10**8, 1.6e9 / 60e9)  # 1.5x past: the cost model is wrong
    got = place(flops, nbytes, gflops, ROOFS)
    assert got["roof_note"] == COST_MODEL_ERROR and got["roof_fraction"] == pytest.approx(1.5)
    # compute-bound: a matmul counted at 2 n^3 flops that reaches 1.5x the compute roof
    n = 2000
    got = place(2.0 * n**3, 24.0 * n * n, 150.0, ROOFS)
    assert got["roof"] == "compute" and got["roof_note"] == COST_MODEL_ERROR
    got = place(2.0 * n**3, 24.0 * n * n, 60.0, ROOFS)
    assert got["roof"] == "compute" and got["roof_note"] is None
    assert got["roof_fraction"] == pytest.approx(0.6)


def test_a_cell_without_a_cost_model_or_roofs_has_nulls():
    assert set(place(None, 100.0, 1.0, ROOFS).values()) == {None}
    assert set(place(0.0, 100.0, 1.0, ROOFS).values()) == {None}
    got = place(10.0, 100.0, 1.0, None)
    assert got["arithmetic_intensity"] == pytest.approx(0.1)
    assert got["roof"] is None and got["roof_note"] == NO_ROOFS


def test_a_missing_l3_roof_falls_back_to_dram():
    no_l3 = RoofSet({"l2": 250.0, "dram": 40.0}, 100.0, {"l2": MIB, "l3": 2 * MIB})
    flops, nbytes, gflops = poly(10**5, 1.6e6 / 20e9)
    assert place(flops, nbytes, gflops, no_l3)["roof"] == "dram"


def roof_table(host="testhost", dtype="float64", threads=1) -> pd.DataFrame:
    rows = []
    for roof, value, unit in (
        ("l2", 250.0, "GB/s"),
        ("l3", 120.0, "GB/s"),
        ("dram", 40.0, "GB/s"),
        ("compute", 100.0, "GFLOP/s"),
    ):
        rows.append(
            {
                "host": host,
                "device": "cpu",
                "dtype": dtype,
                "threads": threads,
                "roof": roof,
                "status": "ok",
                "value": value,
                "unit": unit,
                "library": "numba" if unit == "GB/s" else "jax",
                "l2_bytes": MIB,
                "l3_bytes": 32 * MIB,
                "first_touch_s_per_gb": 0.3 if roof == "dram" else None,
                "first_touch_faults_per_mib": 256.0 if roof == "dram" else None,
                "theoretical_value": 120.0 if roof == "compute" else None,
            }
        )
    return pa.Table.from_pylist(rows, schema=ROOFS_SCHEMA).to_pandas()


def placed_bench() -> pd.DataFrame:
    """Constructed results (fft and sort, 1e3 to 1e5) with two poly cells at 1e7 added, the
    fastest at 12% of the DRAM roof, all placed on ``roof_table``'s roofs."""
    bench, _, _ = constructed_results()
    rows = pa.Table.from_pandas(bench, schema=BENCHMARKS_SCHEMA, preserve_index=False).to_pylist()
    for library, seconds in (("numba", 0.033), ("numpy", 0.05)):
        row = dict(rows[0])
        flops, nbytes, gflops = poly(10**7, seconds)
        row.update(
            library=library,
            operation="poly",
            size=10**7,
            median_s=seconds,
            flops=flops,
            bytes=nbytes,
            gflop_per_s=gflops,
            params="",
            output_bytes=8 * 10**7,  # what the worker records: 10^7 float64 values
        )
        rows.append(row)
    rows = analyse.place_rows(rows, roof_table().to_dict("records"))
    return pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA).to_pandas()


def test_the_fastest_library_at_the_largest_size_gets_its_share_and_first_touch():
    findings = {f.operation: f for f in roofline_findings(placed_bench(), roof_table())}
    assert set(findings) == {"fft", "sort", "poly"}
    poly_finding = findings["poly"]
    assert poly_finding.library == "numba" and poly_finding.size == 10**7
    assert poly_finding.bound == "memory" and poly_finding.roof == "dram"
    assert poly_finding.roof_fraction == pytest.approx(160e6 / 0.033 / 1e9 / 40.0)
    touch = poly_finding.first_touch
    # 80 MB of fresh output at 0.3 s per GB: 24 ms of the 33 ms call; the other 9 ms would
    # reach 160 MB / 9 ms = 17.8 GB/s... of 40: 44%
    assert touch.output_bytes == pytest.approx(80e6)
    assert touch.seconds == pytest.approx(0.024)
    assert touch.share_of_time == pytest.approx(24 / 33)
    assert touch.fraction_without == pytest.approx(160e6 / 0.009 / 1e9 / 40.0)
    # fft and sort have no fresh output this large: no estimate
    assert findings["fft"].first_touch is None and findings["sort"].first_touch is None


def test_the_first_touch_estimate_reads_the_output_bytes_the_worker_recorded():
    """No operation is looked up: one of the user's own, unknown here, keeps its estimate;
    a cell from before ``output_bytes`` (null) has none, and is not guessed."""
    bench = placed_bench()
    poly = bench["operation"] == "poly"
    bench.loc[poly, "operation"] = "my_stencil"
    findings = {f.operation: f for f in roofline_findings(bench, roof_table())}
    assert findings["my_stencil"].first_touch.output_bytes == pytest.approx(80e6)
    bench.loc[poly, "output_bytes"] = None
    findings = {f.operation: f for f in roofline_findings(bench, roof_table())}
    assert findings["my_stencil"].first_touch is None


def test_the_worker_records_the_bytes_of_its_output(tmp_path):
    from conftest import make_spec

    from numbench import inputs_file as inputs
    from numbench import operations
    from numbench.measure.process import run_worker

    path = tmp_path / "poly-1000.npz"
    inputs.write("poly", 1000, 1, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    report = run_worker(make_spec("numpy", "cpu", "poly", 1000, str(path), timing))
    assert report.status == "ok", report.error
    assert report.output_bytes == operations.get("poly").output_elements(1000) * 8


def test_a_cell_file_from_before_output_bytes_reads_with_none(tmp_path):
    import pyarrow.parquet as pq

    from numbench.contract import CELL_SCHEMA, read_cell

    row = {"library": "numpy", "device": "cpu", "operation": "poly", "size": 10, "status": "ok"}
    old = pa.Table.from_pylist([row], schema=CELL_SCHEMA).drop_columns(["output_bytes"])
    pq.write_table(old, tmp_path / "old.parquet")
    table = read_cell(tmp_path / "old.parquet")
    assert table.schema.equals(CELL_SCHEMA) and table.column("output_bytes").to_pylist() == [None]


def test_the_summary_has_a_roofline_section_with_the_roofs_and_the_shares():
    bench, roofs = placed_bench(), roof_table()
    text = "\n".join(roofline_section(bench, roofs, "charts", roofline_findings(bench, roofs)))
    assert "## Roofline" in text
    assert "| testhost | cpu | float64 | 1 | 250 | 120 | 40 | 100 (JAX) | 120 |" in text
    assert "[roofline_cpu_float64_t1](charts/roofline_cpu_float64_t1.html)" in text
    poly_line = next(line for line in text.splitlines() if line.startswith("| poly"))
    assert "Numba" in poly_line and "DRAM" in poly_line and "memory" in poly_line
    assert "fresh memory on every call" in text and "256 page faults per MiB" in text
    assert roofline_section(bench, None, "charts") == []


def test_the_roofline_chart_draws_roofs_ridges_and_cells_past_their_roof_open():
    bench, roofs = placed_bench(), roof_table()
    bench.loc[bench["operation"] == "sort", "roof_fraction"] = 1.5  # past its roof
    names = roofline_chart_names(bench, roofs)
    assert names == {("testhost", "cpu", "float64", 1): "roofline_cpu_float64_t1"}
    charts = roofline_charts(bench, roofs)
    spec = charts["roofline_cpu_float64_t1"].to_dict()
    marks = [
        layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        for layer in spec["layer"]
    ]
    assert marks[0] == "line" and "text" in marks
    points = [layer for layer in spec["layer"] if layer["mark"].get("type") == "point"]
    filled = [layer["mark"].get("filled") for layer in points]
    assert filled.count(False) == 1  # the open layer: cells past their roof
    datasets = spec["datasets"].values()
    ridges = [d for d in datasets if d and "text" in d[0] and str(d[0]["text"]).startswith("ridge")]
    assert sorted(round(r["x"], 3) for r in ridges[0]) == [0.4, 0.833, 2.5]
    assert "encoding" in json.dumps(spec)
    # two hosts: a chart each, told apart by the host's rank
    two = pd.concat([roofs, roof_table(host="otherhost")])
    assert sorted(roofline_chart_names(bench, two).values()) == [
        "roofline_cpu_float64_t1_h1",
        "roofline_cpu_float64_t1_h2",
    ]


def test_aggregate_places_every_cell_from_the_roofs_file(tmp_path):
    from numbench.analyse.aggregate import aggregate
    from numbench.contract import CELL_SCHEMA

    roofs_path = tmp_path / "roofs.parquet"
    write_atomic(
        pa.Table.from_pandas(roof_table(), schema=ROOFS_SCHEMA, preserve_index=False), roofs_path
    )
    cell = {name: None for name in CELL_SCHEMA.names}
    cell.update(
        library="numba", device="cpu", operation="poly", size=10**7, dtype="float64",
        role="measured", replicate=0, mode="latency", sample=0, loops=1, seconds=0.008,
        status="ok", host="testhost", threads=1, flops=9e7, bytes=1.6e8, gflop_per_s=9e7 / 0.008 / 1e9,
    )  # fmt: skip
    cell_path = tmp_path / "cell.parquet"
    write_atomic(pa.Table.from_pylist([cell], schema=CELL_SCHEMA), cell_path)
    row = aggregate([cell_path], tmp_path / "b.parquet", roofs=roofs_path).to_pylist()[0]
    assert row["roof"] == "dram" and row["roof_fraction"] == pytest.approx(0.5)
    row = aggregate([cell_path], tmp_path / "b.parquet").to_pylist()[0]
    assert row["roof"] is None and row["roof_fraction"] is None


def test_an_unreadable_roofs_file_is_named_with_the_command_that_remakes_it(tmp_path):
    from numbench.errors import CorruptFile

    bad = tmp_path / "roofs.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(CorruptFile, match="roofs file .*roofs.parquet.*--forcerun"):
        read_roofs(bad)


def test_a_float32_gpu_cell_past_the_vector_peak_is_not_put_down_to_tf32():
    """Every adapter turns TF32 off in its cells (JAX's and TensorFlow's default on an Ampere or
    later GPU), as the roofs' GEMM does: a float32 cell past the vector peak is judged as a
    float64 one is, not excused by tensor cores it did not use."""
    roofs = [
        {"host": "h", "device": "gpu", "dtype": d, "threads": 1, "roof": r, "status": "ok",
         "value": v, "l2_bytes": None, "l3_bytes": None}
        for d in ("float32", "float64")
        for r, v in (("dram", 3000.0), ("compute", 50_000.0))
    ]  # fmt: skip
    n = 8192
    cell = {"status": "ok", "host": "h", "device": "gpu", "threads": 1, "flops": 2.0 * n**3,
            "bytes": 12.0 * n * n, "gflop_per_s": 200_000.0}  # fmt: skip
    f32, f64 = analyse.place_rows(
        [{**cell, "dtype": "float32"}, {**cell, "dtype": "float64"}], roofs
    )
    assert f32["roof"] == "compute" and f32["roof_note"] == COST_MODEL_ERROR
    assert f64["roof_note"] == COST_MODEL_ERROR
