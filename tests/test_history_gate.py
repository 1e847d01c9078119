"""compare --history: each cell judged against its own run-to-run spread in the store, all
cells at once, with the gate's false-alarm rate measured on the store's own past pairs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_compare import cmd as compare
from test_history import eight_runs, results_frame, write_results

from numbench.history.gate import holm


@pytest.fixture
def store_and_pair(tmp_path):
    """A store of eight runs, and two more runs of the same unchanged code outside it."""
    store = eight_runs(tmp_path)
    old = write_results(tmp_path / "old", results_frame(9))
    new = write_results(tmp_path / "new", results_frame(10))
    return store, old, new


def test_an_unchanged_pair_passes_and_the_past_pairs_are_counted(store_and_pair):
    store, old, new = store_and_pair
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert "24 cells judged against their own run-to-run spread" in proc.stdout
    assert "own 7 past pairs of consecutive runs, the gate failed 0 (0%; set to 5%)" in proc.stdout
    assert "The gate passes." in proc.stdout


def test_one_cell_slowed_1_2x_fails_the_gate_on_that_cell_alone(store_and_pair, tmp_path):
    store, old, _ = store_and_pair
    slowed = results_frame(10, slow=("jax", "fft", 10000, 1.2))
    new = write_results(tmp_path / "slowed", slowed)
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown", "--json")
    assert proc.returncode == 1, proc.stderr
    gated = json.loads(proc.stdout)["history"]
    flagged = [c for c in gated["cells"] if c["change"] != "same"]
    assert [(c["library"], c["operation"], c["size"], c["change"]) for c in flagged] == [
        ("jax", "fft", 10000, "slower")
    ]
    assert gated["failed"] is True and gated["cells_judged"] == 24


def test_a_noisy_cell_is_judged_by_its_own_wider_spread(tmp_path):
    """The same 1.2x on a cell whose runs move 15% from run to run is not called slower."""
    rng = np.random.default_rng(5)
    store = tmp_path / "history"
    from numbench import history

    for run in range(1, 9):
        bench = results_frame(run, slow=("jax", "fft", 10000, float(np.exp(rng.normal(0, 0.15)))))
        history.add_results(write_results(tmp_path / f"r{run}", bench), store)
    old = write_results(tmp_path / "old", results_frame(9))
    new = write_results(tmp_path / "new", results_frame(10, slow=("jax", "fft", 10000, 1.2)))
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown")
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_without_runs_in_the_history_compare_works_as_before_and_says_so(tmp_path):
    old = write_results(tmp_path / "old", results_frame(1))
    new = write_results(tmp_path / "new", results_frame(2))
    plain = compare(str(old), str(new))
    proc = compare(str(old), str(new), "--history", str(tmp_path / "none"))
    assert proc.returncode == 0 and proc.stdout == plain.stdout
    assert "holds no run: each cell is judged by the two sides' own intervals" in proc.stderr


def test_holm_rejects_step_down():
    assert list(holm(np.array([0.01, 0.04, 0.03, 0.5]), 0.05)) == [True, False, False, False]
    assert list(holm(np.array([0.001, 0.012, 0.02]), 0.05)) == [True, True, True]
    assert list(holm(np.array([0.2, 0.3]), 0.05)) == [False, False]


def test_the_two_runs_compared_are_left_out_of_the_history(tmp_path):
    store = eight_runs(tmp_path)
    # runs 7 and 8 are in the store: each cell is judged on the six others
    proc = compare(str(tmp_path / "r7"), str(tmp_path / "r8"), "--history", str(store), "--json")
    cells = json.loads(proc.stdout)["history"]["cells"]
    assert {c["history_runs"] for c in cells} == {6}


def test_a_side_may_be_a_benchmarks_file_of_any_name(store_and_pair, tmp_path):
    store, old, new = store_and_pair
    renamed = tmp_path / "new-run.parquet"
    renamed.write_bytes((new / "benchmarks.parquet").read_bytes())
    proc = compare(str(old), str(renamed), "--history", str(store), "--fail-on-slowdown")
    assert proc.returncode == 0 and "The gate passes." in proc.stdout, proc.stderr
