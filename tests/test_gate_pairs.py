"""benchmarks/gate_pairs.py: the history's gate on every ordered pair of runs, unchanged and
with one cell planted slower, on small constructed results folders (test_history's 24 cells)
instead of runs of the default grid."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_history import results_frame, write_results

from numbench import history

sys.path.insert(0, str(REPO / "benchmarks"))

import gate_pairs  # noqa: E402

#: a cell of test_history's grid, as the script names cells
TORCH_SORT = ("torch", "cpu", "sort", 10000, "float64", 1)


def quiet_runs(tmp_path, n: int, spread: float = 0.005, seed: int = 3) -> list[str]:
    """``n`` results folders of unchanged code: each cell's median moves ``spread`` (log
    scale) from run to run, its interval ±3% around it."""
    template = results_frame(1)
    rng = np.random.default_rng(seed)
    folders = []
    for run in range(1, n + 1):
        bench = results_frame(run)
        median = template["median_s"] * np.exp(rng.normal(0.0, spread, len(bench)))
        bench["median_s"], bench["ci_low_s"], bench["ci_high_s"] = (
            median,
            median * 0.97,
            median * 1.03,
        )
        folders.append(str(write_results(tmp_path / f"run{run}", bench)))
    return folders


def test_one_pair_passes_unchanged_and_fails_on_the_planted_cell_alone(tmp_path):
    """The gate itself, as the script calls it: a store of the four other runs."""
    runs = quiet_runs(tmp_path, 6)
    store = tmp_path / "store"
    for run in runs[2:]:
        history.add_results(run, store)
    same = gate_pairs.call_gate(runs[0], runs[1], store, None)
    assert not same["failed"] and same["flagged"] == [] and same["judged"] == 24
    assert same["past"] == (3, 0)
    planted = gate_pairs.plant(runs[1], tmp_path / "planted", TORCH_SORT, 1.2)
    slowed = gate_pairs.call_gate(runs[0], planted, store, None)
    assert slowed["failed"] and slowed["judged"] == 24
    ((key, change, ratio),) = slowed["flagged"]
    assert key == TORCH_SORT and change == "slower" and 1.1 < ratio < 1.35
    assert gate_pairs.caught(slowed, TORCH_SORT) and not gate_pairs.caught(same, TORCH_SORT)


#: a cell the stand-in gate flags in one unchanged pair
OTHER = ("numpy", "cpu", "fft", 1000, "float64", 1)


def test_each_ordered_pair_gets_a_store_of_every_other_run_and_the_totals_add_up(
    tmp_path, monkeypatch
):
    """``measure`` and ``report`` around a stand-in gate that records what it is given:
    one false alarm (run 2 -> run 1), and the planted cell caught everywhere."""
    runs = quiet_runs(tmp_path, 4)
    ids = {
        Path(r).name: t.column("run_id")[0].as_py()
        for r, ((t, _),) in zip(runs, gate_pairs.ingest(runs))
    }
    calls = []

    def stand_in(old, new, store, margin, screen=None):
        old, new = Path(old), Path(new)
        calls.append((old.name, new.name, set(history.read(store).runs["run_id"])))
        flagged = []
        if new.name.startswith("planted"):
            slowed = pd.read_parquet(new / "benchmarks.parquet")
            source = new.parent.parent / new.name.replace("planted-", "run")
            ratio = slowed["median_s"] / pd.read_parquet(source / "benchmarks.parquet")["median_s"]
            is_cell = (slowed["library"] == "torch") & (slowed["operation"] == "sort")
            is_cell &= slowed["size"] == 10000
            assert np.allclose(ratio[is_cell], 1.2) and np.allclose(ratio[~is_cell], 1.0)
            flagged = [(TORCH_SORT, "slower", 1.2)]
        elif (old.name, new.name) == ("run2", "run1"):
            flagged = [(OTHER, "slower", 1.15)]
        return {
            "failed": bool(flagged),
            "judged": 24,
            "flagged": flagged,
            "slower": len(flagged),
            "faster": 0,
            "past": (1, 0),
        }

    monkeypatch.setattr(gate_pairs, "call_gate", stand_in)
    work = tmp_path / "work"
    work.mkdir()
    rows = gate_pairs.measure(runs, TORCH_SORT, 1.2, None, work)
    assert [(r["old"], r["new"]) for r in rows] == [
        (i, j) for i in range(4) for j in range(4) if i != j
    ]
    assert len(calls) == 24
    for old, new, held in calls:
        pair = {old, new.replace("planted-", "run")}
        assert held == {rid for name, rid in ids.items() if name not in pair}, (old, new)
    text = gate_pairs.report(runs, rows, TORCH_SORT, 1.2)
    assert "the gate passed 11 of 12 ordered pairs and failed 1 (8.3%" in text
    assert "1 flagged slower and 0 broken of 288 judged (0.35%" in text
    assert "over its 6 stores, 0 of 6 past pairs failed" in text
    assert "failed on it alone in 12 of 12 pairs, failed in 12, and flagged 0 other" in text
    assert "| run 2 -> run 1 | unchanged | numpy/cpu fft 1000 float64 t1 | slower | 1.150 |" in text


@pytest.mark.e2e
def test_unchanged_runs_pass_every_pair_and_the_planted_cell_is_caught_and_named(tmp_path):
    """The whole script's measure on six runs: 60 runs of the gate (18 to 84 s on a busy 2-core machine)."""
    runs = quiet_runs(tmp_path, 6)
    frames = gate_pairs.read_runs(runs)
    cell = gate_pairs.planted_cell(frames, "torch/sort/10000")
    assert cell == TORCH_SORT
    work = tmp_path / "work"
    work.mkdir()
    rows = gate_pairs.measure(runs, cell, 1.2, None, work)
    assert len(rows) == 30 and {r["store_runs"] for r in rows} == {4}
    for r in rows:
        assert not r["unchanged"]["failed"] and r["unchanged"]["flagged"] == []
        assert r["unchanged"]["judged"] == 24
        assert r["planted"]["failed"]
        assert [(k, change) for k, change, _ in r["planted"]["flagged"]] == [(cell, "slower")]
        assert 1.1 < r["planted"]["flagged"][0][2] < 1.35
    text = gate_pairs.report(runs, rows, cell, 1.2)
    assert "the gate passed 30 of 30 ordered pairs and failed 0 (0.0%" in text
    assert "0 flagged slower and 0 broken of 720 judged" in text
    assert (
        "1.2x planted on torch/cpu sort 10000 float64 t1: the gate failed on it alone in " in text
    )
    assert "alone in 30 of 30 pairs, failed in 30, and flagged 0 other cells" in text
    # four runs in a store: a past pair of it is judged on the two others, too few
    assert "The gate's own rate judges each past pair of its store on the 2 other runs" in text
    assert "Flagged cells (unchanged pairs, and others than the planted one): none." in text
    # the planted cell was caught in every pair, so it could show a 1.2x in each
    could = [r["unchanged"]["detectable"][cell] for r in rows]
    assert all(1.1 <= c <= 1.2 for c in could), could
    said = f"{min(could):.3f}x to {max(could):.3f}x over the pairs"
    assert (
        f"The slowdown the gate would flag in torch/cpu sort 10000 float64 t1 on its own: {said}"
        in text
    )
    # each pair's common shift, 24 cells on one host: the median new / old, near 1
    assert all(len(r["unchanged"]["shifts"]) == 1 for r in rows)
    assert all(0.97 < r["unchanged"]["shifts"][0] < 1.03 for r in rows)


def test_a_store_too_small_to_decide_only_screens_the_planted_cell_and_says_why(tmp_path):
    """Five runs: each pair's store holds three, too few for the decision, so nothing is
    flagged slower; the screen, with OLD as a fourth run, names the 1.2x a suspect (one pair
    here: each call runs the whole gate)."""
    runs = quiet_runs(tmp_path, 5)
    store = tmp_path / "store"
    for run in runs[2:]:
        history.add_results(run, store)
    planted = gate_pairs.plant(runs[1], tmp_path / "planted", TORCH_SORT, 1.2)
    got = gate_pairs.call_gate(runs[0], planted, store, None)
    assert not got["failed"] and got["judged"] == 24 and got["flagged"] == []
    assert TORCH_SORT in got["suspects"]
    assert got["past"] == (2, 0)  # the store's two consecutive pairs, neither decided
    why = gate_pairs.notes(5)[0]
    assert "holds 3 runs, fewer than the 4 the decision needs" in why
    assert "(6 runs are needed to decide)" in why
    assert "holds 2 runs, and with OLD 3, fewer than the 4" in gate_pairs.notes(4)[0]


@pytest.mark.parametrize(
    ("runs", "said"),
    [(2, ["store is empty"]), (5, ["holds 3 runs", "on the 1 other run,"])]
    + [(6, ["on the 2 other runs"]), (7, ["on the 3 other runs"]), (8, [])],
)
def test_the_notes_say_what_the_number_of_runs_lets_the_gate_judge(runs, said):
    notes = gate_pairs.notes(runs)
    assert len(notes) == len(said)
    assert all(part in note for part, note in zip(said, notes, strict=True))


def test_with_two_runs_the_gate_falls_back_to_compare_s_own_verdict(tmp_path, capsys):
    runs = quiet_runs(tmp_path, 2)
    gate_pairs.main([*runs, "--plant", "jax/fft/1000"])
    out = capsys.readouterr().out
    assert "each pair's store is empty: the gate falls back to compare's own verdict" in out
    assert "| run 1 -> run 2 | 0 | 24 | - | passes |" in out
    assert "1.2x planted on jax/cpu fft 1000 float64 t1" in out


def test_the_planted_copy_slows_every_time_of_that_cell_alone(tmp_path):
    bench = results_frame(1)
    bench["process_medians_s"] = [json.dumps([m * 0.99, m * 1.01]) for m in bench["median_s"]]
    bench["pipelined_median_s"] = bench["median_s"] / 2
    bench["min_s"] = bench["median_s"] * 0.9
    src = write_results(tmp_path / "run", bench)
    out = gate_pairs.plant(src, tmp_path / "planted", TORCH_SORT, 1.2)
    slowed = pd.read_parquet(out / "benchmarks.parquet")
    assert list(out.iterdir()) == [out / "benchmarks.parquet"]
    is_cell = (slowed["library"] == "torch") & (slowed["operation"] == "sort")
    is_cell &= slowed["size"] == 10000
    assert is_cell.sum() == 1
    for column in ("median_s", "ci_low_s", "ci_high_s", "pipelined_median_s", "min_s"):
        assert np.allclose(slowed.loc[is_cell, column], bench.loc[is_cell, column] * 1.2)
        assert slowed.loc[~is_cell, column].tolist() == bench.loc[~is_cell, column].tolist()
    (medians,) = slowed.loc[is_cell, "process_medians_s"]
    (before,) = bench.loc[is_cell, "process_medians_s"]
    assert np.allclose(json.loads(medians), np.array(json.loads(before)) * 1.2)
    timed = ["median_s", "ci_low_s", "ci_high_s", "pipelined_median_s", "min_s"]
    rest = [c for c in bench.columns if c not in [*timed, "process_medians_s"]]
    assert slowed[rest].equals(bench[rest])


def test_the_default_planted_cell_has_the_median_interval_width(tmp_path):
    frames = []
    for run in (1, 2, 3):
        bench = results_frame(run)
        # widths grow with the row's place; row 0 is not ok in every run, so the median of
        # the 23 left is row 12
        half = 0.01 * (1 + np.arange(len(bench)))
        bench["ci_low_s"], bench["ci_high_s"] = (
            bench["median_s"] * (1 - half),
            bench["median_s"] * (1 + half),
        )
        frames.append(bench)
    frames[2].loc[0, "status"] = "failed"  # not ok in every run: never chosen, not counted
    chosen = gate_pairs.planted_cell(frames, None)
    assert chosen == gate_pairs.key_of(frames[0].iloc[12])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: [tmp / "run1"], "need the results folders of at least two runs"),
        (lambda tmp: [tmp / "run1", tmp / "empty"], "has no benchmarks.parquet"),
        (lambda tmp: [tmp / "run1", tmp / "nothing"], "is not a folder"),
        (lambda tmp: [tmp / "run1", tmp / "run1"], "hold the same run"),
    ],
)
def test_wrong_input_gives_a_clear_error(tmp_path, make, message):
    quiet_runs(tmp_path, 1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stopped:
        gate_pairs.main([str(p) for p in make(tmp_path)])
    assert message in str(stopped.value) and str(stopped.value).startswith("error: ")


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("torch/sort", "give LIB/OP/SIZE"),
        ("torch/sort/ten", "give LIB/OP/SIZE"),
        ("torch/sort/12345", "no such cell is ok in every run"),
    ],
)
def test_a_wrong_planted_cell_is_named(tmp_path, plant, message):
    frames = [results_frame(1), results_frame(2)]
    with pytest.raises(gate_pairs.GatePairsError, match=message):
        gate_pairs.planted_cell(frames, plant)


def test_a_planted_cell_of_several_is_refused_with_their_names():
    frames = [results_frame(run) for run in (1, 2)]
    twice = [pd.concat([f, f.assign(dtype="float32")], ignore_index=True) for f in frames]
    with pytest.raises(gate_pairs.GatePairsError, match="matches 2 cells .*float32 t1"):
        gate_pairs.planted_cell(twice, "numpy/fft/1000")
    full = gate_pairs.planted_cell(twice, "numpy/cpu/float32/t1/fft/1000")
    assert full == ("numpy", "cpu", "fft", 1000, "float32", 1)


def test_the_scenario_s_judge_finds_a_real_step_across_it_and_nothing_before(tmp_path):
    """Eight kept runs whose times move 15% cell by cell while their speedups move 2%, one
    cell 1.3x slower from run 5 on (its partner not): judged across the slowdown against
    the four runs before it, the cell is flagged in most pairs and no other cell is slower;
    the pairs before it all pass."""
    import gate_scenario
    from test_history_gate import paired_run

    out = tmp_path / "runs"
    for run in range(1, 9):
        slow = ("torch", "sort", 10000, 1.3) if run >= 5 else None
        paired_run(out / f"run{run}", run, seed=3, slow=slow)
    text = gate_scenario.judge(out, 5, planted=("torch", "sort"))
    said = re.search(
        r"planted cell flagged \(slower or suspect\) in (\d+) of 16 pairs, other "
        r"cells flagged slower or broken (\d+) times; the gate failed on the planted cell "
        r"alone in (\d+) of 16\. Before it: (\d+) of 12",
        text,
    )
    assert said, text
    caught, others, alone, failed = map(int, said.groups())
    # with four runs before the slowdown the history judges no cell: only the screen flags
    assert caught >= 12 and others == 0 and alone == 0 and failed == 0, text


def test_a_scenario_environment_has_its_own_factor_and_this_interpreter_s_packages(tmp_path):
    """The slowdown belongs to an environment: its interpreter imports this one's packages,
    and the planted operation reads the environment's factor before the file beside it."""
    import shutil
    import subprocess

    import gate_scenario

    programs = gate_scenario.environment(tmp_path / "after", 1.3)
    beside = tmp_path / "op"
    beside.mkdir()
    shutil.copy2(gate_scenario.HERE / "planted.py", beside / "planted.py")
    code = (
        "import sys, numpy; sys.path.insert(0, sys.argv[1]); import planted; "
        "print(planted.planted_factor(), numpy.__version__, sys.prefix)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def run(python: Path) -> list[str]:
        cmd = [str(python), "-c", code, str(beside)]
        return subprocess.run(
            cmd, env=env, capture_output=True, text=True, check=True
        ).stdout.split()

    (beside / "factor.txt").write_text("9.0\n")
    assert run(programs / "python") == ["1.3", np.__version__, str(tmp_path / "after")]
    # an interpreter without a factor of its own reads the file beside the operation
    assert run(Path(sys.executable))[0] == "9.0"
