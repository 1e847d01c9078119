"""compare: two constructed result sets, cell by cell, and its bad inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, constructed_results

from numbench.compare import CompareError, compare, load
from numbench.tables import BENCHMARKS_SCHEMA


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
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "compare.py"), *args],
        capture_output=True,
        text=True,
    )


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
    assert "not comparable (unsupported -> unsupported)" in set(table["change"])
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
