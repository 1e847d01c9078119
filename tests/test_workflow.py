"""The workflow end to end on the tiny grid of the session's shared run (conftest.tiny_run):
every library, every built-in operation and a user's operation, one size each."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import (
    TINY_RUN_CONFIG,
    TINY_RUN_LIBRARIES,
    TINY_RUN_OPERATIONS,
    TINY_RUN_REPLICATES,
    copy_run,
    copy_workflow,
    not_ok_cells,
    snakemake,
)

pytestmark = pytest.mark.e2e

LIBRARIES = list(TINY_RUN_LIBRARIES)
CELLS = len(TINY_RUN_LIBRARIES) * len(TINY_RUN_OPERATIONS)


@pytest.fixture
def finished(tiny_run):
    """The shared run (``--cores 2``, in a folder whose path holds a space: every rule must
    quote the paths it passes on)."""
    return tiny_run


def test_dry_run_plans_one_cell_job_per_cell(workdir):
    """The tiny grid with an early round a cell (the shared run measures one round a cell):
    one cell job, one early round job per cell, and one inputs job per operation."""
    spread = "replicates: {min: 2, max: 2, early_rounds: 1}"
    assert TINY_RUN_REPLICATES in TINY_RUN_CONFIG
    (workdir / "e2e.yaml").write_text(TINY_RUN_CONFIG.replace(TINY_RUN_REPLICATES, spread))
    proc = snakemake(workdir, "-n", "--cores", "1", "--configfile", "e2e.yaml")
    assert proc.returncode == 0, proc.stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    assert int(counts["cell"]) == CELLS
    assert int(counts["early_round"]) == CELLS  # replicates.early_rounds: 1
    assert int(counts["inputs"]) == len(TINY_RUN_OPERATIONS)


def test_early_rounds_run_before_every_cells_own_rounds(dims_run):
    """The rules' priorities put round 0 of every cell before round 1 of any: a cell's
    processes lie apart in time; the round files are temporary and gone. On the session's
    dimensions run (conftest.DIMS_RUN_CONFIG: 8 cells, two rounds each, the first a spread
    round): the tiny run measures one round a cell."""
    cells = len(pd.read_parquet(dims_run / "results" / "benchmarks.parquet"))
    starts = []
    for path in (dims_run / "results" / "cells").rglob("*.parquet"):
        cell = pd.read_parquet(path, columns=["role", "replicate", "process_started_unix"])
        own = cell[cell["role"] == "measured"]
        starts.append(own.groupby("replicate")["process_started_unix"].min())
    assert len(starts) == cells == 8
    assert all(1 in s for s in starts)  # every cell measured its second round
    assert max(s[0] for s in starts) < min(s[1] for s in starts)
    assert not list((dims_run / "results").glob("rounds/**/*.json"))
    logs = list((dims_run / "logs" / "rounds").rglob("r0.log"))
    assert len(logs) == cells


def test_every_cell_is_measured_or_explained(finished):
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    assert len(bench) == CELLS
    assert set(bench["library"]) == set(LIBRARIES)
    ok = bench[bench["status"] == "ok"]
    assert (ok["rel_error"] <= ok["tolerance"]).all()
    assert (ok["median_s"] > 0).all() and (ok["n_samples"] >= 3).all()
    assert (ok["ci_low_s"] <= ok["median_s"]).all() and (ok["median_s"] <= ok["ci_high_s"]).all()
    others = bench[bench["status"] != "ok"]
    # Only Numba's FFT cannot be expressed; it says why.
    unexpected = not_ok_cells(finished, bench, expected={("numba", "fft")})
    assert list(zip(others["library"], others["operation"])) == [("numba", "fft")], unexpected
    assert others["status"].iloc[0] == "unsupported" and "FFT" in others["error"].iloc[0]


def test_summary_lists_every_cell(finished):
    summary = (finished / "results" / "summary.md").read_text()
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    for r in bench.itertuples():
        assert re.search(rf"\| {r.library} \| {r.device} \| {r.operation} \| {r.size} \|", summary)


def test_asynchronous_cells_have_both_figures_and_synchronous_ones_one(finished):
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    ok = bench[bench["status"] == "ok"]
    jax = ok[ok["library"] == "jax"]
    assert len(jax) == len(TINY_RUN_OPERATIONS) and (jax["dispatch"] == "asynchronous").all()
    # 3 a process at least (min_samples), pooled over its processes (unit-tested across two:
    # test_pipelined)
    assert (jax["pipelined_n_samples"] >= 3 * jax["replicates"]).all()
    assert (jax["pipelined_median_s"] > 0).all()
    assert (jax["pipelined_speedup_ci_low"] <= jax["pipelined_speedup"]).all()
    assert (jax["pipelined_rel_error"] <= jax["tolerance"]).all()
    sync = ok[ok["library"] != "jax"]
    assert (sync["dispatch"] == "synchronous").all()
    assert (sync["pipelined_speedup"] == 1.0).all() and (sync["pipelined_n_samples"] == 0).all()
    assert ok["h2d_s"].isna().all() and ok["end_to_end_s"].isna().all()  # the CPU: null
    cell = pd.read_parquet(
        finished / "results" / "cells" / "jax" / "cpu" / "float64" / "t1" / "fft" / "1024.parquet"
    )
    assert set(cell["mode"]) == {"latency", "pipelined"}
    samples = pd.read_parquet(finished / "results" / "samples.parquet")
    # latency only: the speedups compare call for call; every latency sample counted once,
    # the paired baseline processes in the baseline's rows (pooled_processes)
    assert len(samples) == ok["n_samples"].sum()
    assert samples["role"].eq("baseline").any() and ok["pooled_processes"].gt(0).any()
    summary = (finished / "results" / "summary.md").read_text()
    assert "## Pipelined throughput" in summary and "### Queued calls against" in summary
    assert (finished / "results" / "charts" / "pipelined.html").exists()


def test_cells_never_overlap_even_with_two_cores(finished):
    bench = pd.read_parquet(finished / "results" / "benchmarks.parquet")
    spans = sorted(zip(bench["locked_from_unix"], bench["locked_until_unix"]))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end


def test_each_cell_has_its_own_log(finished):
    logs = list((finished / "logs" / "cells").rglob("*.log"))
    assert len(logs) == CELLS


def test_naming_one_cell_reruns_exactly_that_cell(finished, tmp_path):
    finished = copy_run(finished, tmp_path / "a b")
    target = (
        finished
        / "results"
        / "cells"
        / "torch"
        / "cpu"
        / "float64"
        / "t1"
        / "sort"
        / "2000.parquet"
    )
    others = {
        p: p.stat().st_mtime_ns
        for p in (finished / "results" / "cells").rglob("*.parquet")
        if p != target
    }
    target.unlink()
    rel = str(target.relative_to(finished))
    # The target goes before --configfile, which takes every argument after it.
    proc = snakemake(finished, rel, "--cores", "1", "--configfile", "e2e.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert target.exists()
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stderr + proc.stdout, flags=re.M))
    assert jobs.get("cell") == "1" and "inputs" not in jobs
    assert {p: p.stat().st_mtime_ns for p in others} == others


def _environment_beside(venv: Path, where: Path) -> Path:
    """A second environment at ``where`` that runs the same packages as ``venv``: its own
    ``bin/python`` and ``pyvenv.cfg``, with ``lib`` pointing at ``venv``'s."""
    (where / "bin").mkdir(parents=True)
    (where / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (where / "lib").symlink_to(venv / "lib")
    (where / "bin" / "python").symlink_to(Path(os.path.realpath(venv / "bin" / "python")))
    return where / "bin" / "python"


def test_rules_run_the_python_first_on_path(tmp_path):
    """The interpreter a cell runs is the environment's `python` on PATH (what a venv or
    Snakemake's --sdm conda puts first), not the one Snakemake itself was started with."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment to copy")
    wd = copy_workflow(tmp_path / "wf")
    (wd / "one.yaml").write_text(
        "libraries: [numpy]\noperations:\n  sort: {sizes: [1000]}\n"
        "timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}\n"
        "replicates: {min: 1, max: 1}\n"
    )
    other = _environment_beside(Path(sys.prefix), tmp_path / "other-env")
    path = f"{other.parent}{os.pathsep}{os.environ['PATH']}"
    target = "results/cells/numpy/cpu/float64/t1/sort/1000.parquet"
    proc = snakemake(wd, target, "--cores", "1", "--configfile", "one.yaml", env={"PATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]
    recorded = pd.read_parquet(wd / target)["python_executable"].iloc[0]
    assert recorded == str(other) and recorded != sys.executable


def test_changing_the_report_margin_remeasures_nothing(finished):
    """The report's margin is no part of a cell: a new one plans the analysis again and no
    cell, round or inputs job (the stopping margin, ``replicates.stop_margin``, is the cells')."""
    proc = snakemake(
        finished, "-n", "--cores", "1", "--configfile", "e2e.yaml", "--config", "margin=1.3"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    planned = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    assert "speedups" in planned and "summary" in planned, proc.stdout[-3000:]
    assert not {"cell", "early_round", "inputs"} & planned.keys(), planned
