"""The CPU's bandwidth roofs are the best triad, the copy kept beside it (``copy_value``):
the rows pick the triad over a faster copy, a roofs table from before the column still
reads, a cell between the triad and the copy streams like a copy (neither a roof measured
low nor a cost-model error). Synthetic timings and constructed tables: nothing is measured
here."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_roofline import MIB, ROOFS, poly, roof_table
from test_roofline_exact import bench_rows, placed, section
from test_roofs import timed

from numbench.contract.conclusions import findings_from_rows, findings_rows
from numbench.roofline.analyse import copy_share, place, roof_sets, roofline_findings
from numbench.roofline.contract import (
    COST_MODEL_ERROR,
    ROOF_MEASURED_LOW,
    ROOFS_SCHEMA,
    STREAMS_LIKE_COPY,
    WITHIN_NOISE,
    read_roofs,
)
from numbench.roofline.measure import rows as roof_rows

PLAN = {"l2": MIB // 2, "l3": 16 * MIB, "dram": 384 * MIB}
#: the DRAM roof's copy in ``roofs_with_copy``: 1.7x its triad (40 GB/s), as a glibc
#: memcpy that stores past the cache reached beside a write-allocating triad
COPY = 68.0
BIG = 10**8  # poly at 1e8: 1.6 GB, far beyond 4x the 32 MiB L3


def test_the_roof_is_the_fastest_triad_and_a_faster_copy_is_kept_beside_it():
    results = [
        timed("float64", "dram", "numba", "triad", PLAN["dram"] // 24, 15.0),
        timed("float64", "dram", "numpy", "triad", PLAN["dram"] // 24, 9.9),
        timed("float64", "dram", "numpy", "copy", PLAN["dram"] // 24, 24.0),
        timed("float64", "dram", "numba", "copy", PLAN["dram"] // 24, 13.5),
        timed("float64", "l2", "numpy", "copy", PLAN["l2"] // 24, 300.0),
        timed("float64", "l2", "numba", "triad", PLAN["l2"] // 24, 250.0),
    ]
    plan = {k: v for k, v in PLAN.items() if k != "l3"}
    got = roof_rows.bandwidth_rows(["float64"], {"results": results}, plan, {"l3": "none"})
    by_roof = {r["roof"]: r for r in got}
    dram = by_roof["dram"]
    assert dram["status"] == "ok" and dram["value"] == pytest.approx(15.0)
    assert dram["kernel"] == "triad (Numba, explicit loops)" and dram["library"] == "numba"
    assert dram["copy_value"] == pytest.approx(24.0)
    # the triad's own write-allocate count (4 arrays for 3), not the copy's
    assert dram["value_write_allocate"] == pytest.approx(15.0 * 4 / 3)
    # nothing measured is lost: every way of both kernels is in the candidates
    assert json.loads(dram["candidates"]) == pytest.approx(
        {"numba triad": 15.0, "numpy triad": 9.9, "numpy copy": 24.0, "numba copy": 13.5}
    )
    assert by_roof["l2"]["value"] == pytest.approx(250.0)
    assert by_roof["l2"]["copy_value"] == pytest.approx(300.0)
    assert by_roof["l3"]["status"] == "unsupported"


def test_a_level_where_only_a_copy_ran_fails_naming_what_ran():
    results = [timed("float64", "dram", "numpy", "copy", PLAN["dram"] // 24, 24.0)]
    rows = roof_rows.bandwidth_rows(["float64"], {"results": results}, PLAN, {})
    dram = next(r for r in rows if r["roof"] == "dram")
    assert dram["status"] == "failed" and "value" not in dram
    assert dram["error"] == "no triad was timed (only ['numpy copy'])"
    assert json.loads(dram["candidates"]) == {"numpy copy": 24.0}


def test_a_roofs_table_from_before_copy_value_reads_with_it_null(tmp_path):
    """An older table (no ``copy_value``, no ``round``), whose DRAM roof was a copy: it reads,
    the copy is unknown, and a cell past its roof is judged as before (no copy to explain
    it)."""
    path = tmp_path / "old.parquet"
    now = pa.Table.from_pandas(roof_table(), schema=ROOFS_SCHEMA, preserve_index=False)
    pq.write_table(now.drop_columns(["copy_value", "round"]), path)
    table = read_roofs(path)
    assert table.column_names == ROOFS_SCHEMA.names
    assert table.column("copy_value").null_count == table.num_rows
    sets = roof_sets(table.to_pylist())
    mine = sets[("testhost", "cpu", "float64", 1)]
    assert mine.copy_gb_per_s == {} and mine.bandwidth_gb_per_s["dram"] == 40.0
    flops, nbytes, gflops = poly(BIG, 0.02)  # 2x the DRAM triad roof
    assert place(flops, nbytes, gflops, mine)["roof_note"] == COST_MODEL_ERROR


def roofs_with_copy(*copies: float) -> pd.DataFrame:
    """``roof_table`` with its DRAM roof's copy measured as ``copies`` (one DRAM row each,
    the triad 40 GB/s in each: rounds)."""
    table = roof_table()
    dram = table[table["roof"] == "dram"].iloc[0]
    others = table[table["roof"] != "dram"]
    rows = [dram.to_dict() | {"copy_value": c} for c in copies]
    return pd.concat([others, pd.DataFrame(rows)], ignore_index=True)


def test_a_roof_set_keeps_the_best_copy_of_its_rounds():
    sets = roof_sets(roofs_with_copy(50.0, COPY).to_dict("records"))
    mine = sets[("testhost", "cpu", "float64", 1)]
    assert mine.copy_gb_per_s == {"dram": COPY}
    assert mine.bandwidth_gb_per_s["dram"] == 40.0 and mine.spread["dram"] == 1.0


def test_a_cell_between_the_triad_and_the_copy_streams_like_a_copy():
    mine = dataclasses.replace(ROOFS, copy_gb_per_s={"dram": COPY})
    flops, nbytes, gflops = poly(BIG, 0.9 / 33.75)  # 1.5x the triad roof, 88% of the copy
    got = place(flops, nbytes, gflops, mine)
    assert got["roof"] == "dram" and got["roof_fraction"] == pytest.approx(1.5)
    assert got["roof_note"] == STREAMS_LIKE_COPY
    assert copy_share("dram", 9 / 16, gflops, mine, False) == pytest.approx(1.5 * 40 / COPY)
    # past the copy too, further than noise: the cost model is blamed again
    flops, nbytes, gflops = poly(BIG, 0.02)  # 2x the triad, 1.18x the copy
    assert place(flops, nbytes, gflops, mine)["roof_note"] == COST_MODEL_ERROR
    # within noise of the triad stays within noise
    flops, nbytes, gflops = poly(BIG, 0.9 / 23.6)
    assert place(flops, nbytes, gflops, mine)["roof_note"] == WITHIN_NOISE
    # placed by its bytes (no flops): the same, in GB/s
    got = place(None, 1.6e9, None, mine, gb_per_s=60.0)
    assert got["roof_note"].endswith(STREAMS_LIKE_COPY)
    # the compute roof has no copy: a planted-low compute roof is still measured low
    low = dataclasses.replace(mine, compute_gflop_per_s=40.0)
    got = place(2.0 * 2000**3, 24.0 * 2000**2, 45.2, low, flops_exact=True)
    assert got["roof"] == "compute" and got["roof_note"] == ROOF_MEASURED_LOW
    assert copy_share("compute", 1.0, 45.2, low, False) is None


def poly_bench(gflop_per_s: float) -> list[dict]:
    """The constructed cells with a NumPy poly at 1e8 reaching ``gflop_per_s``, unplaced."""
    rows = bench_rows()
    row = dict(rows[0])
    flops, nbytes = 9.0 * BIG, 16.0 * BIG
    row.update(
        library="numpy", operation="poly", size=BIG, median_s=flops / gflop_per_s / 1e9,
        flops=flops, bytes=nbytes, gflop_per_s=gflop_per_s, flops_exact=False,
        gb_per_s=nbytes * gflop_per_s / flops, params="", output_bytes=None,
    )  # fmt: skip
    rows.append(row)
    return rows


def poly_line(bench: pd.DataFrame, roofs: pd.DataFrame) -> str:
    return next(line for line in section(bench, roofs).splitlines() if line.startswith("| poly"))


def test_the_finding_and_the_summary_say_the_cell_streams_like_a_copy():
    """The issue's case: a memory-bound cell at 1.5x the DRAM triad roof, 88% of the copy
    beside it. The finding says it streams like a copy, with its share of the copy, through
    the findings table and back; the summary says so plainly, and blames neither the roof
    nor the cost model."""
    roofs = roofs_with_copy(COPY)
    bench = placed(poly_bench(33.75), roofs)
    finding = next(f for f in roofline_findings(bench, roofs) if f.operation == "poly")
    assert finding.size == BIG and finding.roof == "dram"
    assert finding.roof_note == STREAMS_LIKE_COPY
    assert finding.roof_fraction == pytest.approx(1.5)
    assert finding.copy_share == pytest.approx(33.75 / (9 / 16 * COPY))
    fact_rows = findings_rows(dataclasses.replace(_findings(), roofline=(finding,)))
    assert findings_from_rows(fact_rows).roofline == (finding,)
    assert "| testhost | cpu | float64 | 1 | 250 | 120 | 40 (copy 68) |" in section(bench, roofs)
    line = poly_line(bench, roofs)
    assert "streams like a copy" in line and "88% of the copy" in line
    assert COST_MODEL_ERROR not in line and ROOF_MEASURED_LOW not in line
    # the same cell past the copy as well: a cost-model error, as before
    bench = placed(poly_bench(45.0), roofs)
    assert COST_MODEL_ERROR in poly_line(bench, roofs)
    assert STREAMS_LIKE_COPY not in poly_line(bench, roofs)


def _findings():
    from numbench.contract import facts

    return facts.Findings(
        baseline_library="numpy",
        baseline_device="cpu",
        margin=1.1,
        multi_device=False,
        gpu_notice=None,
        fastest=(),
        speedups=(),
        slowdowns=(),
        crossovers=(),
        warnings=(),
    )
