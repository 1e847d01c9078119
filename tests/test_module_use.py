"""numbench as a module of another workflow, as the Snakemake workflow catalog's usage has it
(``module numbench: snakefile: ...``, ``use rule * from numbench as numbench_*``): its own
files are found beside its Snakefile, and the results land in the using workflow's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow, not_ok_cells, snakemake

pytestmark = pytest.mark.e2e

#: the using workflow: its own config file, numbench's rules under the prefix numbench_
USING_SNAKEFILE = """\
configfile: "numbench.yaml"


module numbench:
    snakefile:
        {snakefile}
    config:
        config


use rule * from numbench as numbench_*
"""

#: two cheap libraries, one operation at one small size, one process a cell, no spread
#: rounds, short timing, no round measured again when the machine is busy, and no roofs
#: (minutes on a host whose last-level cache reads large; test_roofs_e2e measures them)
TINY_MODULE_CONFIG = """\
libraries: [numpy, numba]
roofs: false
operations:
  elementwise: {sizes: [2000]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 120
history: {add: false}
"""


@pytest.fixture
def using(tmp_path: Path) -> tuple[Path, Path]:
    """(numbench's copy, the using workflow's folder): two folders side by side, each with a
    space in its path, the using one holding nothing of numbench's."""
    numbench = copy_workflow(tmp_path / "numbench copy")
    folder = tmp_path / "my study"
    folder.mkdir()
    snakefile = json.dumps(str(numbench / "Snakefile"))
    (folder / "Snakefile").write_text(USING_SNAKEFILE.format(snakefile=snakefile))
    (folder / "numbench.yaml").write_text(TINY_MODULE_CONFIG)
    return numbench, folder


def test_a_dry_run_plans_numbench_jobs_under_the_prefix(using):
    _, folder = using
    proc = snakemake(folder, "-n", "--cores", "1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "numbench_cell" in proc.stdout and "numbench_summary" in proc.stdout
    assert "results/cells/numba/cpu/float64/t1/elementwise/2000.parquet" in proc.stdout


def test_another_workflow_runs_numbench_to_its_summary(using):
    numbench, folder = using
    # numbench's own profile is not read in another workflow: give its timing slot here
    proc = snakemake(folder, "--cores", "2", "--resources", "timing_slots=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = folder / "results"
    assert (results / "summary.md").read_text().strip()
    bench = pd.read_parquet(results / "benchmarks.parquet")
    assert sorted(bench["library"]) == ["numba", "numpy"]
    assert set(bench["status"]) == {"ok"}, not_ok_cells(folder, bench)
    assert (folder / "logs" / "summary.log").exists()
    # nothing is written beside numbench's own files
    assert not (numbench / "results").exists() and not (numbench / "logs").exists()
