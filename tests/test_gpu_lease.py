"""The scripts a GPU lease runs, on this CPU host: ``benchmarks/gpu_lease.sh`` finds its
bundle's plan under the name it was planned with, stops at its budget with an empty part and
goes on from it in the next call, naming the parts in turn; ``benchmarks/gpu_session/lease.sh``
runs a sweep's plan from its lease folder and leaves the part where the next lease finds it.
On a host without a GPU the GPU cells are ``unavailable``, which is all these scripts need."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, copy_workflow
from test_offsite import archive_json

from numbench.offsite import write_plan

CONFIG = """\
libraries: [numpy, cupy]
operations:
  sort: {sizes: [100, 200]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 120
roofs: false
"""
#: numpy's two cells on the CPU, cupy's two on the GPU (unavailable without one)
CELLS = 4


def bash(*args: str | Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        ["bash", *map(str, args)], capture_output=True, text=True, env=environ, timeout=600
    )


def manifest(part: Path) -> dict:
    return archive_json(part, "manifest.json")


@pytest.fixture
def lease_folder(tmp_path, monkeypatch) -> Path:
    """A lease folder as made here: the sweep ``tiny``'s bundle, its plan named after it."""
    monkeypatch.setenv("NUMBENCH_TIMING_LOCK", str(tmp_path / ".timing.lock"))
    here = copy_workflow(tmp_path / "here")
    (here / "tiny.yaml").write_text(CONFIG)
    lease = tmp_path / "lease"
    lease.mkdir()
    write_plan(
        here,
        lease / "plan-tiny.json",
        [str(here / "tiny.yaml")],
        ["device=gpu"],
        bundle=lease / "bundle-tiny.tar.gz",
        say=lambda _: None,
    )
    return lease


@pytest.mark.e2e
def test_a_lease_stops_at_its_budget_and_the_next_goes_on_from_its_part(lease_folder, tmp_path):
    script = REPO / "benchmarks" / "gpu_lease.sh"
    bundle, parts = lease_folder / "bundle-tiny.tar.gz", lease_folder / "parts"
    parts.mkdir()
    first = bash(script, bundle, parts, tmp_path / "out1", "0.001")
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-2000:]
    assert "cells are left" in first.stdout
    part1 = tmp_path / "out1" / "part-01.tar.gz"
    assert manifest(part1)["part"]["cells_left"] == CELLS
    (parts / part1.name).write_bytes(part1.read_bytes())

    second = bash(script, bundle, parts, tmp_path / "out2")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    part2 = tmp_path / "out2" / "part-02.tar.gz"  # named after the one earlier part
    done = manifest(part2)
    assert done["part"]["complete"] is True and len(done["cells"]) == CELLS
    statuses = {path: cell["status"] for path, cell in done["cells"].items()}
    assert sorted(statuses.values()) == ["ok", "ok", "unavailable", "unavailable"], statuses
    assert (tmp_path / "out2" / "part-02.log").read_text().count("unavailable") >= 2


@pytest.mark.e2e
def test_the_session_script_runs_a_sweep_from_its_lease_folder(lease_folder, tmp_path):
    out = tmp_path / "out"
    proc = bash(
        REPO / "benchmarks" / "gpu_session" / "lease.sh",
        lease_folder,
        out,
        "400",
        "tiny",
        env={"NO_WORKFLOW": "1", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sweep tiny exited 0" in proc.stdout
    assert "numpy" in proc.stdout  # the host's versions, first
    part = out / "tiny" / "part-01.tar.gz"
    assert manifest(part)["part"]["complete"] is True
    assert (lease_folder / "parts-tiny").is_dir()  # where the next lease's parts go


def test_a_bundle_without_a_single_plan_is_refused_naming_it(tmp_path):
    bundle = tmp_path / "empty.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(REPO / "README.md", arcname="README.md")
    (tmp_path / "parts").mkdir()
    proc = bash(REPO / "benchmarks" / "gpu_lease.sh", bundle, tmp_path / "parts", tmp_path / "o")
    assert proc.returncode == 2
    assert "holds no single plan" in proc.stderr and "empty.tar.gz" in proc.stderr
