"""The helpers the benchmark scripts share (benchmarks/_report.py) and the pieces of
benchmarks/versions_power.py that need no run: the scripts themselves measure whole grids,
far too long for a test, so a helper that stops matching the package must fail here."""

from __future__ import annotations

import math
import sys

import pytest
import yaml
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import _report  # noqa: E402
import engine_ab  # noqa: E402
import versions_power  # noqa: E402

TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 5, "budget_s": 0.02}


def test_cell_median_measures_a_cell_the_workflow_s_way(tmp_path):
    """The helper writes the cell's file as the workflow does (one fresh worker process,
    unpaired, CPU, float64, the steady allocator, the timing given) and returns the median
    the workflow's aggregate reads from that file."""
    from numbench import inputs_file as inputs
    from numbench.analyse.aggregate import cell_row
    from numbench.contract import read_cell

    path, out = tmp_path / "inputs.npz", tmp_path / "c.parquet"
    inputs.write("sort", 1000, 7, path)
    median = _report.cell_median("numpy", "sort", 1000, path, out, TIMING)
    row = cell_row(read_cell(out))
    cell = tuple(row[k] for k in ("library", "device", "dtype", "threads", "operation", "size"))
    assert cell == ("numpy", "cpu", "float64", 1, "sort", 1000)
    assert row["status"] == "ok" and row["replicates"] == row["n_processes"] == 1
    assert row["paired_with"] is None and row["allocator"] == "steady"
    assert TIMING["min_samples"] <= row["n_samples"] <= TIMING["max_samples"]
    assert median == row["median_s"]


def test_clopper_pearson_matches_the_exact_binomial_interval():
    # k = 0: the upper end is 1 - (alpha / 2) ** (1 / n)
    low, high = versions_power.clopper_pearson(0, 221)
    assert low == 0.0
    assert math.isclose(high, 1 - 0.025 ** (1 / 221), rel_tol=1e-6)
    low, high = versions_power.clopper_pearson(221, 221)
    assert high == 1.0 and math.isclose(low, 0.025 ** (1 / 221), rel_tol=1e-6)
    # a textbook value: 5 of 20 -> 8.66% to 49.10%
    low, high = versions_power.clopper_pearson(5, 20)
    assert round(low, 4) == 0.0866 and round(high, 4) == 0.4910


def test_twins_stop_at_the_gate_s_margin_and_are_test_only(tmp_path):
    out = versions_power.twin_config(
        REPO / "config" / "config.yaml", [1.0, 1.2], tmp_path / "twins.yaml", 1.05, 6
    )
    cfg = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert cfg["replicates"]["stop_margin"] == 1.05 and cfg["replicates"]["max"] == 6
    assert cfg["replicates"]["min"] == 2  # the grid's other settings are kept
    twin = cfg["environments"]["twin-1.20"]["variables"]
    assert twin == {
        "NUMBENCH_ADAPTERS": str(REPO / "tests" / "adapters" / "slowed.py"),
        "NUMBENCH_TEST_ADAPTERS": "1",
        "NUMBENCH_TEST_SLOWDOWN": "1.2",
    }
    kept = versions_power.twin_config(
        REPO / "config" / "config.yaml", [1.1], tmp_path / "kept.yaml", 1.05, None
    )
    assert yaml.safe_load(kept.read_text(encoding="utf-8"))["replicates"]["max"] == 8


def test_engine_ab_reads_the_early_round_s_shift_from_the_later_rounds(tmp_path):
    import pandas as pd

    # round r: baseline 1 ms, library 1 ms / ratio, for paired ratios e^0.3, e^0.1, e^-0.1
    ratios = {0: math.exp(0.3), 1: math.exp(0.1), 2: math.exp(-0.1)}
    rows = []
    for r, ratio in ratios.items():
        for role, seconds in (("baseline", 1e-3), ("measured", 1e-3 / ratio)):
            rows += [{"role": role, "replicate": r, "mode": "latency", "seconds": seconds}] * 3
    rows.append({"role": "measured", "replicate": 0, "mode": "pipelined", "seconds": 9.0})
    path = tmp_path / "cell.parquet"
    pd.DataFrame(rows).to_parquet(path)
    got = engine_ab.round_spread(path)
    # logs 0.3, 0.1, -0.1: sd 0.2; later rounds' mean 0, so the shift is 0.3; their sd 0.1414
    assert got["paired_round_sd"] == pytest.approx(0.2)
    assert got["early_shift"] == pytest.approx(0.3)
    assert got["later_round_sd"] == pytest.approx(math.sqrt(0.02))
    two = pd.DataFrame([row for row in rows if row["replicate"] < 2])
    two.to_parquet(path)
    got = engine_ab.round_spread(path)
    assert got["paired_round_sd"] == pytest.approx(math.sqrt(0.02))
    assert got["early_shift"] is None and got["later_round_sd"] is None
