"""The example suite of kernels handed over as they are (examples/eos, issue 41): numbench
check passes on it, and its config plans every library's cells, the Numba variant's beside
Numba's, and the workflow measures them, each named in the results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, snakemake

EXAMPLE = REPO / "examples" / "eos" / "eos.py"
LIBRARIES = {"numpy", "numba", "numba-parallel", "jax", "torch", "tensorflow"}
#: the example's kernels, one process a cell, each paired with a NumPy baseline process in
#: lockstep (the only run of kernels as they are, and of a variant, beside a baseline); no
#: roofs (they are no part of what this checks, and at 2 threads the session's cpu_roofs
#: cannot stand in: test_roofs_e2e measures them)
QUICK = """\
libraries: [numpy, numba, numba-parallel, jax, torch, tensorflow]
roofs: false
variants:
  numba-parallel: {library: numba, options: {parallel: true}}
operations:
  eos: {module: examples/eos/eos.py, sizes: [4096]}
threads: 2
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
"""


@pytest.mark.e2e
def test_numbench_check_passes_on_the_example():
    """The command end to end: a process that imports every library (the unit tests call
    numbench.check in this one)."""
    proc = subprocess.run(
        [sys.executable, "-m", "numbench", "check", str(EXAMPLE), "--size", "1000"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for library in ("numpy", "jax", "torch", "tensorflow", "numba"):
        assert f"  {library}: ok" in proc.stdout


@pytest.mark.e2e
def test_the_example_s_config_plans_every_library_and_the_variant(workdir: Path):
    proc = snakemake(workdir, "-n", "--cores", "2", "--configfile", "examples/eos.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = proc.stdout + proc.stderr
    libraries = {line.split("/")[2] for line in text.split() if line.startswith("results/cells/")}
    assert libraries == LIBRARIES


@pytest.mark.e2e
def test_the_example_runs_end_to_end_each_kernel_as_it_is(workdir: Path):
    if len(__import__("os").sched_getaffinity(0)) < 2:
        pytest.skip("threads: 2 needs 2 CPUs")
    (workdir / "quick.yaml").write_text(QUICK)
    # up to the summary, which names each kernel; the charts are no part of this (and the
    # tiny run renders a user's operation's)
    proc = snakemake(workdir, "results/summary.md", "--cores", "2", "--configfile", "quick.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    bench = pd.read_parquet(workdir / "results" / "benchmarks.parquet")
    assert set(bench["library"]) == LIBRARIES
    assert set(bench["status"]) == {"ok"}, bench[["library", "status", "error"]]
    as_is = dict(zip(bench["library"], bench["as_is"], strict=True))
    assert as_is == {**dict.fromkeys(LIBRARIES, True), "numba": False, "numba-parallel": False}
    assert set(bench["seed"]) == {42}
    summary = (workdir / "results" / "summary.md").read_text()
    assert "numba-parallel" in summary and "numba" in summary
