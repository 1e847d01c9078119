"""numbench.cells: a cell's files are formatted and parsed back in one place."""

from __future__ import annotations

import pytest

from numbench.cells import Cell, cell_path

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
