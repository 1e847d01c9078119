"""numbench.cells: a cell's files are formatted and parsed back in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from numbench.cells import Cell, cell_path, round_sd_place

CELL = Cell("torch", "cpu", "matmul", 100, "float32", 2)


def test_every_file_of_a_cell_parses_back_to_it():
    assert CELL.path == "results/cells/torch/cpu/float32/t2/matmul/100.parquet"
    assert CELL.log == "logs/cells/torch/cpu/float32/t2/matmul/100.log"
    assert CELL.round_path(3) == "results/rounds/torch/cpu/float32/t2/matmul/100/r3.json"
    assert CELL.round_log(3) == "logs/rounds/torch/cpu/float32/t2/matmul/100/r3.log"
    assert CELL.inputs == "results/inputs/matmul/100.npz"
    for path in (CELL.path, CELL.log, CELL.round_path(3)):
        assert Cell.from_path(path) == CELL
    assert cell_path("torch", "cpu", "matmul", "100", "float32", "2") == CELL.path


@pytest.mark.parametrize(
    "path",
    [
        "results/cells/torch/cpu/float32/t2/matmul/../../../x.parquet",
        "/results/cells/torch/cpu/float32/t2/matmul/100.parquet",
        "results/cells/torch/cpu/float32/t2/matmul/100.parquet/../x",
        "logs//etc/passwd",
        "logs/cells/../../x.log",
        "results/cells/torch/tpu/float32/t2/matmul/100.parquet",
        "results/cells/Torch/cpu/float32/t2/matmul/100.parquet",
        "results/cells/torch/cpu/float16/t2/matmul/100.parquet",
        "results/cells/torch/cpu/float32/t2/matmul/1e3.parquet",
        "results/cells/torch/cpu/float32/t2/matmul/100.parquet\n",
    ],
)
def test_anything_but_a_cells_own_path_is_refused(path):
    with pytest.raises(ValueError, match="is not a cell's file"):
        Cell.from_path(path)


def test_a_cell_leaves_its_round_variance_beside_its_results_folder():
    cell = Cell("numba-parallel", "cpu", "linreg_gd", 20, "float32", 2, "numpy-2.3")
    assert round_sd_place(cell.path) == (
        Path("results/round_sd"),
        "numba-parallel@numpy-2.3-cpu-float32-t2-linreg_gd-20",
    )
    # a workflow used as a module keeps its results under a folder of its own
    assert round_sd_place(f"bench/{cell.path}")[0] == Path("bench/results/round_sd")
    # a file outside the layout (a test's own path) has no place
    assert round_sd_place("/somewhere/cell.parquet") is None
    assert round_sd_place("results/cells/numpy/cpu/float64/t1/sort/x.parquet") is None
