"""A user's own operation through the whole workflow (issue 32): the example of examples/
end to end, a dry run after an edit plans that operation's cells alone, config errors
through Snakemake without a traceback, and the offsite bundle carrying the user's files. The
Slurm run of a user's operation is test_slurm's: its grid is the example's operation, from a
folder outside the workflow."""

from __future__ import annotations

import re
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, seed_roofs, snakemake

from numbench.operations.loading import operation_code

EXAMPLE = REPO / "examples" / "stencil"
LIBRARIES = ("numpy", "jax", "torch", "tensorflow", "numba")
FAST_TIMING = "timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}"


def user_folder(tmp_path: Path) -> Path:
    """The example's files in a folder outside the workflow whose path has a space."""
    folder = tmp_path / "my operations" / "stencil op"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def two_operations(folder: Path) -> str:
    """A config of the user's stencil beside the built-in sort, NumPy alone, quick."""
    return f"""\
libraries: [numpy]
operations:
  stencil:
    module: "{folder / "stencil.py"}"
    sizes: [32, 64]
  sort:
    sizes: [1000]
{FAST_TIMING}
replicates: {{min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}}
"""


def stencil_alone(folder: Path) -> str:
    """A config of the user's stencil alone, NumPy at one size, quick, no roofs: for the
    offsite bundle, whose subject is the operation's files (the roofs are measured there,
    carried and merged in test_offsite)."""
    return f"""\
libraries: [numpy]
operations:
  stencil:
    module: "{folder / "stencil.py"}"
    sizes: [32]
{FAST_TIMING}
replicates: {{min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}}
roofs: false
"""


def planned(proc) -> dict[str, list[str]]:
    """The files a dry run would make: cells and inputs files."""
    text = proc.stdout + proc.stderr
    return {
        "cells": sorted(set(re.findall(r"output: (results/cells/\S+?\.parquet)", text))),
        "inputs": sorted(set(re.findall(r"output: (results/inputs/\S+?\.npz)", text))),
    }


@pytest.mark.e2e
def test_the_example_s_config_plans_every_library_s_cells(workdir: Path):
    """examples/stencil.yaml as shipped: its config is valid and plans the stencil's cells
    for every library (measured end to end in the shared run, below)."""
    proc = snakemake(workdir, "-n", "--cores", "1", "--configfile", "examples/stencil.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    cells = planned(proc)["cells"]
    assert {c.split("/")[2] for c in cells} == set(LIBRARIES)
    assert all("/stencil/" in c for c in cells) and len(cells) == len(LIBRARIES) * 3


@pytest.mark.e2e
def test_the_example_runs_end_to_end_and_reaches_every_output(tiny_run: Path):
    """The example's operation, in the session's shared run (conftest.TINY_RUN_CONFIG names
    examples/stencil/stencil.py beside the built-in operations): every library measures it,
    and it reaches the speedups, the crossovers, the charts and the summary."""
    results = tiny_run / "results"
    bench = pd.read_parquet(results / "benchmarks.parquet")
    bench = bench[bench["operation"] == "stencil"]
    assert set(bench["library"]) == set(LIBRARIES)
    assert set(bench["status"]) == {"ok"}, bench[["library", "size", "status", "error"]]
    assert set(bench["operation_hash"]) == {operation_code(EXAMPLE / "stencil.py").sha256}
    assert bench["gflop_per_s"].notna().all()
    speedups = pd.read_parquet(results / "speedups.parquet")
    speedups = speedups[speedups["operation"] == "stencil"]
    assert set(speedups["library"]) == set(LIBRARIES) - {"numpy"}
    crossovers = pd.read_parquet(results / "crossovers.parquet")
    crossovers = crossovers[crossovers["operation"] == "stencil"]
    assert set(crossovers["library"]) == set(LIBRARIES) - {"numpy"}
    from numbench.report.charts import chart_names

    for name in chart_names(["stencil"]):
        if "stencil" in name:
            assert (results / "charts" / f"{name}.html").exists(), name
    summary = (results / "summary.md").read_text()
    assert "### stencil" in summary and "charts/speedup_stencil.html" in summary


@pytest.mark.e2e
def test_editing_the_operation_s_code_replans_its_cells_and_no_other(
    workdir: Path, tmp_path, cpu_roofs: Path
):
    seed_roofs(workdir, cpu_roofs)
    folder = user_folder(tmp_path)
    (workdir / "two.yaml").write_text(two_operations(folder))
    (folder / "notes.py").write_text("# not imported by the operation\n")
    # the cells and their table: the analysis after it (charts, summary) is no part of this
    measure = ("results/benchmarks.parquet", "--cores", "1", "--configfile", "two.yaml")
    proc = snakemake(workdir, *measure)
    assert proc.returncode == 0, proc.stderr[-4000:]
    dry = ("-n", "--configfile", "two.yaml")
    assert planned(snakemake(workdir, *dry)) == {"cells": [], "inputs": []}

    (folder / "notes.py").write_text("# still not imported\n")  # not its code: nothing
    assert planned(snakemake(workdir, *dry)) == {"cells": [], "inputs": []}

    grids = folder / "grids.py"  # a helper the operation imports: its cells, all of them
    grids.write_text(grids.read_text().replace("WAVES = 3", "WAVES = 4"))
    proc = snakemake(workdir, *dry)
    assert planned(proc) == {
        "cells": [
            "results/cells/numpy/cpu/float64/t1/stencil/32.parquet",
            "results/cells/numpy/cpu/float64/t1/stencil/64.parquet",
        ],
        "inputs": ["results/inputs/stencil/32.npz", "results/inputs/stencil/64.npz"],
    }, proc.stdout

    # the same through the Slurm profile: the same jobs, planned for Slurm
    proc = snakemake(workdir, *dry, "--profile", "profiles/slurm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(planned(proc)["cells"]) == 2 and "sort" not in "".join(planned(proc)["cells"])

    # measured again, the cells record the new code
    proc = snakemake(workdir, *measure)
    assert proc.returncode == 0, proc.stderr[-4000:]
    bench = pd.read_parquet(workdir / "results" / "benchmarks.parquet").set_index("operation")
    assert (
        bench.loc["stencil", "operation_hash"].tolist()
        == [operation_code(folder / "stencil.py").sha256] * 2
    )


BROKEN = {
    "missing": ("", "does not exist"),
    "import": ("import numpy\nraise RuntimeError('grid not ready')\n", "does not import"),
    "make_inputs": (
        "from numbench import Operation\n"
        "def make(size, rng):\n    raise ValueError('no inputs at ' + str(size))\n"
        "OPERATION = Operation(name='stencil', summary='', input_names=('u',), make_inputs=make,"
        " reference=lambda u: u, tolerance={'float64': 1e-9}, implementations={})\n",
        "make_inputs(32, rng) raised ValueError: no inputs at 32",
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_operation_stops_snakemake_before_any_job_without_a_traceback(
    workdir: Path, tmp_path, case
):
    folder = tmp_path / "my operations"
    folder.mkdir()
    text, phrase = BROKEN[case]
    if text:
        (folder / "stencil.py").write_text(text)
    (workdir / "broken.yaml").write_text(
        f'libraries: [numpy]\noperations:\n  stencil:\n    module: "{folder / "stencil.py"}"\n'
        "    sizes: [32]\n"
    )
    proc = snakemake(workdir, "-n", "--configfile", "broken.yaml")
    err = proc.stdout + proc.stderr
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    assert "config error: operations.stencil" in err and str(folder / "stencil.py") in err, err
    assert phrase in err, err
    if case == "import":
        assert "RuntimeError: grid not ready (stencil.py, line 2)" in err, err


@pytest.mark.e2e
def test_the_offsite_bundle_carries_the_operation_and_import_checks_its_code(
    workdir: Path, tmp_path
):
    from test_offsite import offsite, remote_run

    folder = user_folder(tmp_path)
    (workdir / "two.yaml").write_text(stencil_alone(folder))
    bundle = tmp_path / "bundle.tar.gz"
    proc = offsite(
        workdir,
        "plan",
        "--configfile",
        "two.yaml",
        "--output",
        "plan.json",
        "--bundle",
        str(bundle),
    )
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        assert {"operations/stencil/stencil.py", "operations/stencil/grids.py"} <= names
        assert not any("notes" in n for n in names)
        there = tmp_path / "there"
        tar.extractall(there, filter="data")
    run = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert run.returncode == 0, run.stdout + run.stderr
    archive = there / "cells.tar.gz"

    grids = folder / "grids.py"
    original = grids.read_text()
    grids.write_text(original + "\n# edited after the plan\n")
    proc = offsite(workdir, "import", str(archive), "--configfile", "two.yaml")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "the operation stencil's code here" in proc.stderr, proc.stderr
    assert "is not the code the archive's cells were measured with" in proc.stderr
    assert not (workdir / "results" / "cells").exists()

    grids.write_text(original)
    proc = offsite(workdir, "import", str(archive), "--configfile", "two.yaml")
    assert proc.returncode == 0, proc.stderr
    table = "results/benchmarks.parquet"  # the imported cells' table: no cell measured here
    bench_run = snakemake(workdir, table, "--cores", "1", "--configfile", "two.yaml")
    assert bench_run.returncode == 0, bench_run.stderr[-3000:]
    assert "rule cell:" not in bench_run.stdout + bench_run.stderr
    bench = pd.read_parquet(workdir / table)
    assert set(bench["status"]) == {"ok"} and set(bench["operation"]) == {"stencil"}


def test_a_plan_naming_another_operation_file_is_refused(tmp_path):
    from numbench.offsite import OffsiteError, check_plan, plan_hash

    spec = {
        "library": "numpy",
        "device": "cpu",
        "dtype": "float64",
        "threads": 1,
        "operation": "stencil",
        "size": 32,
        "inputs": "results/inputs/stencil/32.npz",
        "operation_file": "/home/someone/.ssh/evil.py",
    }
    cell = "results/cells/numpy/cpu/float64/t1/stencil/32.parquet"
    plan = {
        "format": "numbench-offsite-plan",
        "version": 2,
        "config": {},
        "cells": [
            {"path": cell, "log": "logs/cells/numpy/cpu/float64/t1/stencil/32.log", "spec": spec}
        ],
        "inputs": [
            {
                "path": "results/inputs/stencil/32.npz",
                "log": "logs/inputs/stencil/32.log",
                "operation": "stencil",
                "size": 32,
            }
        ],
    }
    plan["plan_hash"] = plan_hash(plan)
    with pytest.raises(OffsiteError, match="names the operation file '/home/someone/.ssh/evil.py'"):
        check_plan(plan, "the plan")
