"""Roofs that stay true: a cell past a roof whose cost model is exact (matmul's flops) marks
the roof as measured low, never the cost model; a roof measured more than once is the best of
its measurements, with their spread; an operation without a flop count (sort) is placed by its
bytes and left off the charts, which say so; and the chart gives each operation its own mark
and keeps its roofs' labels apart (constructed tables: no roof is measured here)."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_roofline import MIB, ROOFS, placed_bench, roof_table

from numbench import operations
from numbench.contract import BENCHMARKS_SCHEMA, CELL_SCHEMA, read_cell
from numbench.contract.conclusions import findings_from_rows, findings_rows
from numbench.operations.check import declared_problems
from numbench.operations.loading import built_in
from numbench.report.drawing import HEIGHT
from numbench.roofline import analyse, report
from numbench.roofline.analyse import place, roof_sets, roofline_findings
from numbench.roofline.contract import (
    COST_MODEL_ERROR,
    PLACED_BY_BYTES,
    ROOF_MEASURED_LOW,
    WITHIN_NOISE,
)
from numbench.roofline.report import SHAPES, label_ys, left_off, roofline_charts, roofline_section

N = 2000
MATMUL_FLOPS, MATMUL_BYTES = 2.0 * N**3, 24.0 * N * N  # float64: 3 n^2 x 8 bytes


def bench_rows() -> list[dict]:
    """``placed_bench``'s cells as benchmarks rows (dicts), to be placed again."""
    table = pa.Table.from_pandas(placed_bench(), schema=BENCHMARKS_SCHEMA, preserve_index=False)
    return table.to_pylist()


def matmul_bench(gflop_per_s: float, flops_exact: bool | None) -> list[dict]:
    """``placed_bench``'s cells with a NumPy matmul at 2000 reaching ``gflop_per_s``, not yet
    placed (its roof columns come from ``place_rows``)."""
    rows = bench_rows()
    row = dict(rows[0])
    row.update(
        library="numpy", operation="matmul", size=N, median_s=MATMUL_FLOPS / gflop_per_s / 1e9,
        flops=MATMUL_FLOPS, bytes=MATMUL_BYTES, gflop_per_s=gflop_per_s, flops_exact=flops_exact,
        gb_per_s=MATMUL_BYTES * gflop_per_s / MATMUL_FLOPS, params="", output_bytes=None,
    )  # fmt: skip
    rows.append(row)
    return rows


def placed(rows, roofs: pd.DataFrame) -> pd.DataFrame:
    rows = analyse.place_rows(rows, roofs.to_dict("records"))
    return pa.Table.from_pylist(rows, schema=BENCHMARKS_SCHEMA).to_pandas()


def with_compute(roofs: pd.DataFrame, *values: float) -> pd.DataFrame:
    """``roofs`` with its compute roof measured as ``values`` (one row each)."""
    compute = roofs[roofs["roof"] == "compute"].iloc[0]
    others = roofs[roofs["roof"] != "compute"]
    rows = [compute.to_dict() | {"value": v} for v in values]
    return pd.concat([others, pd.DataFrame(rows)], ignore_index=True)


def matmul_finding(bench: pd.DataFrame, roofs: pd.DataFrame):
    return next(f for f in roofline_findings(bench, roofs) if f.operation == "matmul")


def section(bench: pd.DataFrame, roofs: pd.DataFrame) -> str:
    return "\n".join(roofline_section(bench, roofs, "charts", roofline_findings(bench, roofs)))


def test_the_matmul_operations_declare_an_exact_flop_count_and_sort_none():
    assert operations.get("matmul").flops_exact and operations.get("batched_matmul").flops_exact
    assert not operations.get("fft").flops_exact  # 2.5 n log2 n is an estimate
    sort = operations.get("sort")
    assert sort.flops is None and sort.bytes_moved is not None
    assert sort.cost(1000, 8) == (None, 16000.0)


def test_a_cell_past_the_compute_roof_with_exact_flops_found_the_roof_low():
    got = place(MATMUL_FLOPS, MATMUL_BYTES, 150.0, ROOFS, flops_exact=True)
    assert got["roof"] == "compute" and got["roof_fraction"] == pytest.approx(1.5)
    assert got["roof_note"] == ROOF_MEASURED_LOW
    # the same cell where the count is an estimate: the model may be wrong
    assert place(MATMUL_FLOPS, MATMUL_BYTES, 150.0, ROOFS)["roof_note"] == COST_MODEL_ERROR
    # within noise is noise, exact or not
    assert place(MATMUL_FLOPS, MATMUL_BYTES, 105.0, ROOFS, True)["roof_note"] == WITHIN_NOISE
    # past a bandwidth roof the fewest bytes are the model's own count: it can be wrong
    flops, nbytes = 9e8, 1.6e9  # 1.6 GB, no cache helps, 1.5x past the DRAM roof
    got = place(flops, nbytes, flops / (nbytes / 60e9) / 1e9, ROOFS, flops_exact=True)
    assert got["roof"] == "dram" and got["roof_note"] == COST_MODEL_ERROR


def test_a_roof_planted_low_is_reported_as_measured_low_never_as_a_cost_model_error():
    """The done-when test: the compute roof planted at 40 GFLOP/s (the machine does 100), a
    NumPy matmul at 2000 reaching 45.2 (113%): the roof is measured low, in the benchmarks
    table, the findings and the summary; nowhere a cost-model error."""
    roofs = with_compute(roof_table(), 40.0)
    bench = placed(matmul_bench(45.2, flops_exact=True), roofs)
    cell = bench[bench["operation"] == "matmul"].iloc[0]
    assert cell["roof"] == "compute" and cell["roof_fraction"] == pytest.approx(1.13)
    assert cell["roof_note"] == ROOF_MEASURED_LOW
    finding = matmul_finding(bench, roofs)
    assert finding.roof_note == ROOF_MEASURED_LOW and finding.roof_spread is None
    text = section(bench, roofs)
    matmul_line = next(line for line in text.splitlines() if line.startswith("| matmul"))
    assert "roof measured low" in matmul_line and "measured once" in matmul_line
    assert COST_MODEL_ERROR not in matmul_line
    assert COST_MODEL_ERROR not in set(bench["roof_note"].dropna())


def test_with_an_exact_roof_a_wrong_cost_model_is_still_a_cost_model_error():
    """The roof right (100 GFLOP/s), the flop count an estimate that counts twice the work
    done: the cell reaches 150 GFLOP/s by its count, and the cost model is blamed."""
    roofs = roof_table()
    bench = placed(matmul_bench(150.0, flops_exact=False), roofs)
    assert matmul_finding(bench, roofs).roof_note == COST_MODEL_ERROR
    matmul_line = next(line for line in section(bench, roofs).splitlines() if "| matmul" in line)
    assert COST_MODEL_ERROR in matmul_line and ROOF_MEASURED_LOW not in matmul_line
    # a cell from before contract 7 (flops_exact null) is judged as an estimate's
    bench = placed(matmul_bench(150.0, flops_exact=None), roofs)
    assert matmul_finding(bench, roofs).roof_note == COST_MODEL_ERROR


def test_a_roof_measured_more_than_once_is_the_best_with_its_spread():
    """Compute measured at 40 (a disturbed start) and 100 (the end): the cell is held against
    100, the finding and the roofs table carry the spread (2.5x)."""
    roofs = with_compute(roof_table(), 40.0, 100.0)
    sets = roof_sets(roofs.to_dict("records"))
    mine = sets[("testhost", "cpu", "float64", 1)]
    assert mine.compute_gflop_per_s == 100.0 and mine.spread == {"compute": pytest.approx(2.5)}
    bench = placed(matmul_bench(120.0, flops_exact=True), roofs)
    finding = matmul_finding(bench, roofs)
    assert finding.roof_fraction == pytest.approx(1.2) and finding.roof_spread == 2.5
    text = section(bench, roofs)
    assert "100 (JAX), 2 measurements spread 2.50x" in text
    # where the table says when in the run each was measured, the table says it too
    timed = roofs.assign(round=None)
    timed.loc[timed["roof"] == "compute", "round"] = ["start", "end"]
    text = section(bench, timed)
    assert "100 (JAX), 2 measurements spread 2.50x (start 40, end 100)" in text
    matmul_line = next(line for line in text.splitlines() if line.startswith("| matmul"))
    assert "roof measured low" in matmul_line and "spread 2.50x" in matmul_line


def test_an_operation_without_a_flop_count_is_placed_by_its_bytes():
    """A sort of 1.6 GB (no cache holds it) at 20 GB/s: half the DRAM roof, no intensity, no
    GFLOP/s, and no claim of what bounds it."""
    got = place(None, 1.6e9, None, ROOFS, gb_per_s=20.0)
    assert got["roof"] == "dram" and got["roof_fraction"] == pytest.approx(0.5)
    assert got["arithmetic_intensity"] is None and got["attainable_gflop_per_s"] is None
    assert got["roof_note"] == PLACED_BY_BYTES
    # its working set in the L3: held against the L3 roof, and says both
    got = place(None, 16 * MIB, None, ROOFS, gb_per_s=60.0)
    assert got["roof"] == "l3" and got["roof_fraction"] == pytest.approx(0.5)
    assert got["roof_note"] == f"{PLACED_BY_BYTES}, cache-resident"
    # without a rate or without bytes it has no place
    assert set(place(None, 1.6e9, None, ROOFS).values()) == {None}
    assert set(place(None, None, None, ROOFS, gb_per_s=20.0).values()) == {None}


def sort_without_flops() -> pd.DataFrame:
    """``placed_bench`` with its sort cells as a sort is now measured: no flops."""
    rows = bench_rows()
    for row in rows:
        if row["operation"] == "sort" and row["status"] == "ok":
            row.update(flops=None, gflop_per_s=None, gb_per_s=row["bytes"] / row["median_s"] / 1e9)
    return placed(rows, roof_table())


def test_sort_is_never_held_against_the_compute_roof_nor_called_bound_by_arithmetic():
    bench, roofs = sort_without_flops(), roof_table()
    sort = bench[(bench["operation"] == "sort") & (bench["status"] == "ok")]
    assert (sort["roof"] != "compute").all() and sort["arithmetic_intensity"].isna().all()
    assert sort["roof_note"].str.startswith(PLACED_BY_BYTES).all()
    finding = next(f for f in roofline_findings(bench, roofs) if f.operation == "sort")
    assert finding.bound is None and finding.gflop_per_s is None and finding.gb_per_s > 0
    line = next(line for line in section(bench, roofs).splitlines() if line.startswith("| sort"))
    assert "not known (no flop count)" in line and "GB/s" in line and "arithmetic" not in line


def test_the_chart_leaves_an_operation_without_flops_off_and_says_so():
    bench, roofs = sort_without_flops(), roof_table()
    key = ("testhost", "cpu", "float64", 1)
    assert left_off(bench, key) == ["sort"]
    spec = roofline_charts(bench, roofs)["roofline_cpu_float64_t1"].to_dict()
    assert any("left off: sort" in line for line in spec["title"]["subtitle"])
    drawn = {
        row["operation"]
        for data in spec["datasets"].values()
        for row in data
        if "operation" in row and row.get("gflop_per_s") is not None
    }
    assert "sort" not in drawn and "fft" in drawn


def test_every_operation_gets_its_own_mark_up_to_the_shapes_there_are():
    """Vega's default shapes repeat after eight: with batched_matmul first and sort ninth
    they shared a circle. Nine operations here, each its own shape."""
    rows = bench_rows()
    base = next(r for r in rows if r["operation"] == "poly")
    names = [f"op{i}" for i in range(8)] + ["sort"]
    rows = [dict(base, operation=name, library="numpy") for name in names]
    bench = placed(rows, roof_table())
    spec = roofline_charts(bench, roof_table())["roofline_cpu_float64_t1"].to_dict()
    shapes = [
        layer["encoding"]["shape"]["scale"] for layer in spec["layer"] if "shape" in layer.get(
            "encoding", {})
    ]  # fmt: skip
    assert shapes and shapes[0]["domain"] == sorted(names)
    assert len(set(shapes[0]["range"])) == 9 and len(SHAPES) == len(set(SHAPES)) >= 9


def test_the_roofs_labels_are_kept_apart():
    """L2 at 250 and L3 at 240 GB/s: their labels at the left edge would print over each
    other; they are moved apart by at least the label gap, the highest left where it was."""
    lo, hi = 0.1, 1000.0
    ys = label_ys([25.0, 24.0, 4.0], lo, hi)
    gap = (hi / lo) ** (report.LABEL_GAP_PX / HEIGHT)
    assert ys[0] == 25.0 and ys[2] == 4.0
    assert math.log(ys[0] / ys[1]) >= math.log(gap) - 1e-12
    assert label_ys([4.0, 25.0], lo, hi) == [4.0, 25.0]  # already apart: left alone
    # in the chart: the label rows of a roof set whose L2 and L3 are close
    roofs = roof_table()
    roofs.loc[roofs["roof"] == "l3", "value"] = 240.0
    spec = roofline_charts(placed_bench(), roofs)["roofline_cpu_float64_t1"].to_dict()
    labels = next(
        d for d in spec["datasets"].values()
        if len(d) == 3 and "roof" in d[0] and "text" not in d[0]
    )  # fmt: skip
    heights = sorted((row["y"] for row in labels), reverse=True)
    domain = next(
        layer["encoding"]["y"]["scale"]["domain"]
        for layer in spec["layer"]
        if "y" in layer.get("encoding", {}) and "scale" in layer["encoding"]["y"]
    )
    step = (domain[1] / domain[0]) ** (report.LABEL_GAP_PX / HEIGHT)
    assert all(a / b >= step * (1 - 1e-9) for a, b in zip(heights, heights[1:], strict=False))


def test_the_findings_table_keeps_the_spread_and_a_finding_placed_by_bytes():
    bench = placed(matmul_bench(120.0, True), with_compute(roof_table(), 40.0, 100.0))
    found = roofline_findings(bench, with_compute(roof_table(), 40.0, 100.0))
    by_bytes = dataclasses.replace(found[0], gflop_per_s=None, gb_per_s=12.5)
    rows = findings_rows(dataclasses.replace(_empty_findings(), roofline=(*found, by_bytes)))
    back = findings_from_rows(rows).roofline
    assert back == (*found, by_bytes)
    assert any(f.roof_spread == 2.5 for f in back)


def _empty_findings():
    from numbench.contract.facts import Findings

    return Findings("numpy", "cpu", 1.1, False, None, (), (), (), (), ())


def test_an_operation_declaring_exact_flops_wrongly_is_refused():
    def problems(name: str, **changes) -> list[str]:
        found = built_in(name)
        found = dataclasses.replace(
            found, operation=dataclasses.replace(found.operation, **changes)
        )
        return [str(p) for p in declared_problems(found)]

    assert problems("matmul") == []
    assert any("flops_exact" in p and "no flops" in p for p in problems("sort", flops_exact=True))
    assert any("flops_exact" in p and "'yes'" in p for p in problems("matmul", flops_exact="yes"))


def test_a_cell_file_from_before_flops_exact_reads_with_none(tmp_path):
    row = {"library": "numpy", "device": "cpu", "operation": "matmul", "size": 10, "status": "ok"}
    old = pa.Table.from_pylist([row], schema=CELL_SCHEMA).drop_columns(["flops_exact"])
    pq.write_table(old, tmp_path / "old.parquet")
    assert read_cell(tmp_path / "old.parquet").column("flops_exact").to_pylist() == [None]


def test_the_supervisor_records_whether_the_flop_count_is_exact(tmp_path):
    from conftest import make_spec

    from numbench.measure.supervisor import host_metadata

    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    spec = make_spec("numpy", "cpu", "matmul", 64, str(tmp_path / "x.npz"), timing)
    assert host_metadata(spec).flops_exact is True
    spec = make_spec("numpy", "cpu", "fft", 64, str(tmp_path / "x.npz"), timing)
    assert host_metadata(spec).flops_exact is False
    meta = host_metadata(make_spec("numpy", "cpu", "sort", 64, str(tmp_path / "x.npz"), timing))
    assert meta.flops is None and meta.flops_exact is None and meta.bytes == 64 * 16
