"""``benchmarks/gpu_cell_cost.py``: a cell's cost is its rounds run ahead plus its own job,
over every part log of a run; a cell whose own job did not end is left out; two runs are
compared on the cells both finished."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_cell_cost  # noqa: E402

BEFORE_1 = """plan abc: 3 cells (3 to measure), 1 inputs files; working in W
inputs [1/1] results/inputs/mlp/16.npz  made  0.1 s
round 0 results/cells/jax/gpu/float32/t1/mlp/16.parquet  30.0 s
round 0 results/cells/numpy/cpu/float32/t1/mlp/16.parquet  1.0 s
[1/3] results/cells/jax/gpu/float32/t1/mlp/16.parquet  ok  20.0 s
stopped at the time budget: 1 of the plan's 3 cells measured
"""
BEFORE_2 = """round 0 results/cells/torch/gpu/float32/t1/mlp/16.parquet  5.0 s
[ 2/3] results/cells/numpy/cpu/float32/t1/mlp/16.parquet  ok  2.0 s
[ 3/3] results/cells/torch/gpu/float32/t1/mlp/16.parquet  ok  4.0 s
"""
AFTER = """round 0 results/cells/jax/gpu/float32/t1/mlp/16.parquet  30.0 s
[1/3] results/cells/jax/gpu/float32/t1/mlp/16.parquet  ok  1.0 s
[ 2/3] results/cells/numpy/cpu/float32/t1/mlp/16.parquet  ok  1.5 s
round 0 results/cells/torch/gpu/float32/t1/mlp/16.parquet  3.0 s
"""


def test_costs_sum_each_cells_rounds_and_job_and_compare_the_cells_both_ended(tmp_path, capsys):
    logs = {"b1": BEFORE_1, "b2": BEFORE_2, "a1": AFTER}
    for name, text in logs.items():
        (tmp_path / f"{name}.log").write_text(text)
    status = gpu_cell_cost.main(
        [
            "--run",
            "before",
            str(tmp_path / "b1.log"),
            str(tmp_path / "b2.log"),
            "--run",
            "after",
            str(tmp_path / "a1.log"),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    # torch's own job never ended in "after": two cells are compared, not three
    assert "2 cells finished in every run" in out
    assert "jax/gpu/float32/t1/mlp/16 | 50.0 | 31.0" in out
    assert "numpy/cpu/float32/t1/mlp/16 | 3.0 | 1.5" in out
    assert "torch/gpu/float32/t1/mlp/16" not in out
    # medians (50 and 3: 26.5; 31 and 1.5: 16.25) and totals (53, 32.5)
    assert "median cell 16.25 s against 26.50 s (0.61x), total 32 s against 53 s (0.61x)" in out


def test_a_missing_log_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gpu_cell_cost.main(["--run", "x", str(tmp_path / "no.log")])
    err = capsys.readouterr().err
    assert exc.value.code != 0 and "no such log" in err and "no.log" in err
