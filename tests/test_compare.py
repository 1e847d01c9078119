"""compare: two constructed result sets, cell by cell, and its bad inputs."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import constructed_results

from numbench.cli import main
from numbench.compare.runs import (
    DEFAULT_PROCESS_SD,
    MIN_SPREAD_CELLS,
    RUN_SD,
    compare,
    load,
    process_medians,
    process_spread,
)
from numbench.contract import BENCHMARKS_SCHEMA
from numbench.stats import Z95, CompareError, check_margin


def write(bench: pd.DataFrame, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(bench, schema=BENCHMARKS_SCHEMA, preserve_index=False)
    pq.write_table(table, folder / "benchmarks.parquet")
    return folder


def scaled(bench: pd.DataFrame, factor: float, where) -> pd.DataFrame:
    """The same cells, with the cells selected by ``where`` ``factor`` times slower."""
    out = bench.copy()
    mask = where(out)
    for col in ("median_s", "ci_low_s", "ci_high_s"):
        out.loc[mask, col] = out.loc[mask, col] * factor
    return out


def cmd(*args: str) -> subprocess.CompletedProcess:
    """``numbench compare ARGS`` as the command runs it (``numbench.cli.main``), in this
    process: its exit status and what it printed. A fresh interpreter a call cost a second of
    CPU each; the command's start as a process of its own is checked end to end (test_confirm's
    e2e test runs ``python -m numbench compare``)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["compare", *args])
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


@pytest.fixture
def bench() -> pd.DataFrame:
    return constructed_results()[0]


def test_a_constructed_slowdown_is_found_and_sorted_first(bench):
    is_torch_fft = lambda d: (d["library"] == "torch") & (d["operation"] == "fft")  # noqa: E731
    new = scaled(bench, 1.5, is_torch_fft)
    new = scaled(new, 1.03, lambda d: d["library"] == "numpy")  # within the margin
    table = compare(bench, new, margin=1.1)
    ok = table[table["ratio"].notna()]
    slower = ok[ok["change"] == "slower"]
    assert set(zip(slower["library"], slower["operation"])) == {("torch", "fft")}
    assert slower["ratio"].round(6).eq(1.5).all()
    assert (slower["ci_low"] < 1.5).all() and (slower["ci_high"] > 1.5).all()
    numpy = ok[ok["library"] == "numpy"]
    assert (numpy["change"] == "same").all()  # 3% is the same speed within 1.1
    assert list(table["change"].iloc[: len(slower)]) == ["slower"] * len(slower)
    # the unmeasured cells are listed, not dropped
    unmeasured = table[table["status_old"] == "unsupported"]
    assert set(unmeasured["change"]) == {"not comparable"}
    assert len(table) == len(bench)


def test_a_to_a_is_the_same_everywhere(bench):
    table = compare(bench, bench, margin=1.1)
    ok = table[table["ratio"].notna()]
    assert (ok["change"] == "same").all() and (ok["ratio"] == 1.0).all()


def test_cells_on_one_side_only_are_listed(bench):
    new = bench[bench["operation"] != "sort"]
    table = compare(bench, new, margin=1.1)
    only = table[table["change"] == "only in old"]
    assert set(only["operation"]) == {"sort"} and len(only) == (bench["operation"] == "sort").sum()


def test_command_exits_1_on_a_slowdown_with_the_flag(bench, tmp_path):
    old = write(bench, tmp_path / "old" / "results")
    slow = scaled(bench, 2.0, lambda d: d["library"] == "jax")
    new = write(slow, tmp_path / "new" / "results")
    proc = cmd(str(old), str(new / "benchmarks.parquet"), "--output", str(tmp_path / "c.md"))
    assert proc.returncode == 0, proc.stderr
    assert "| jax | cpu | fft | 1000 | float64 | 1 | 2.000 |" in proc.stdout
    assert (tmp_path / "c.md").read_text() == proc.stdout.rstrip("\n") + "\n"
    proc = cmd(str(old), str(new), "--fail-on-slowdown")
    assert proc.returncode == 1 and "slower beyond 1.1x" in proc.stderr
    assert cmd(str(old), str(old), "--fail-on-slowdown").returncode == 0


@pytest.mark.parametrize(
    "make_bad, message",
    [
        (lambda p: p.mkdir(), "has no benchmarks.parquet"),
        (lambda p: None, "does not exist"),
        (lambda p: p.write_bytes(b"not parquet at all"), "cannot read"),
    ],
    ids=["empty-folder", "missing", "corrupt"],
)
def test_bad_input_is_named_without_a_traceback(bench, tmp_path, make_bad, message):
    good = write(bench, tmp_path / "good")
    bad = tmp_path / "bad"
    make_bad(bad)
    proc = cmd(str(good), str(bad))
    assert proc.returncode == 2
    assert message in proc.stderr and str(bad) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_grids_that_do_not_overlap_are_an_error(bench, tmp_path):
    a = write(bench[bench["operation"] == "fft"], tmp_path / "a")
    b = write(bench[bench["operation"] == "sort"], tmp_path / "b")
    proc = cmd(str(a), str(b))
    assert proc.returncode == 2 and "share no cell" in proc.stderr
    with pytest.raises(CompareError, match="lacks"):
        pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "x.parquet")
        load(tmp_path / "x.parquet")


@pytest.mark.parametrize("status", ["crashed", "failed", "timeout", "mismatch"])
def test_ok_to_anything_else_is_a_regression_listed_first_and_gated(bench, tmp_path, status):
    is_cell = (
        (bench["library"] == "numpy") & (bench["operation"] == "sort") & (bench["size"] == 1000)
    )
    new = bench.copy()
    new.loc[is_cell, "status"] = status
    new.loc[is_cell, ["median_s", "ci_low_s", "ci_high_s"]] = None
    new.loc[is_cell, "error"] = f"the worker ended {status}"
    table = compare(bench, new, margin=1.1)
    first = table.iloc[0]
    assert (first["library"], first["operation"], first["size"]) == ("numpy", "sort", 1000)
    assert first["change"] == "broken" and first["status_new"] == status
    assert (table["change"] == "broken").sum() == 1
    old, new_dir = write(bench, tmp_path / "old"), write(new, tmp_path / "new")
    proc = cmd(str(old), str(new_dir))
    assert proc.returncode == 0, proc.stderr
    assert f"| broken (ok -> {status}) |" in proc.stdout and "1 broken" in proc.stdout
    proc = cmd(str(old), str(new_dir), "--fail-on-slowdown")
    assert proc.returncode == 1 and "1 cell(s) broken" in proc.stderr


def test_a_cell_that_was_not_ok_and_is_ok_now_is_no_regression(bench, tmp_path):
    new = bench.copy()
    new.loc[new["status"] != "ok", ["status"]] = "ok"
    table = compare(bench, new, margin=1.1)
    assert "broken" not in set(table["change"])
    old, new_dir = write(bench, tmp_path / "old"), write(new, tmp_path / "new")
    assert cmd(str(old), str(new_dir), "--fail-on-slowdown").returncode == 0


def with_settings(bench: pd.DataFrame, timing: str) -> pd.DataFrame:
    """The table with a ``timing_settings`` column, as a numbench that records it writes."""
    return bench.assign(timing_settings=timing)


def write_any(frame: pd.DataFrame, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(folder / "benchmarks.parquet", index=False)
    return folder


def test_cells_measured_differently_are_marked_and_the_differences_printed_first(bench, tmp_path):
    old = with_settings(bench, '{"min_sample_time_s":0.01}')
    new = with_settings(bench, '{"min_sample_time_s":0.01}')
    is_torch = new["library"] == "torch"
    new.loc[is_torch, "library_version"] = "2.14.0"
    new.loc[new["operation"] == "fft", "timing_settings"] = '{"min_sample_time_s":0.1}'
    new["host"] = "otherhost"
    table = compare(old, new, margin=1.1)
    both = table[table["change"] != "only in old"]
    torch_fft = both[(both["library"] == "torch") & (both["operation"] == "fft")]
    assert not torch_fft["alike"].any()
    assert all(d == ["library_version", "timing_settings"] for d in torch_fft["differs"])
    numpy_sort = both[(both["library"] == "numpy") & (both["operation"] == "sort")]
    assert numpy_sort["alike"].all() and all(d == [] for d in numpy_sort["differs"])
    # the same tables but the ratio stands: not alike is a mark, not a verdict
    assert (both.loc[both["ratio"].notna(), "change"] == "same").all()

    proc = cmd(str(write_any(old, tmp_path / "a")), str(write_any(new, tmp_path / "b")))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    above = out[: out.index("| library |")]
    assert "The two environments differ" in above
    assert "| host | testhost | otherhost |" in above
    assert "| library_version (torch) | 2.13.0 | 2.14.0 |" in above
    assert "timing_settings" in above and "library_version (numpy)" not in above
    assert "| no: library_version, timing_settings |" in out
    assert "were not measured alike" in out


def test_alike_environments_say_so(bench, tmp_path):
    folder = write(bench, tmp_path / "a")
    proc = cmd(str(folder), str(folder))
    assert "The two environments are alike" in proc.stdout
    assert "not measured alike" not in proc.stdout


def test_json_for_ci_holds_the_table_and_the_differences(bench, tmp_path):
    old = write(bench, tmp_path / "old")
    slow = scaled(bench, 2.0, lambda d: d["library"] == "jax")
    slow.loc[slow["library"] == "jax", "library_version"] = "0.11.0"
    new = write(slow, tmp_path / "new")
    proc = cmd(str(old), str(new), "--json", "--output", str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc == json.loads((tmp_path / "c.json").read_text())
    assert doc["margin"] == 1.1 and doc["counts"]["slower"] == doc["regressions"] > 0
    assert {"what": "library_version (jax)", "old": ["0.10.2"], "new": ["0.11.0"]} in doc[
        "environment_differences"
    ]
    cells = doc["cells"]
    assert len(cells) == len(bench)
    slower = [c for c in cells if c["change"] == "slower"]
    assert {c["library"] for c in slower} == {"jax"}
    assert all(c["ratio"] == pytest.approx(2.0) and c["ci_low"] < 2 < c["ci_high"] for c in slower)
    assert all(c["alike"] is False and c["differs"] == ["library_version"] for c in slower)
    unmeasured = [c for c in cells if c["status_old"] != "ok"]
    assert unmeasured and all(c["ratio"] is None for c in unmeasured)
    proc = cmd(str(old), str(new), "--json", "--fail-on-slowdown")
    assert proc.returncode == 1 and json.loads(proc.stdout)["regressions"] > 0


@pytest.mark.parametrize("margin", ["nan", "inf", "-inf", "0.9", "0", "abc"])
def test_the_margin_must_be_a_finite_number_of_at_least_1(bench, tmp_path, margin):
    folder = write(bench, tmp_path / "a")
    proc = cmd(str(folder), str(folder), "--margin", margin)
    assert proc.returncode == 2, proc.stdout
    assert "--margin" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(CompareError, match="margin"):
        compare(bench, bench, margin=float(margin) if margin != "abc" else margin)


def test_a_margin_of_1_is_allowed():
    assert check_margin("1") == 1.0 and check_margin(1.25) == 1.25


def test_a_side_that_repeats_a_cell_or_holds_text_for_times_is_refused(bench, tmp_path):
    good = write(bench, tmp_path / "good")
    twice = write_any(pd.concat([bench, bench.iloc[[0]]]), tmp_path / "twice")
    proc = cmd(str(good), str(twice))
    assert (
        proc.returncode == 2 and "repeated cells" in proc.stderr and "Traceback" not in proc.stderr
    )
    text = write_any(bench.assign(median_s="fast"), tmp_path / "text")
    proc = cmd(str(good), str(text))
    assert proc.returncode == 2 and "must hold numbers" in proc.stderr


def test_markdown_keeps_data_text_inert(bench, tmp_path):
    """A result set from elsewhere: its names and versions stay text in the Markdown."""
    new = bench.assign(library_version="<img src=x onerror=alert(1)> | [x](https://e.x)")
    proc = cmd(str(write(bench, tmp_path / "a")), str(write(new, tmp_path / "b")))
    assert proc.returncode == 0, proc.stderr
    assert "\\<img" in proc.stdout and "<img" not in proc.stdout.replace("\\<img", "")
    assert "\\[x\\](https://e.x)" in proc.stdout


# -- the interval: run-to-run variance --------------------------------------------------------
def drawn_grid(rng, cells: int = 200, processes: int = 2, spread: float = 0.025, shift=0.0):
    """A side of ``cells`` cells, each the median of ``processes`` process medians drawn
    around the cell's true time with a log-normal spread between processes (``spread``)
    and a whole-run ``shift``; its own interval is the processes' range, as the two-level
    bootstrap over 2 processes about gives."""
    true = np.exp(np.linspace(np.log(1e-5), np.log(1e-1), cells))
    rows = []
    for i, t in enumerate(true):
        medians = t * np.exp(shift + rng.normal(0.0, spread, processes))
        rows.append(
            {
                "library": "jax",
                "device": "cpu",
                "operation": "op",
                "size": i + 1,
                "dtype": "float64",
                "threads": 1,
                "status": "ok",
                "median_s": float(np.exp(np.log(medians).mean())),
                "ci_low_s": float(medians.min()),
                "ci_high_s": float(medians.max()),
                "n_processes": processes,
                "process_medians_s": json.dumps([float(m) for m in medians]),
            }
        )
    return pd.DataFrame(rows)


def with_cell(grid: pd.DataFrame, median: float, half: float, processes: int = 2):
    """``grid`` with its first cell at ``median``, its interval ``median * (1 +- half)``."""
    out = grid.copy()
    out.loc[0, ["median_s", "ci_low_s", "ci_high_s"]] = [
        median,
        median / (1 + half),
        median * (1 + half),
    ]
    out.loc[0, "process_medians_s"] = json.dumps([median] * processes)
    out.loc[0, "n_processes"] = processes
    return out


def first_cell(table: pd.DataFrame) -> pd.Series:
    return table[table["size"] == 1].iloc[0]


def test_the_floor_widens_an_interval_narrower_than_the_runs_spread():
    rng = np.random.default_rng(5)
    old = with_cell(drawn_grid(rng), 1e-3, 0.001)
    new = with_cell(drawn_grid(rng), 1e-3, 0.001)
    spreads = {"old": process_spread(old)["cpu"], "new": process_spread(new)["cpu"]}
    assert all(s["source"] == "measured" and 0.015 < s["sd"] < 0.035 for s in spreads.values())
    cell = first_cell(compare(old, new, margin=1.1))
    se = math.hypot(*(math.hypot(s["sd"] / math.sqrt(2), RUN_SD) for s in spreads.values()))
    assert cell["floored"] and cell["ci_floor"] == pytest.approx(math.expm1(Z95 * se))
    assert cell["ci_low"] == pytest.approx(math.exp(-Z95 * se))
    assert cell["ci_high"] == pytest.approx(math.exp(Z95 * se))
    # each side's own interval alone (the rule before) is the narrow one
    alone = first_cell(compare(old, new, margin=1.1, run_to_run=False))
    assert alone["ci_high"] < 1.002 and not alone["floored"]
    assert cell["ci_high"] > 1.02


def test_a_cell_whose_own_interval_is_wider_keeps_it():
    rng = np.random.default_rng(6)
    old = with_cell(drawn_grid(rng), 1e-3, 0.30)
    new = with_cell(drawn_grid(rng), 1.3e-3, 0.30)
    cell = first_cell(compare(old, new, margin=1.1))
    own = math.log(1.3**2) / (2 * Z95)  # each side's standard error from its interval
    se = math.hypot(math.hypot(own, RUN_SD), math.hypot(own, RUN_SD))
    assert not cell["floored"]
    assert cell["ci_low"] == pytest.approx(1.3 * math.exp(-Z95 * se))
    assert cell["ci_high"] == pytest.approx(1.3 * math.exp(Z95 * se))
    assert cell["change"] == "same"  # 1.3x, but its interval holds 1


def test_a_table_without_process_medians_takes_the_default_spread():
    rng = np.random.default_rng(7)
    old = with_cell(drawn_grid(rng), 1e-3, 0.001).drop(columns=["process_medians_s", "n_processes"])
    new = with_cell(drawn_grid(rng), 1e-3, 0.001).drop(columns=["process_medians_s"])
    spread = process_spread(old)["cpu"]
    assert spread == {"sd": DEFAULT_PROCESS_SD, "cells": 0, "source": "default"}
    assert process_spread(new)["cpu"]["source"] == "default"
    cell = first_cell(compare(old, new, margin=1.1))
    # old: no process count either, so 1 process (the widest floor); new: its n_processes
    floors = (
        math.hypot(DEFAULT_PROCESS_SD, RUN_SD),
        math.hypot(DEFAULT_PROCESS_SD / math.sqrt(2), RUN_SD),
    )
    assert cell["floored"]
    assert cell["ci_high"] == pytest.approx(math.exp(Z95 * math.hypot(*floors)))
    # so does a side with too few cells of 2 or more processes to measure its own
    few = drawn_grid(rng, cells=MIN_SPREAD_CELLS - 1)
    assert process_spread(few)["cpu"]["source"] == "default"
    assert process_spread(drawn_grid(rng, cells=MIN_SPREAD_CELLS))["cpu"]["source"] == "measured"


@pytest.mark.parametrize("value", ["[1e-3, -1]", "not json", '{"a": 1}', "[true, 1e-3]", None])
def test_process_medians_from_elsewhere_that_are_not_a_list_of_times_are_ignored(value):
    assert process_medians(value) == []
    assert process_medians("[1e-3, 2e-3]") == [1e-3, 2e-3]


def test_an_a_to_a_with_the_runs_spread_and_drift_gives_no_slowdown():
    """Two runs of the same code, the second 4% slower as a whole (the machine's drift
    between runs) with a spread between processes as measured on the default grid: each
    side's own interval alone calls cells slower; with run-to-run variance, none."""
    rng = np.random.default_rng(11)
    old, new = drawn_grid(rng, spread=0.03), drawn_grid(rng, spread=0.03, shift=0.04)
    before = compare(old, new, margin=1.1, run_to_run=False)
    after = compare(old, new, margin=1.1)
    assert (before["change"] == "slower").sum() >= 3
    assert (after["change"] == "slower").sum() == 0 and (after["change"] == "faster").sum() == 0
    # what the floor costs: a slowdown of 1.5x of a cell is still found
    slow = with_cell(new, old.loc[0, "median_s"] * 1.5, 0.02)
    assert first_cell(compare(old, slow, margin=1.1))["change"] == "slower"


def test_the_json_and_markdown_give_the_floor_and_each_sides_spread(tmp_path):
    rng = np.random.default_rng(12)
    old = write_any(drawn_grid(rng), tmp_path / "old")
    new = write_any(drawn_grid(rng).drop(columns=["process_medians_s"]), tmp_path / "new")
    proc = cmd(str(old), str(new), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["run_sd"] == RUN_SD and 0.9 < doc["median_ratio"] < 1.1
    assert doc["median_ratio_cells"] == 200 == len(doc["cells"])
    measured = doc["process_sd"]["old"]["cpu"]
    assert measured["source"] == "measured" and measured["cells"] == 200
    assert 0.015 < measured["sd"] < 0.035
    assert doc["process_sd"]["new"]["cpu"] == {
        "sd": DEFAULT_PROCESS_SD,
        "cells": 0,
        "source": "default",
    }
    cells = doc["cells"]
    assert all(c["ci_floor"] > 0 and isinstance(c["floored"], bool) for c in cells)
    assert any(c["floored"] for c in cells)
    proc = cmd(str(old), str(new))
    above = proc.stdout[: proc.stdout.index("| library |")]
    assert "includes run-to-run variance" in above and "A/A" not in above
    assert f"| old | cpu | {measured['sd']:.4f} | measured over 200 cells |" in above
    assert "| new | cpu | " + f"{DEFAULT_PROCESS_SD:.4f} | default (0 cells" in above
    assert "| ratio | 95% CI | floor | change |" in proc.stdout


def test_the_markdown_is_worded_by_report_from_the_comparison(bench, tmp_path):
    """compare.report words what compare.runs compared, in this process (the command tests
    above read the same text through the CLI): the head, the table, data text kept inert."""
    from numbench.compare.report import markdown
    from numbench.compare.runs import comparison

    new = scaled(bench, 1.5, lambda b: b["library"] == "jax").assign(
        library_version="<b>x</b> | [y](https://e.x)"
    )
    text = markdown(comparison(write(bench, tmp_path / "a"), write(new, tmp_path / "b"), 1.1))
    assert "| ratio | 95% CI | floor | change |" in text
    assert "slower" in text and "jax" in text
    assert "\\<b>x\\</b>" in text and "<b>" not in text.replace("\\<b>", "")
    assert "\\[y\\](https://e.x)" in text
