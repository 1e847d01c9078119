"""The workflow's own share of the CPUs' time (``workflow_cpu_share``), end to end: a cell
run by Snakemake records it apart from the other processes', and the summary's headline
says it beside them."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import copy_workflow, snakemake

pytestmark = pytest.mark.e2e

CONFIG = """
libraries: [numpy]
operations:
  elementwise: {sizes: [1000]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 4, budget_s: 0.02}
replicates: {min: 1, max: 1, spread: 0, max_cpu_taken: null}
cell_timeout_s: 300
"""


def test_a_cell_run_by_snakemake_records_the_workflow_s_share_and_the_headline_says_it(
    tmp_path,
):
    wd = copy_workflow(tmp_path / "wf")
    (wd / "one.yaml").write_text(CONFIG)
    proc = snakemake(wd, "--cores", "1", "--configfile", "one.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    bench = pd.read_parquet(wd / "results" / "benchmarks.parquet")
    assert bench["status"].tolist() == ["ok"]
    row = bench.iloc[0]
    assert 0.0 <= row["workflow_cpu_share"] <= 1.0 and 0.0 <= row["other_cpu_share"] <= 1.0
    assert row["workflow_cpu_share"] + row["other_cpu_share"] <= 1.0
    headline = (wd / "results" / "summary.md").read_text().split("\n")[2]
    assert headline.startswith(("**Quiet machine**", "**Busy machine**")), headline
    assert f"the workflow itself took {row['workflow_cpu_share']:.0%}" in headline, headline
