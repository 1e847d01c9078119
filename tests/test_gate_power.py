"""benchmarks/gate_power.py: its shortcuts give what the gate itself gives, on small
constructed runs (test_gate_pairs' quiet runs of test_history's 24 cells)."""

from __future__ import annotations

import sys

import pandas as pd
from conftest import REPO
from test_gate_pairs import TORCH_SORT, quiet_runs

from numbench import history
from numbench.compare import gate

sys.path.insert(0, str(REPO / "benchmarks"))

import gate_pairs  # noqa: E402
import gate_power  # noqa: E402

MARGIN = 1.1


def test_planting_many_cells_slows_each_as_planting_it_alone_does(tmp_path):
    (run,) = quiet_runs(tmp_path, 1)
    other = ("numpy", "cpu", "fft", 1000, "float64", 1)
    many = gate_power.plant_many(run, tmp_path / "many", {TORCH_SORT, other}, 1.2)
    alone = gate_pairs.plant(run, tmp_path / "alone", TORCH_SORT, 1.2)
    original = pd.read_parquet(f"{run}/benchmarks.parquet")
    got = pd.read_parquet(many / "benchmarks.parquet")
    one = pd.read_parquet(alone / "benchmarks.parquet")
    keys = [gate_pairs.key_of(r) for _, r in original.iterrows()]
    for column in ("median_s", "ci_low_s", "ci_high_s"):
        for i, key in enumerate(keys):
            expected = original[column][i] * (1.2 if key in (TORCH_SORT, other) else 1.0)
            assert got[column][i] == expected, (key, column)
            if key == TORCH_SORT:
                assert one[column][i] == got[column][i]


def test_the_change_column_rebuilt_at_a_level_is_the_gate_s_own(tmp_path):
    runs = quiet_runs(tmp_path, 6, spread=0.02)
    store = tmp_path / "store"
    for run in runs[2:]:
        history.add_results(run, store)
    cells = history.read(store).cells
    old, new = gate.side(runs[0]), gate.side(runs[1])
    table = gate_power.evaluate(old, new, cells, MARGIN)
    suspects = {}
    for level in (0.05, 0.5):
        theirs, _ = gate.judge(old, new, cells, MARGIN, level)
        mine = gate_power.changes(table, level, MARGIN)
        keys = [gate_pairs.key_of(r) for _, r in theirs.iterrows()]  # judge sorts by change
        assert dict(zip(keys, theirs["change"], strict=True)) == mine.to_dict(), level
        suspects[level] = int((mine == gate.SUSPECT).sum())
    # a looser screen names more of these unchanged cells suspects
    assert suspects[0.5] > suspects[0.05]
