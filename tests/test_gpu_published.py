"""benchmarks/gpu_published.py: numbench's GPU figures beside the published ones, from a
synthetic speedups table whose values are chosen by hand."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_published  # noqa: E402


def speedup(library, device, operation, size, value, low=None, high=None, dtype="float32"):
    return {
        "library": library,
        "device": device,
        "operation": operation,
        "size": size,
        "dtype": dtype,
        "threads": 1,
        "host": "gpuhost",
        "baseline_library": "numpy",
        "baseline_device": "cpu",
        "speedup": value,
        "speedup_ci_low": low,
        "speedup_ci_high": high,
    }


SPEEDUPS = pd.DataFrame(
    [
        speedup("jax", "gpu", "batched_matmul", 64, 0.5, 0.4, 0.6),
        speedup("jax", "gpu", "batched_matmul", 4096, 30.0, 27.0, 33.0),
        speedup("torch", "gpu", "mlp", 16, 3.0, 2.5, 3.5),
        speedup("torch", "cpu", "mlp", 16, 1.5, 1.4, 1.6),
        speedup("torch", "gpu", "fft", 1000, 2.0, 1.8, 2.2, dtype="float64"),
        speedup("torch", "gpu", "fft", 1000000, 40.0, 38.0, 42.0, dtype="float64"),
        speedup("torch", "gpu", "sort", 1000000, None, dtype="float64"),  # baseline failed
    ]
)
CROSSOVERS = pd.DataFrame(
    [
        {
            "library": "jax",
            "device": "gpu",
            "operation": "batched_matmul",
            "dtype": "float32",
            "threads": 1,
            "host": "gpuhost",
            "kind": "crosses",
            "crossover_size": 200.0,
            "ci_low": 150.0,
            "ci_high": 300.0,
        },
        {
            "library": "torch",
            "device": "gpu",
            "operation": "batched_matmul",
            "dtype": "float32",
            "threads": 1,
            "host": "gpuhost",
            "kind": "always_faster",
            "crossover_size": None,
            "ci_low": None,
            "ci_high": None,
        },
    ]
)


@pytest.fixture(scope="module")
def lines() -> dict[tuple[str, str, str], str]:
    """The table's rows, by (operation, size, compared), numbench's column last."""
    text = gpu_published.table(gpu_published.read_published(), SPEEDUPS, CROSSOVERS)
    out = {}
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[(cells[1], cells[3], cells[4])] = cells[6]
    return out


def test_a_speedup_over_the_baseline_is_the_rows_own_with_its_interval(lines):
    assert lines[("batched_matmul", "64", "jax gpu over numpy cpu")] == "0.50x [0.40, 0.60]"
    assert lines[("batched_matmul", "4096", "jax gpu over numpy cpu")] == "30.00x [27.00, 33.00]"


def test_a_speedup_over_another_library_is_the_ratio_of_the_two(lines):
    # 3.0 over NumPy on the GPU, 1.5 on the CPU: 2x, without an interval
    assert lines[("mlp", "16", "torch gpu over torch cpu")].startswith("2.00x (ratio of two")


def test_an_empty_size_is_the_largest_one_measured(lines):
    assert (
        lines[("fft", "1000000 (largest)", "torch gpu over numpy cpu")] == "40.00x [38.00, 42.00]"
    )


def test_crossovers_are_set_beside_the_published_batch(lines):
    assert lines[("batched_matmul", "", "jax gpu over numpy cpu")] == (
        "crosses at batch 200 [150, 300]"
    )
    assert lines[("batched_matmul", "", "torch gpu over numpy cpu")] == "always faster"


def test_a_figure_the_run_lacks_says_not_measured(lines):
    assert lines[("batched_matmul", "256", "jax gpu over numpy cpu")] == "not measured"
    assert lines[("mlp", "4", "jax gpu over jax cpu")] == "not measured"
    assert lines[("elementwise", "", "torch gpu over numpy cpu")] == "not measured"


def test_every_published_figure_has_a_row():
    published = gpu_published.read_published()
    text = gpu_published.table(published, SPEEDUPS, CROSSOVERS)
    assert len(text.splitlines()) == 2 + len(published)
    assert set(published["source"]) == {"t4-report", "rtx4060-blog"}
    assert published["published"].gt(0).all()


def test_a_run_of_several_hosts_needs_one_named(tmp_path, capsys):
    two = pd.concat([SPEEDUPS, SPEEDUPS.assign(host="other")])
    two.to_parquet(tmp_path / "speedups.parquet")
    CROSSOVERS.to_parquet(tmp_path / "crossovers.parquet")
    assert gpu_published.main([str(tmp_path)]) == 2
    assert "several hosts (gpuhost, other): name one with --host" in capsys.readouterr().err
    assert gpu_published.main([str(tmp_path), "--host", "gpuhost"]) == 0
    assert "| t4-report | batched_matmul | float32 | 64 |" in capsys.readouterr().out
    assert gpu_published.main([str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err
