"""The summary as the workflow makes it, for the tests: the findings decided from the tables
(``numbench.analyse.findings.decide``), written to the findings table and read back
(``numbench.contract.conclusions``), then worded (``numbench.report.summary.render``)."""

from __future__ import annotations

import pyarrow as pa

from numbench.analyse.findings import decide
from numbench.contract.conclusions import findings_from_rows, findings_table
from numbench.report.summary import render


def through_table(findings):
    """``findings`` after a trip through results/findings.parquet's table."""
    table = pa.Table.from_pylist(findings_table(findings).to_pylist())
    return findings_from_rows(table.to_pylist())


def summarise(
    bench,
    speedups,
    crossovers,
    baseline_library,
    baseline_device,
    margin,
    charts_dir="charts",
    precision=None,
    scaling=None,
    roofs=None,
    versions=None,
):
    """What ``render`` took before the findings were a table, and what it gives."""
    findings = decide(
        bench,
        speedups,
        crossovers,
        baseline_library,
        baseline_device,
        margin,
        precision=precision,
        scaling=scaling,
        roofs=roofs,
    )
    return render(
        bench, speedups, through_table(findings), charts_dir, precision, scaling, roofs, versions
    )
