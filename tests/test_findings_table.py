"""results/findings.parquet: the findings analyse decides, written as a table and read back as
the same facts; the summary is worded from that file alone (with the tables it shows)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import MARGIN, constructed_results, run_script
from summarise import summarise

from numbench.analyse.findings import decide, write_findings
from numbench.contract import BENCHMARKS_SCHEMA
from numbench.contract.conclusions import (
    FINDINGS_COLUMNS,
    FINDINGS_SCHEMA,
    PRECISION_COLUMNS,
    SCALING_COLUMNS,
    findings_table,
    read_findings,
)
from numbench.contract.facts import (
    FirstTouch,
    GpuNotice,
    PipelineGap,
    PrecisionGap,
    QueuedSameSpeed,
    RoofFinding,
    SkippedGpuCells,
    Synchronous,
)
from numbench.errors import CorruptFile
from numbench.report.summary import write_summary

PRECISION = pd.DataFrame(
    [
        ["numpy", "cpu", 1, "fft", 1000, "testhost", 0.55, 0.5, 0.6, "faster", MARGIN],
        ["numpy", "cpu", 1, "sort", 1000, "testhost", 0.98, 0.9, 1.05, "same", MARGIN],
    ],
    columns=PRECISION_COLUMNS,
)
SCALING = pd.DataFrame(
    [
        [
            "numpy",
            "cpu",
            "float64",
            "fft",
            1000,
            "testhost",
            2,
            1.7,
            1.6,
            1.8,
            0.85,
            "faster",
            MARGIN,
        ]
    ],
    columns=SCALING_COLUMNS,
)


def every_kind_of_finding(findings):
    """``findings`` with a fact of every kind the constructed results do not give."""
    import dataclasses

    touch = FirstTouch(8e7, 0.02, 0.25, 256.0, 0.5, float("inf"))
    roof = RoofFinding(
        "testhost", "cpu", "float64", 1, "fft", 1000, "numpy", 1e-3, 2.5, "dram", 0.4, None, touch
    )
    gap = PipelineGap("jax", "cpu", "", "faster", 3, 4, "fft", 1000, 1.5, 1.2, 1.8)
    notice = GpuNotice(
        none_found=True,
        gpu_cells=2,
        skipped=(SkippedGpuCells("torch", "no CUDA", 2, (("fft", (10, 100)),)),),
        skipped_cells=2,
        hosts=("testhost",),
        cpu_cells=4,
        cpu_baseline="numpy",
    )
    return dataclasses.replace(
        findings,
        gpu_notice=notice,
        precision=(PrecisionGap("fft", "numpy", 1000, 1, 0.55),),
        scaling=(),
        pipeline_gaps=(gap,),
        queued_same_speed=(QueuedSameSpeed("torch", "cpu"),),
        synchronous=(Synchronous("numpy", "cpu"),),
        roofline=(roof,),
    )


def test_the_table_reads_back_as_the_same_findings(tmp_path):
    findings = every_kind_of_finding(decide(*constructed_results(), "numpy", "cpu", MARGIN))
    path = tmp_path / "findings.parquet"
    pq.write_table(findings_table(findings), path)
    back = read_findings(path)
    assert back == findings
    # the types come back too: tuples, nested facts, ints as ints
    assert isinstance(back.fastest, tuple) and back.gpu_notice.skipped[0].sizes == (
        ("fft", (10, 100)),
    )
    assert back.scaling == () and back.roofline[0].first_touch == findings.roofline[0].first_touch


def test_a_dimension_not_compared_stays_none_and_one_without_a_gap_stays_empty(tmp_path):
    bench, speedups, crossovers = constructed_results()
    path = tmp_path / "findings.parquet"
    findings = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN, precision=PRECISION)
    pq.write_table(findings_table(findings), path)
    back = read_findings(path)
    assert back.precision == (PrecisionGap("fft", "numpy", 1000, 1, 0.55),)
    assert back.scaling is None


def test_the_table_has_one_row_a_fact_with_the_cell_key_as_columns():
    findings = decide(*constructed_results(), "numpy", "cpu", MARGIN, scaling=SCALING)
    table = findings_table(findings)
    assert table.schema.equals(FINDINGS_SCHEMA)
    rows = table.to_pylist()
    assert rows[0]["topic"] == "run" and rows[0]["library"] is None
    speedup = next(r for r in rows if r["topic"] == "speedups")
    assert speedup["fact"] == "largest_speedup" and speedup["operation"] in ("fft", "sort")
    assert isinstance(speedup["size"], int) and '"speedup"' in speedup["detail"]
    scaled = next(r for r in rows if r["topic"] == "scaling")
    assert (scaled["fact"], scaled["library"], scaled["threads"]) == ("scaling_gap", "numpy", 2)
    topics = [r["topic"] for r in rows]
    assert topics.count("fastest") == len(findings.fastest)
    assert topics.count("warnings") == len(findings.warnings)


def test_a_file_that_is_not_a_findings_table_is_named_in_the_error(tmp_path):
    garbage = tmp_path / "findings.parquet"
    garbage.write_bytes(b"not parquet")
    with pytest.raises(CorruptFile, match=r"cannot read findings file .*findings\.parquet"):
        read_findings(garbage)
    lacking = tmp_path / "lacking.parquet"
    pq.write_table(pa.table({"topic": ["run"]}), lacking)
    with pytest.raises(CorruptFile, match=r"lacking\.parquet: it lacks the columns .*'detail'"):
        read_findings(lacking)
    strange = tmp_path / "strange.parquet"
    rows = findings_table(decide(*constructed_results(), "numpy", "cpu", MARGIN)).to_pylist()
    rows[1]["fact"] = "rumour"
    pq.write_table(pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA), strange)
    with pytest.raises(CorruptFile, match=r"strange\.parquet: .*unknown fact 'rumour'") as error:
        read_findings(strange)
    assert "snakemake --cores 1 --forcerun" in str(error.value)
    assert FINDINGS_COLUMNS[-1] == "detail"


def write_tables(tmp_path, gpu=None) -> dict:
    bench, speedups, crossovers = constructed_results(gpu)
    paths = {name: tmp_path / f"{name}.parquet" for name in ("benchmarks", "speedups")}
    pq.write_table(
        pa.Table.from_pandas(bench, schema=BENCHMARKS_SCHEMA, preserve_index=False),
        paths["benchmarks"],
    )
    speedups.to_parquet(paths["speedups"], index=False)
    paths["crossovers"] = tmp_path / "crossovers.parquet"
    crossovers.to_parquet(paths["crossovers"], index=False)
    for name, frame in (("precision", PRECISION), ("scaling", SCALING)):
        paths[name] = tmp_path / f"{name}.parquet"
        frame.to_parquet(paths[name], index=False)
    return paths


@pytest.mark.parametrize("gpu", [None, "unavailable"])
def test_the_summary_is_worded_from_the_findings_file(tmp_path, gpu):
    """The scripts with the command lines the rules give them (in this process:
    ``conftest.run_script``): findings.py writes the table, summary.py words it, and the page
    is the one the findings decided in memory give."""
    paths = write_tables(tmp_path, gpu)
    findings = tmp_path / "findings.parquet"
    made = run_script(
        "findings.py",
        *("--benchmarks", str(paths["benchmarks"]), "--speedups", str(paths["speedups"])),
        *("--crossovers", str(paths["crossovers"])),
        *("--baseline-library", "numpy", "--baseline-device", "cpu"),
        *("--margin", str(MARGIN), "--output", str(findings)),
        *("--precision", str(paths["precision"]), "--scaling", str(paths["scaling"])),
    )
    assert made.returncode == 0, made.stderr
    output = tmp_path / "summary.md"
    worded = run_script(
        "summary.py",
        *("--benchmarks", str(paths["benchmarks"]), "--speedups", str(paths["speedups"])),
        *("--findings", str(findings), "--charts-dir", str(tmp_path / "charts")),
        *("--precision", str(paths["precision"]), "--scaling", str(paths["scaling"])),
        *("--output", str(output)),
    )
    assert worded.returncode == 0, worded.stderr
    frames = [pd.read_parquet(paths[n]) for n in ("benchmarks", "speedups", "crossovers")]
    expected = summarise(*frames, "numpy", "cpu", MARGIN, precision=PRECISION, scaling=SCALING)
    assert output.read_text(encoding="utf-8") == expected
    assert "### float32 against float64" in expected and "### Parallel scaling" in expected


def test_the_summary_refuses_speedups_of_another_baseline_than_the_findings(tmp_path):
    paths = write_tables(tmp_path)
    findings = tmp_path / "findings.parquet"
    write_findings(
        paths["benchmarks"], paths["speedups"], paths["crossovers"], findings, "numpy", "cpu", 1.1
    )
    other = pd.read_parquet(paths["speedups"]).assign(baseline_library="torch")
    other.to_parquet(paths["speedups"], index=False)
    with pytest.raises(ValueError, match="not the baseline given"):
        write_summary(paths["benchmarks"], paths["speedups"], findings, tmp_path / "s.md", tmp_path)
