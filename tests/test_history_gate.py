"""compare --history: each cell judged against its own run-to-run series in the store (its
paired time over the baseline's where it has a speedup, else its time less the run's level),
screened a cell at a time and decided over all cells at once, with the gate's false-alarm
rate measured on the store's own past pairs."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_compare import cmd as compare
from test_history import VERSIONS, eight_runs, results_frame, write_results

from numbench.compare.gate import holm, moderate, trigamma_inverse


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
    assert "24 cells judged against their own run-to-run series" in proc.stdout
    assert "own 7 past pairs of consecutive runs, the gate failed 0 (0%; set to 5%)" in proc.stdout
    assert "The gate passes." in proc.stdout


def test_one_cell_slowed_1_2x_fails_the_gate_on_that_cell_alone(store_and_pair, tmp_path):
    store, old, _ = store_and_pair
    slowed = results_frame(10, slow=("jax", "fft", 10000, 1.2))
    new = write_results(tmp_path / "slowed", slowed)
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown", "--json")
    assert proc.returncode == 1, proc.stderr
    gated = json.loads(proc.stdout)["history"]
    flagged = [c for c in gated["cells"] if c["change"] not in ("same", "suspect")]
    assert [(c["library"], c["operation"], c["size"], c["change"]) for c in flagged] == [
        ("jax", "fft", 10000, "slower")
    ]
    assert gated["failed"] is True and gated["cells_judged"] == 24


def noisy_store(tmp_path):
    """A store of eight runs whose jax fft 10000 moves 15% from run to run (the rest 2%)."""
    from numbench import history

    rng = np.random.default_rng(5)
    store = tmp_path / "history"
    for run in range(1, 9):
        bench = results_frame(run, slow=("jax", "fft", 10000, float(np.exp(rng.normal(0, 0.15)))))
        history.add_results(write_results(tmp_path / f"r{run}", bench), store)
    return store


def test_a_noisy_cell_is_judged_by_its_own_wider_spread(tmp_path):
    """The same 1.2x on a cell whose runs move 15% from run to run is not called slower."""
    store = noisy_store(tmp_path)
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


def leveled(run, level, slow=None, seed=11):
    """``results_frame(run)`` with every cell times ``level`` (a machine's day)."""
    bench = results_frame(run, seed=seed, slow=slow)
    bench["median_s"] *= level
    return bench


def test_each_judged_cell_says_the_smallest_slowdown_it_could_show(store_and_pair):
    store, old, new = store_and_pair
    proc = compare(str(old), str(new), "--history", str(store), "--json")
    cells = json.loads(proc.stdout)["history"]["cells"]
    # eight runs, and the degrees of freedom the other cells' spreads lend; never below
    # the cell's own spread
    for c in cells:
        assert 7 < c["df"] <= 7 + 100 and c["spread"] >= c["raw_spread"], c
        # the screen, a cell at a time, sees less than the decision over all 24 cells
        assert 1.0 < c["screenable"] < c["detectable"], c
    # 2% from run to run over 8 runs: most cells could show a 1.2x, none less than the margin
    smallest = [c["detectable"] for c in cells]
    within = sum(s <= 1.2 for s in smallest)
    assert min(smallest) == 1.1 and within >= 18, smallest
    screened = sum(c["screenable"] <= 1.2 for c in cells)
    assert screened == 24
    text = compare(str(old), str(new), "--history", str(store)).stdout
    assert f"{screened} of the 24 cells judged would be screened at 1.2x and {within} " in text
    assert f"{float(np.median(smallest)):.3f}x for the median cell and" in text


def test_a_noisy_cell_says_it_could_not_show_a_1_2x(tmp_path):
    store = noisy_store(tmp_path)
    old = write_results(tmp_path / "old", results_frame(9))
    new = write_results(tmp_path / "new", results_frame(10))
    cells = json.loads(compare(str(old), str(new), "--history", str(store), "--json").stdout)
    noisy = next(
        c
        for c in cells["history"]["cells"]
        if (c["library"], c["operation"]) == ("jax", "fft") and c["size"] == 10000
    )
    assert noisy["detectable"] > 1.5
    within = sum(c["detectable"] <= 1.2 for c in cells["history"]["cells"])
    text = compare(str(old), str(new), "--history", str(store)).stdout
    assert f" cells judged would be screened at 1.2x and {within} flagged slower" in text
    assert within < 24


def test_the_common_shift_is_given_beside_the_history_s_days(tmp_path):
    """Runs that move as a whole by up to 10%: the pair's median cell and the history's run
    levels are printed; the verdict is the cells' own."""
    from numbench import history

    store = tmp_path / "history"
    for run, level in enumerate([0.92, 1.08, 1.0, 0.9, 1.1, 0.95, 1.05, 1.0], start=1):
        history.add_results(write_results(tmp_path / f"d{run}", leveled(run, level)), store)
    old = write_results(tmp_path / "old", leveled(9, 0.93))
    new = write_results(tmp_path / "new", leveled(10, 1.06))
    gated = json.loads(compare(str(old), str(new), "--history", str(store), "--json").stdout)
    [shift] = gated["history"]["shifts"]
    assert (shift["host"], shift["device"], shift["cells"], shift["history_runs"]) == (
        "testhost",
        "cpu",
        24,
        8,
    )
    assert 1.10 < shift["common"] < 1.18  # 1.06 / 0.93
    assert 0.85 < shift["level_low"] < 0.95 and 1.05 < shift["level_high"] < 1.15
    text = compare(str(old), str(new), "--history", str(store)).stdout
    assert "On testhost/cpu, NEW's times read 1.1" in text
    said = re.search(r"The history's 8 runs there differed as a whole by up to (1\.\d+)x", text)
    assert said and 1.12 < float(said.group(1)) < 1.3  # 1.1 / 0.9 at most, less its noise
    # the verdict is the cells' own: the runs' 8% days leave a 1.14x of every cell unflagged
    assert "The gate passes." in text
    # (a suspect is the screen's question for --confirm, one cell in five by design)
    assert {c["change"] for c in gated["history"]["cells"]} <= {"same", "suspect"}


def test_a_small_grid_gives_no_common_shift(tmp_path):
    from numbench import history
    from numbench.compare.gate import MIN_LEVEL_CELLS

    store = tmp_path / "history"
    few = lambda run: results_frame(run).head(MIN_LEVEL_CELLS - 1)  # noqa: E731
    for run in range(1, 7):
        history.add_results(write_results(tmp_path / f"s{run}", few(run)), store)
    old = write_results(tmp_path / "old", few(7))
    new = write_results(tmp_path / "new", few(8))
    gated = json.loads(compare(str(old), str(new), "--history", str(store), "--json").stdout)
    [shift] = gated["history"]["shifts"]
    assert shift["cells"] == MIN_LEVEL_CELLS - 1 and shift["common"] is None
    text = compare(str(old), str(new), "--history", str(store)).stdout
    assert f"fewer than {MIN_LEVEL_CELLS}: no common shift is given" in text


def test_run_levels_are_fitted_over_the_cells_and_not_below_ten():
    import pandas as pd

    from numbench.compare.gate import MIN_LEVEL_CELLS, run_levels

    rng = np.random.default_rng(3)
    true = np.array([0.0, 0.1, -0.05, 0.2])
    cells = rng.normal(0, 1, size=(MIN_LEVEL_CELLS, 1)) + true
    cells = cells + rng.normal(0, 0.01, (MIN_LEVEL_CELLS, 4))
    logs = pd.DataFrame(cells, columns=list("abcd"))
    assert np.allclose(run_levels(logs), true - np.median(true), atol=0.02)
    assert (run_levels(logs.iloc[: MIN_LEVEL_CELLS - 1]) == 0).all()
    # a run that lacks some cells still gets its level from those it has
    logs.iloc[:3, 3] = np.nan
    assert abs(run_levels(logs)["d"] - (0.2 - np.median(true))) < 0.03


def test_a_cell_is_flagged_just_above_its_detectable_and_not_just_below(store_and_pair, tmp_path):
    """``detectable`` is where judge() flags the cell: 1% above it the gate fails on that
    cell alone, 1% below it the gate passes."""
    store, old, new = store_and_pair
    cells = json.loads(compare(str(old), str(new), "--history", str(store), "--json").stdout)
    # the cell the gate needs most to flag (its statistics bound it, not the margin)
    cell = max(cells["history"]["cells"], key=lambda c: c["detectable"])
    key = (cell["library"], cell["operation"], cell["size"])
    assert cell["detectable"] > 1.1  # the statistics bound it, not the margin
    for factor, fails in ((1.01, True), (0.99, False)):
        slow = (*key, cell["detectable"] * factor / cell["ratio"])
        moved = write_results(tmp_path / f"moved-{factor}", results_frame(10, slow=slow))
        proc = compare(str(old), str(moved), "--history", str(store), "--json")
        flagged = [
            (c["library"], c["operation"], c["size"])
            for c in json.loads(proc.stdout)["history"]["cells"]
            if c["change"] == "slower"
        ]
        assert flagged == ([key] if fails else []), (factor, flagged)


def test_a_pair_from_a_host_the_history_lacks_is_not_judged_and_says_so(tmp_path):
    store = eight_runs(tmp_path)
    old = write_results(tmp_path / "old", results_frame(9, host="laptop"))
    new = write_results(tmp_path / "new", results_frame(10, host="laptop"))
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown", "--json")
    assert proc.returncode == 0, proc.stderr
    gated = json.loads(proc.stdout)["history"]
    assert gated["cells_judged"] == 0
    assert {c["change"] for c in gated["cells"]} == {"no history"}
    [shift] = gated["shifts"]
    assert (shift["host"], shift["cells"], shift["history_runs"]) == ("laptop", 24, 0)
    assert shift["level_low"] is None and shift["common"] is not None
    text = compare(str(old), str(new), "--history", str(store)).stdout
    assert "the history holds too few runs there to say how far its days move" in text
    assert "would be screened at" not in text


def test_an_old_run_in_a_rare_fast_mode_does_not_make_a_usual_new_one_slower(
    store_and_pair, tmp_path
):
    """OLD's jax fft 10000 ran 1.8x faster than in every run of the history (a two-mode cell's
    rarer mode: six real runs here had two such cells) and NEW is at the history's level:
    new / old alone says 1.8x slower, but NEW is not out of line with the history, so the
    gate passes. The same 1.8x in NEW, against a usual OLD, fails it."""
    store, _, new = store_and_pair
    key = ("jax", "fft", 10000)
    fast_old = write_results(tmp_path / "fast-old", results_frame(9, slow=(*key, 1 / 1.8)))
    proc = compare(str(fast_old), str(new), "--history", str(store), "--fail-on-slowdown", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    cell = next(
        c
        for c in json.loads(proc.stdout)["history"]["cells"]
        if (c["library"], c["operation"], c["size"]) == key
    )
    assert cell["ratio"] > 1.6 and cell["change"] == "same"
    old = write_results(tmp_path / "old", results_frame(9))
    slow_new = write_results(tmp_path / "slow-new", results_frame(10, slow=(*key, 1.8)))
    proc = compare(str(old), str(slow_new), "--history", str(store), "--fail-on-slowdown")
    assert proc.returncode == 1
    assert re.search(r"\| jax/cpu fft 10000 float64 t1 \| testhost \| slower \|", proc.stdout)


def spread_group(raw: list[float], runs: int = 4) -> pd.DataFrame:
    return pd.DataFrame(
        {"host": "h", "device": "cpu", "history_runs": runs, "raw_spread": raw, "log_mean": 0.0}
    )


def test_moderation_raises_a_lucky_small_spread_and_keeps_a_wide_one():
    """Thirty cells whose runs move 10% from run to run, four runs each (3 degrees of
    freedom): a cell whose four runs happened to agree within 1% is judged with nearly the
    others' spread and their lent degrees of freedom; a cell that spread 50% keeps its own."""
    rng = np.random.default_rng(3)
    raw = list(0.10 * np.sqrt(rng.chisquare(3, size=30) / 3)) + [0.01, 0.5]
    out = moderate(spread_group(raw), 10)
    lucky, wide = out.iloc[-2], out.iloc[-1]
    assert 0.06 < lucky["spread"] < 0.12, lucky
    assert wide["spread"] == pytest.approx(0.5)
    assert (out["df"] > 3).all() and (out["spread"] >= out["raw_spread"]).all()


def test_moderation_needs_ten_cells():
    raw = [0.01, 0.2, 0.05] * 3  # nine cells
    out = moderate(spread_group(raw), 10)
    assert list(out["spread"]) == pytest.approx(raw) and (out["df"] == 3).all()


def test_trigamma_inverse():
    from scipy import special

    for y in (0.3, 1.0, 5.0, 50.0):
        assert trigamma_inverse(float(special.polygamma(1, y))) == pytest.approx(y, rel=1e-6)


def test_a_cell_is_screened_just_above_its_screenable_and_not_just_below(store_and_pair, tmp_path):
    """``screenable`` is where the screen lets a cell through: 1% above it the cell is a
    suspect (named, measured again with --confirm) and the gate still passes without
    --confirm; 1% below it the cell is the same speed."""
    store, old, new = store_and_pair
    cells = json.loads(compare(str(old), str(new), "--history", str(store), "--json").stdout)
    cell = max(cells["history"]["cells"], key=lambda c: c["screenable"])
    key = (cell["library"], cell["operation"], cell["size"])
    assert cell["screenable"] < cell["detectable"]
    for factor, suspect in ((1.01, True), (0.99, False)):
        slow = (*key, cell["screenable"] * factor / cell["ratio"])
        moved = write_results(tmp_path / f"screened-{factor}", results_frame(10, slow=slow))
        proc = compare(
            str(old), str(moved), "--history", str(store), "--fail-on-slowdown", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        got = next(
            c
            for c in json.loads(proc.stdout)["history"]["cells"]
            if (c["library"], c["operation"], c["size"]) == key
        )
        assert (got["change"] == "suspect") is suspect, (factor, got["change"])


PAIRED_LIBRARIES = ("jax", "torch", "numba")


def paired_run(folder, run, seed=0, slow=None, numpy_version=None):
    """A results folder whose absolute times move 15% cell by cell from run to run (a shared
    machine's minutes), while each cell's speedup over its lockstep NumPy partner moves 2%
    (what lockstep gives): benchmarks.parquet and speedups.parquet. ``slow``: (library,
    operation, size, factor): that cell slower by the factor, its partner not."""
    rng = np.random.default_rng([seed, run, 7])
    versions = {"numpy": numpy_version} if numpy_version else None
    bench = results_frame(run, seed=seed, versions=versions and {**VERSIONS, **versions})
    bench["median_s"] *= np.exp(rng.normal(0.0, 0.15, len(bench)))
    bench["paired_with"] = np.where(bench["library"] == "numpy", None, "numpy/cpu")
    speedups = bench[bench["library"].isin(PAIRED_LIBRARIES)][
        ["library", "device", "operation", "size", "dtype", "threads", "host"]
    ].copy()
    speedups["speedup"] = 1.5 * np.exp(rng.normal(0.0, 0.02, len(speedups)))
    if slow:
        for frame, column, by in ((bench, "median_s", slow[3]), (speedups, "speedup", 1 / slow[3])):
            rows = (
                (frame["library"] == slow[0])
                & (frame["operation"] == slow[1])
                & (frame["size"] == slow[2])
            )
            frame.loc[rows, column] *= by
    speedups["speedup_ci_low"] = speedups["speedup"] * 0.97
    speedups["speedup_ci_high"] = speedups["speedup"] * 1.03
    speedups["paired"], speedups["verdict"] = True, "faster"
    write_results(folder, bench)
    speedups.to_parquet(folder / "speedups.parquet", index=False)
    return folder


@pytest.fixture
def paired_store(tmp_path):
    from numbench import history

    store = tmp_path / "paired-history"
    for run in range(1, 9):
        history.add_results(paired_run(tmp_path / f"p{run}", run), store)
    return store


def test_a_paired_cell_s_1_2x_is_caught_though_its_times_move_15_percent(paired_store, tmp_path):
    key = ("torch", "sort", 10000)
    old = paired_run(tmp_path / "old", 9)
    same = paired_run(tmp_path / "same", 10)
    proc = compare(str(old), str(same), "--history", str(paired_store), "--fail-on-slowdown")
    assert proc.returncode == 0 and "The gate passes." in proc.stdout, proc.stdout[-3000:]
    assert "18 by their paired time over the baseline's lockstep process, 6 by" in proc.stdout
    slowed = paired_run(tmp_path / "slowed", 10, slow=(*key, 1.2))
    proc = compare(
        str(old), str(slowed), "--history", str(paired_store), "--fail-on-slowdown", "--json"
    )
    assert proc.returncode == 1, proc.stderr
    cells = json.loads(proc.stdout)["history"]["cells"]
    flagged = [c for c in cells if c["change"] == "slower"]
    assert [(c["library"], c["operation"], c["size"], c["statistic"]) for c in flagged] == [
        (*key, "paired")
    ]
    assert flagged[0]["ratio"] == pytest.approx(1.2, rel=0.1)


def test_absolute_times_alone_cannot_see_the_same_1_2x(paired_store, tmp_path):
    """The same runs handed over without their speedups: each cell is judged by its time
    less the run's level, whose 15% spread hides the 1.2x."""
    key = ("torch", "sort", 10000)
    old = paired_run(tmp_path / "old", 9)
    slowed = paired_run(tmp_path / "slowed", 10, slow=(*key, 1.2))
    (slowed / "speedups.parquet").unlink()
    proc = compare(str(old), str(slowed), "--history", str(paired_store), "--json")
    cell = next(
        c
        for c in json.loads(proc.stdout)["history"]["cells"]
        if (c["library"], c["operation"], c["size"]) == key
    )
    assert cell["statistic"] == "shifted" and cell["change"] != "slower"
    assert cell["detectable"] > 1.3


def test_a_new_baseline_version_is_said_and_its_partners_judged_by_their_times(
    paired_store, tmp_path
):
    old = paired_run(tmp_path / "old", 9)
    new = paired_run(tmp_path / "new", 10, numpy_version="2.5.0")
    proc = compare(str(old), str(new), "--history", str(paired_store), "--json")
    gated = json.loads(proc.stdout)["history"]
    assert gated["baseline_changes"] == {"testhost": "numpy 2.4.6 to 2.5.0"}
    assert {c["statistic"] for c in gated["cells"]} == {"shifted"}
    text = compare(str(old), str(new), "--history", str(paired_store)).stdout
    assert "On testhost the baseline changed version (numpy 2.4.6 to 2.5.0)" in text


def test_changes_finds_a_step_in_the_paired_series_that_the_times_hide(tmp_path):
    """Eight runs whose times move 15% cell by cell; torch sort 10000 1.2x slower from run 5
    on, its NumPy partner not: its paired series steps at run 5, its times show none, and
    no other cell steps. ``history show`` lists the paired series beside the times."""
    from test_history import cli

    from numbench import history

    store = tmp_path / "stepped"
    key = ("torch", "sort", 10000)
    for run in range(1, 9):
        slow = (*key, 1.2) if run >= 5 else None
        history.add_results(paired_run(tmp_path / f"s{run}", run, slow=slow), store)
    found = json.loads(cli("changes", "--store", str(store), "--json").stdout)
    steps = [
        (s["library"], s["operation"], s["size"], s["measure"], s["run_number"]) for s in found
    ]
    assert steps == [(*key, "paired", 5)]
    assert found[0]["after_paired"] / found[0]["before_paired"] == pytest.approx(1.2, rel=0.05)
    text = cli("changes", "--store", str(store)).stdout
    assert "the baseline's time" in text
    shown = cli("show", "--store", str(store), "--library", "torch", "--operation", "sort")
    assert "paired: over the baseline" in shown.stdout
    # 1 / 1.5 before the slowdown, 1.2 / 1.5 after: each run's own 2% about it
    assert re.search(r" 0\.6[4-9]\dx ", shown.stdout) and re.search(r" 0\.[78]\d\dx ", shown.stdout)


def test_the_site_draws_the_paired_series_below_the_times(tmp_path):
    from numbench import history
    from numbench.history import read
    from numbench.site import site_frames
    from numbench.site.pages import group_chart

    store = tmp_path / "drawn"
    for run in range(1, 5):
        history.add_results(paired_run(tmp_path / f"d{run}", run), store)
    _, cells, found = site_frames(read(store), 1.1)
    group = cells[(cells["operation"] == "sort") & (cells["size"] == 10000)]
    spec = group_chart(group, found.iloc[0:0])
    rows = spec["vconcat"]
    assert len(rows) == 2
    titles = [layer["encoding"]["y"]["axis"]["title"] for r in rows for layer in r["layer"][1:2]]
    assert titles == ["time per call (s)", "time over the baseline's, paired"]
    points = sorted(
        (k for k in spec["datasets"] if k.startswith("points-")), key=lambda k: int(k[7:])
    )
    paired_data = spec["datasets"][points[-1]]
    # numpy has no partner: only the three paired libraries, 4 runs each, at 1 / 1.5
    assert len(paired_data) == 3 * 4
    assert all(0.6 < p["median_s"] < 0.72 for p in paired_data)


def test_a_looser_screen_names_more_suspects_and_screens_smaller_slowdowns(store_and_pair):
    store, old, new = store_and_pair
    got = {}
    for level in ("0.05", "0.5"):
        proc = compare(
            str(old), str(new), "--history", str(store), "--json", "--screen-level", level
        )
        assert proc.returncode == 0, proc.stderr
        got[level] = json.loads(proc.stdout)["history"]
    assert got["0.5"]["screen_level"] == 0.5 and got["0.05"]["screen_level"] == 0.05
    assert got["0.5"]["suspects"] > got["0.05"]["suspects"]
    loose = {(c["library"], c["operation"], c["size"]): c for c in got["0.5"]["cells"]}
    for c in got["0.05"]["cells"]:
        assert loose[(c["library"], c["operation"], c["size"])]["screenable"] < c["screenable"]
    text = compare(str(old), str(new), "--history", str(store), "--screen-level", "0.5").stdout
    assert "Screened at 0.5 a cell" in text


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            ["--history", "HISTORY", "--screen-level", "1.5"],
            "--screen-level must lie between 0 and 1, not 1.5",
        ),
        (["--screen-level", "0.2"], "--screen-level is the history's screen: give --history too"),
    ],
)
def test_a_wrong_screen_level_is_refused_naming_it(store_and_pair, extra, said):
    store, old, new = store_and_pair
    args = [str(store) if a == "HISTORY" else a for a in extra]
    proc = compare(str(old), str(new), *args)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr


def test_a_store_s_past_pairs_are_judged_once_a_process_and_again_when_it_changes(
    store_and_pair, monkeypatch
):
    """``past_pairs`` remembers its answer by the store's content: a script gating many pairs
    against one store judges its past pairs once; a store whose cells differ is judged anew."""
    from numbench import history
    from numbench.compare import gate

    store, old, new = store_and_pair
    read = history.read(store)
    judged = []
    real = gate._judge_past_pairs
    monkeypatch.setattr(gate, "_judge_past_pairs", lambda s, m: judged.append(m) or real(s, m))
    monkeypatch.setattr(gate, "_PAST_PAIRS", {})
    first = gate.gate(old, new, read, 1.1)
    again = gate.gate(old, new, history.read(store), 1.1)
    assert (first.past_pairs, first.past_failed) == (again.past_pairs, again.past_failed) == (7, 0)
    assert judged == [1.1]
    gate.gate(old, new, read, 1.2)  # another margin: judged for it
    assert judged == [1.1, 1.2]
    read.cells.loc[read.cells.index[0], "median_s"] *= 3  # one cell of one run moved
    gate.gate(old, new, read, 1.1)
    assert judged == [1.1, 1.2, 1.1]


def two_mode_run(folder, run, speedup=1.5, width=0.35):
    """A paired run (``paired_run``) whose torch sort 10000 has the speedup ``speedup`` and
    an interval ``width`` either side of it: a cell whose processes land in one of two modes
    runs with a wide interval where its rounds drew both, a narrow one where they agreed."""
    paired_run(folder, run)
    path = folder / "speedups.parquet"
    frame = pd.read_parquet(path)
    rows = (frame["library"] == "torch") & (frame["operation"] == "sort") & (frame["size"] == 10000)
    frame.loc[rows, "speedup"] = speedup
    frame.loc[rows, "speedup_ci_low"] = speedup * (1 - width)
    frame.loc[rows, "speedup_ci_high"] = speedup * (1 + width)
    frame.to_parquet(path, index=False)
    return folder


def test_two_rounds_that_agree_by_chance_are_suspect_not_slower(tmp_path):
    """A two-mode cell's history runs have wide intervals; NEW drew two processes of its slow
    mode, 1.35x, whose narrow interval alone would make the decision call it slower. The
    decision takes NEW's error as at least the cell's usual one, so the cell is a suspect
    for --confirm, and the gate passes without it."""
    from numbench import history

    store = tmp_path / "history"
    for run in range(1, 9):
        history.add_results(two_mode_run(tmp_path / f"h{run}", run), store)
    old = two_mode_run(tmp_path / "old", 9, width=0.03)
    new = two_mode_run(tmp_path / "new", 10, speedup=1.5 / 1.35, width=0.03)
    proc = compare(str(old), str(new), "--history", str(store), "--fail-on-slowdown", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    cell = next(
        c
        for c in json.loads(proc.stdout)["history"]["cells"]
        if (c["library"], c["operation"], c["size"]) == ("torch", "sort", 10000)
    )
    assert cell["change"] == "suspect" and cell["ratio"] == pytest.approx(1.35, rel=0.02)
