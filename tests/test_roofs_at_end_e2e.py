"""The roofs measured again after every cell (``roofs_at_end``), end to end on a grid of one
cell: both measurements in results/roofs.parquet, each saying its round, the second taken
after the last cell held the timing lock; the summary's roofs table gives each roof's best
and its spread across the run. A test's copy of the workflow turns the switch off
(conftest.roofs_once): its runs measure the roofs once, and no job more. The same run's cell,
run by Snakemake, records the workflow's own share of the CPUs' time (``workflow_cpu_share``)
apart from the other processes', and the summary's headline says it beside them; the
workflow's processes were kept off the worker's CPU while it measured (``workflow_moved``)."""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest
from conftest import copy_workflow, snakemake

pytestmark = pytest.mark.e2e

CONFIG = """
libraries: [numpy]
operations:
  elementwise: {sizes: [1000]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 4, budget_s: 0.02}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 300
roofs_at_end: %s
"""


def planned(wd, name: str) -> dict[str, int]:
    proc = snakemake(wd, "-n", "--cores", "1", "--configfile", name)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M)}


def test_off_the_roofs_are_measured_once_with_no_job_more(tmp_path):
    wd = copy_workflow(tmp_path / "wf")
    (wd / "off.yaml").write_text(CONFIG % "false")
    (wd / "on.yaml").write_text(CONFIG % "true")
    off, on = planned(wd, "off.yaml"), planned(wd, "on.yaml")
    assert off["roofs"] == 1 and "roofs_at_end" not in off
    assert on["roofs"] == 1 and on["roofs_at_end"] == 1
    assert on["total"] == off["total"] + 1


def test_on_the_roofs_are_measured_before_and_after_every_cell(tmp_path):
    wd = copy_workflow(tmp_path / "wf")
    (wd / "on.yaml").write_text(CONFIG % "true")
    # the summary as target: every roofs job, the cell and the analysis, not the charts
    # (the roofline chart of two rounds is test_roofline_exact's)
    proc = snakemake(wd, "results/summary.md", "--cores", "1", "--configfile", "on.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    roofs = pd.read_parquet(wd / "results" / "roofs.parquet")
    start, end = roofs[roofs["round"] == "start"], roofs[roofs["round"] == "end"]
    assert len(start) == len(end) > 0 and set(roofs["round"]) == {"start", "end"}
    assert set(start["roof"]) == set(end["roof"]) >= {"l2", "dram", "compute"}
    bench = pd.read_parquet(wd / "results" / "benchmarks.parquet")
    assert len(bench) == 1 and bench["status"].tolist() == ["ok"]
    assert bench.loc[0, "sentinel_s"] > 0  # timed by the cell's job before it measured
    row = bench.iloc[0]
    assert 0.0 <= row["workflow_cpu_share"] <= 1.0 and 0.0 <= row["other_cpu_share"] <= 1.0
    assert row["workflow_cpu_share"] + row["other_cpu_share"] <= 1.0
    # kept off the worker's CPU while it measured, where the run may use another one
    assert row["workflow_moved"] == (len(os.sched_getaffinity(0)) > 1)
    cell_from, cell_until = bench["locked_from_unix"].min(), bench["locked_until_unix"].max()
    assert start["locked_until_unix"].max() <= cell_from
    assert end["locked_from_unix"].min() >= cell_until
    assert (wd / "logs" / "roofs_at_end.log").exists()
    # the cell is held against each roof's best of the two
    ok = roofs[roofs["status"] == "ok"]
    best = ok.groupby("roof")["value"].max()
    assert bench.loc[0, "roof"] in best.index
    summary = (wd / "results" / "summary.md").read_text()
    headline = summary.split("\n")[2]
    assert headline.startswith(("**Quiet machine**", "**Busy machine**")), headline
    assert f"the workflow itself took {row['workflow_cpu_share']:.0%}" in headline, headline
    dram = ok[ok["roof"] == "dram"].set_index("round")["value"]
    spread = f"spread {dram.max() / dram.min():.2f}x"
    assert f"{dram.max():.3g}" in summary and spread in summary, summary
    assert f"start {dram['start']:.3g}" in summary and f"end {dram['end']:.3g}" in summary
