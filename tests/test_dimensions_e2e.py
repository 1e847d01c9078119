"""dtype and threads as grid dimensions, end to end: float32 beside float64 and 1 thread
beside every CPU, their precision and scaling tables, and the summary's sections."""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest
from conftest import copy_run, not_ok_cells, snakemake

from numbench.analyse.dimensions import PRECISION_COLUMNS, SCALING_COLUMNS

pytestmark = pytest.mark.e2e

CPUS = len(os.sched_getaffinity(0))


@pytest.fixture
def finished(dims_run):
    """The session's shared run of the dimensions' grid (conftest.DIMS_RUN_CONFIG): NumPy
    and PyTorch, elementwise at 1000, float32 and float64, 1 thread and every CPU."""
    return dims_run


def median_of(samples: pd.DataFrame, **key) -> float:
    own = samples[samples["role"] == "measured"]
    for column, value in key.items():
        own = own[own[column] == value]
    assert not own.empty, key
    return float(np.median(own["seconds"]))


def test_both_dtypes_and_both_thread_counts_sit_side_by_side(finished):
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    assert len(bench) == 2 * 2 * 2  # libraries x dtypes x thread counts (one size)
    assert set(zip(bench["dtype"], bench["threads"])) == {
        (d, t) for d in ("float32", "float64") for t in (1, CPUS)
    }
    ok = bench[bench["status"] == "ok"]
    assert len(ok) == len(bench), not_ok_cells(finished, bench)
    assert ok["threads_used"].notna().all() and (ok["threads_used"] >= 1).all()
    torch = ok[ok["library"] == "torch"]
    assert (torch["threads_used"] == torch["threads"]).all()
    speedups = pd.read_parquet(finished / "results" / "speedups.parquet")
    assert len(speedups) == 4 and set(speedups["threads"]) == {1, CPUS}


def test_each_cell_begins_where_its_early_round_s_job_did(finished):
    """Every cell's first job is its early round's (one a cell here): ``jobs_from_unix``
    comes before that round's processes started, whose job ran before the cell's own."""
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    assert bench["jobs_from_unix"].notna().all()
    for cell in bench.itertuples():
        path = finished / "results" / "cells" / cell.library / cell.device / cell.dtype
        rows = pd.read_parquet(path / f"t{cell.threads}" / cell.operation / f"{cell.size}.parquet")
        early = rows.loc[rows["replicate"] == 0, "process_started_unix"].min()
        later = rows.loc[rows["replicate"] > 0, "process_started_unix"].min()
        assert cell.jobs_from_unix <= early < later, cell


def test_precision_and_scaling_are_the_ratios_of_the_cells_samples(finished):
    samples = pd.read_parquet(finished / "results" / "samples.parquet")
    prec = pd.read_parquet(finished / "results" / "precision.parquet")
    scal = pd.read_parquet(finished / "results" / "scaling.parquet")
    assert list(prec.columns) == PRECISION_COLUMNS and len(prec) == 2 * 2
    assert list(scal.columns) == SCALING_COLUMNS and len(scal) == 2 * 2
    assert set(scal["threads"]) == {CPUS}
    for r in prec.itertuples():
        key = dict(library=r.library, threads=r.threads, operation=r.operation, size=r.size)
        expected = median_of(samples, dtype="float32", **key) / median_of(
            samples, dtype="float64", **key
        )
        assert r.ratio == pytest.approx(expected)
    for r in scal.itertuples():
        key = dict(library=r.library, dtype=r.dtype, operation=r.operation, size=r.size)
        expected = median_of(samples, threads=1, **key) / median_of(samples, threads=CPUS, **key)
        assert r.speedup == pytest.approx(expected)
        assert r.efficiency == pytest.approx(expected / CPUS)


def test_summary_has_the_precision_and_scaling_tables(finished):
    summary = (finished / "results" / "summary.md").read_text()
    assert "## Precision" in summary and "| float32 / float64 |" in summary
    assert "## Parallel scaling" in summary and "| efficiency |" in summary
    for name in ("precision", "scaling"):
        assert (finished / "results" / "charts" / f"{name}.svg").exists()
        assert f"charts/{name}.html" in summary


def test_naming_one_cell_reruns_exactly_that_cell(finished, tmp_path):
    finished = copy_run(finished, tmp_path / "wf")
    rel = f"results/cells/torch/cpu/float32/t{CPUS}/elementwise/1000.parquet"
    target = finished / rel
    others = {
        p: p.stat().st_mtime_ns
        for p in (finished / "results" / "cells").rglob("*.parquet")
        if p != target
    }
    assert len(others) == 7
    target.unlink()
    proc = snakemake(finished, rel, "--cores", "1", "--configfile", "dims.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert target.exists()
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stderr + proc.stdout, flags=re.M))
    assert jobs.get("cell") == "1" and "inputs" not in jobs
    assert {p: p.stat().st_mtime_ns for p in others} == others
