"""Environments through the whole workflow (issue 31): NumPy in two versions side by side, a
slowed twin caught, the Versions section and chart, the environment made once and reused,
and a change of pins making it again."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pytest
from conftest import seed_roofs, snakemake

from numbench.config import environments
from numbench.config.environments import ENVS_DIR, READY_FILE

FAST_TIMING = "timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 5, budget_s: 0.01}"
#: a NumPy release older than the pinned set's (envs/requirements-cpu.txt), for Python 3.11
OLD_NUMPY = "numpy==2.3.*"


def index_reachable() -> bool:
    """Whether pip's package index answers (a pinned environment downloads its pins)."""
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
    host = urlparse(url).hostname or "pypi.org"
    try:
        socket.create_connection((host, 443), timeout=5).close()
        return True
    except OSError:
        return False


#: Each round measured once (``max_cpu_taken: null``). Beside the suite's other process the
#: default limit measured nearly every round three times and kept the least disturbed, which
#: was still disturbed (other programs took 15% to 86% of a process's CPU time on every
#: attempt): three times the rounds, each starting PyTorch afresh, and no quiet round bought.
#: Measuring again is test_replicates' and test_disturbed's to check; the pairs run in
#: lockstep, so what disturbs one side's turns disturbs the other's milliseconds apart.
#: PyTorch is in the grid so that an environment's libraries are a choice: the pinned one
#: measures only the library it pins (its default), the slowed twin only the one it names
#: (``libraries``), and neither starts PyTorch for cells of its own. Three rounds a cell at
#: least: a version's interval with two rounds rests on a t of one degree of freedom, and on a
#: machine at load 5 the slowed twin's 10.3x matmul read 'same', its interval 0.60x to 176x.
def config(pins: str, slowdown: str = "10") -> str:
    return f"""\
libraries: [numpy, torch]
operations:
  sort:
    sizes: [1000]
  matmul:
    sizes: [64]
{FAST_TIMING}
replicates: {{min: 3, max: 6, early_rounds: 1, max_cpu_taken: null}}
environments:
  numpy-old: [{pins}]
  slow:
    libraries: [numpy]
    variables: {{NUMBENCH_TEST_ADAPTERS: "1", NUMBENCH_TEST_SLOWDOWN: "{slowdown}"}}
"""


def planned_jobs(proc) -> dict[str, int]:
    """Job counts of a dry run's table."""
    text = proc.stdout + proc.stderr
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", text, re.M)}


@pytest.mark.e2e
@pytest.mark.skipif(not index_reachable(), reason="no package index to install the pins from")
def test_two_numpy_versions_side_by_side_and_a_slowed_twin(workdir: Path, cpu_roofs: Path):
    seed_roofs(workdir, cpu_roofs)
    (workdir / "env.yaml").write_text(config(OLD_NUMPY))
    proc = snakemake(workdir, "--cores", "1", "--configfile", "env.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]

    ready = json.loads((workdir / ENVS_DIR / "numpy-old" / READY_FILE).read_text())
    assert ready["versions"]["numpy"].startswith("2.3.")
    versions = pd.read_parquet(workdir / "results" / "versions.parquet")
    old = versions[versions["environment"] == "numpy-old"]
    assert set(old["library"]) == {"numpy"} and len(old) == 2
    assert (old["status"] == "ok").all(), old[["operation", "size", "status", "error"]]
    assert (old["version"].str.startswith("2.3.")).all()
    assert (old["base_version"] != old["version"]).all()
    slow = versions[versions["environment"] == "slow"]
    assert set(slow["library"]) == {"numpy"} and len(slow) == 2
    assert (slow["status"] == "ok").all(), slow[["operation", "size", "status", "error"]]
    # every call ten times as long: every cell called slower, its ratio far past the margin.
    # The factor is large, and a cell in doubt measures up to 6 rounds, so that the machine
    # cannot hide it. With every call twice as long, disturbed rounds on a busy host widened a
    # cell's interval past 1 (CI's run had 1.72x and 1.58x both 'same', their intervals
    # reaching down to 0.85x and 0.78x; the suite in two processes at load 8 on the 2-core VM
    # gave two of six 'same' at 2.2x and 2.0x); at 10x, on the shared 2-core VM while not
    # quiet (2026-11-27), both cells read 10.4x and 10.5x, their intervals reaching down to
    # 1.46x. How small a slowdown is caught, and how often, is benchmarks/versions_power.py's
    # to measure; the verdict's rule is test_versions' with injected timings
    shown = slow[["library", "operation", "ratio", "ratio_ci_low", "ratio_ci_high", "change"]]
    assert (slow["change"] == "slower").all(), shown
    assert (slow["ratio"] > 4).all(), shown
    # the environments' cells never reach the base tables
    bench = pd.read_parquet(workdir / "results" / "benchmarks.parquet")
    assert len(bench) == 4 and bench["library"].isin(["numpy", "torch"]).all()

    summary = (workdir / "results" / "summary.md").read_text()
    assert "## Versions" in summary
    assert "numpy-old" in summary and "slow" in summary
    charts = workdir / "results" / "charts"
    assert (charts / "versions-numpy-old.svg").exists() and (charts / "versions-slow.svg").exists()

    # made once: a second run plans nothing, the environment included
    again = snakemake(workdir, "-n", "--configfile", "env.yaml")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # other pins make it again, and remeasure its cells alone
    (workdir / "env.yaml").write_text(config("numpy==2.3.5"))
    changed = planned_jobs(snakemake(workdir, "-n", "--configfile", "env.yaml"))
    assert changed.get("environment") == 1 and changed.get("cell") == 2, changed


@pytest.mark.e2e
def test_without_environments_no_versions_table_and_the_same_summary(tiny_run: Path):
    """The session's shared run has no environments: no versions table, no environment
    made, no Versions section."""
    assert "environments" not in (tiny_run / "e2e.yaml").read_text()
    assert not (tiny_run / "results" / "versions.parquet").exists()
    assert not (tiny_run / ".numbench").exists()
    assert "## Versions" not in (tiny_run / "results" / "summary.md").read_text()


@pytest.mark.e2e
def test_a_pin_that_cannot_be_installed_fails_its_environment_naming_it(
    workdir: Path, cpu_roofs: Path
):
    seed_roofs(workdir, cpu_roofs)
    (workdir / "bad.yaml").write_text(
        "libraries: [numpy]\noperations:\n  sort:\n    sizes: [1000]\n"
        + FAST_TIMING
        + "\nreplicates: {min: 1, max: 1, early_rounds: 0}"
        + "\nenvironments:\n  nothing: [numpy==0.0.0.1]\n"
    )
    # the environment and a base cell as targets: the analysis after them is not this test's
    base_cell = "results/cells/numpy/cpu/float64/t1/sort/1000.parquet"
    targets = (environments.ready_file("nothing"), base_cell)
    proc = snakemake(workdir, *targets, "--cores", "1", "--keep-going", "--configfile", "bad.yaml")
    assert proc.returncode != 0
    log = (workdir / "logs" / "environments" / "nothing.log").read_text()
    assert "environment nothing: pip install numpy==0.0.0.1 failed" in log
    assert not (workdir / ENVS_DIR / "nothing" / READY_FILE).exists()
    # the base environment's cells were measured all the same
    assert (workdir / base_cell).exists()
