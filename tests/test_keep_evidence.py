"""benchmarks/keep_evidence.py: a run's small tables copied into docs/evidence/NAME, never
over an existing folder, and a folder that is not a run refused with its reason."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from conftest import REPO
from test_history import results_frame, write_results

sys.path.insert(0, str(REPO / "benchmarks"))

import keep_evidence  # noqa: E402


def gpu_run(folder):
    bench = results_frame(1)
    bench["device"] = "gpu"
    bench["device_name"] = "NVIDIA H100 80GB HBM3"
    bench["cpu_model"] = "AMD EPYC 9454"
    write_results(folder, bench)
    (folder / "summary.md").write_text("# summary\n")
    (folder / "charts").mkdir()
    return folder


def test_a_gpu_run_is_kept_under_its_date_and_gpu(tmp_path):
    run = gpu_run(tmp_path / "results")
    out, present = keep_evidence.keep(run, tmp_path / "evidence", None)
    assert out.name == "2026-01-01-nvidia-h100-80gb-hbm3"
    assert present == ["benchmarks.parquet", "summary.md"]
    assert sorted(p.name for p in out.iterdir()) == ["benchmarks.parquet", "summary.md"]
    assert (out / "summary.md").read_text() == "# summary\n"


def test_evidence_is_never_overwritten_and_a_non_run_is_refused(tmp_path):
    run = gpu_run(tmp_path / "results")
    keep_evidence.keep(run, tmp_path / "evidence", "first")
    with pytest.raises(keep_evidence.EvidenceError, match="exists: evidence is never overwritten"):
        keep_evidence.keep(run, tmp_path / "evidence", "first")
    with pytest.raises(keep_evidence.EvidenceError, match="has no benchmarks.parquet"):
        keep_evidence.keep(tmp_path, tmp_path / "evidence", "second")
    with pytest.raises(keep_evidence.EvidenceError, match="letters, digits"):
        keep_evidence.keep(run, tmp_path / "evidence", "../escape")


def test_kept_tables_record_no_folders_of_the_machine_that_measured(tmp_path):
    run = tmp_path / "results"
    bench = results_frame(1)
    bench["python_executable"] = "/home/someone/checkout/.venv/bin/python"
    write_results(run, bench)
    out, _ = keep_evidence.keep(run, tmp_path / "evidence", "kept")
    kept = pd.read_parquet(out / "benchmarks.parquet")
    assert set(kept["python_executable"]) == {".venv/bin/python"}
    # every other column as the run wrote it
    assert kept.drop(columns="python_executable").equals(
        pd.read_parquet(run / "benchmarks.parquet").drop(columns="python_executable")
    )
