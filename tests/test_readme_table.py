"""benchmarks/readme_table.py: the README's first table, from a constructed results folder.

The script prints what a run measured for a fixed list of cells, with the run's date and
machine under it, and rewrites only the README's marked block: checked here on the
constructed results of conftest.py, whose truth is known (``CONSTRUCTED_SPEEDUPS``)."""

from __future__ import annotations

import sys

import pytest
import yaml
from conftest import REPO, constructed_results

sys.path.insert(0, str(REPO / "benchmarks"))

import readme_table  # noqa: E402
from readme_table import END, START, Row  # noqa: E402

ROWS = (
    Row("fft", 100_000, "torch", "real input"),  # constructed 4x faster
    Row("sort", 1_000, "torch"),  # constructed 2x slower
    Row("fft", 1_000, "jax"),  # 1.5x
    Row("sort", 1_000, "jax"),  # unsupported
    Row("matmul", 250, "jax"),  # not in the folder at all
)


@pytest.fixture
def folder(tmp_path):
    bench, speedups, _ = constructed_results()
    speedups.to_parquet(tmp_path / "speedups.parquet")
    bench.to_parquet(tmp_path / "benchmarks.parquet")
    return tmp_path


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows by '<operation> <size> <library>'."""
    out = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[" ".join(cells[:3])] = cells[3:]
    return out


def test_the_table_shows_each_cell_s_speedup_interval_and_verdict(folder):
    text = readme_table.table(folder, ROWS)
    rows = _rows(text)
    assert "speedup over NumPy" in text
    fast = rows["`fft` (real input) n = 1e5 PyTorch"]
    assert 3.6 < float(fast[0]) < 4.4
    low, high = (float(x) for x in fast[1].split(" to "))
    assert low < float(fast[0]) < high
    assert fast[2] == "faster"
    slow = rows["`sort` n = 1e3 PyTorch"]
    assert 0.45 < float(slow[0]) < 0.55 and slow[2] == "slower"
    assert rows["`fft` n = 1e3 JAX"][2] == "faster"
    # a cell that did not measure, and one the run never had, keep their rows
    assert rows["`sort` n = 1e3 JAX"] == ["–", "", "not measured (unsupported)"]
    assert rows["`matmul` n = 250 JAX"] == ["–", "", "not measured"]
    # rows in the order asked for
    assert [k.split()[0] for k in rows] == ["`fft`", "`sort`", "`fft`", "`sort`", "`matmul`"]


def test_the_stamp_names_the_run_s_date_machine_and_versions(folder):
    text = readme_table.table(folder, ROWS).strip()
    assert all(
        len(line) <= readme_table.LINE_LENGTH for line in text.split("\n\n")[-1].splitlines()
    )
    stamp = " ".join(text.split("\n\n")[-1].splitlines())
    assert stamp.startswith("From a run of 2026-01-01 on Test CPU 9000, 16 CPUs, 126 GiB")
    assert "Python 3.11.2" in stamp
    assert "NumPy 2.4.6, JAX 0.10.2, PyTorch 2.13.0" in stamp
    assert stamp.endswith("Verdicts at a margin of 1.1.")
    assert "testhost" not in stamp


def test_a_verdict_in_doubt_says_so(folder):
    import pandas as pd

    speedups = pd.read_parquet(folder / "speedups.parquet")
    speedups["settled"] = False
    speedups.to_parquet(folder / "speedups.parquet")
    rows = _rows(readme_table.table(folder, ROWS[:1]))
    assert rows["`fft` (real input) n = 1e5 PyTorch"][2] == "faster, in doubt"


def test_a_folder_of_several_hosts_must_name_one(folder):
    import pandas as pd

    speedups = pd.read_parquet(folder / "speedups.parquet")
    other = speedups.assign(host="otherhost", speedup=speedups["speedup"] * 10)
    pd.concat([speedups, other]).to_parquet(folder / "speedups.parquet")
    with pytest.raises(SystemExit, match="--host"):
        readme_table.table(folder, ROWS)
    rows = _rows(readme_table.table(folder, ROWS[:1], host="testhost"))
    assert 3.6 < float(rows["`fft` (real input) n = 1e5 PyTorch"][0]) < 4.4


def test_a_folder_without_a_run_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="make run"):
        readme_table.table(tmp_path, ROWS)


def test_a_run_without_any_of_the_cells_is_refused(folder):
    # the constructed grid has none of the README's cells: no empty table for the README
    with pytest.raises(SystemExit, match="none of the 6 cells"):
        readme_table.table(folder)


def test_write_replaces_only_the_marked_block(folder, tmp_path):
    readme = tmp_path / "README.md"
    before, after = "# Title\n\nText before.\n\n", "\n\nText after.\n"
    readme.write_text(f"{before}{START}\nold table\n{END}{after}")
    assert readme_table.main([str(folder), "--write", str(readme), "--row", "fft:1e5:torch"]) == 0
    text = readme.read_text()
    assert text.startswith(before + START + "\n| operation |")
    assert text.endswith(f"\n{END}{after}")
    assert "old table" not in text and "`fft` | n = 1e5 | PyTorch" in text
    # a second write from the same folder changes nothing
    readme_table.main([str(folder), "--write", str(readme), "--row", "fft:1e5:torch"])
    assert readme.read_text() == text


def test_rewrite_needs_both_markers_in_order():
    with pytest.raises(ValueError, match="readme-table"):
        readme_table.rewrite("no markers here", "table")
    with pytest.raises(ValueError):
        readme_table.rewrite(f"{END}\n{START}\n", "table")


def test_size_text_writes_sizes_as_the_readme_does():
    assert readme_table.size_text("poly", 100_000) == "n = 1e5"
    assert readme_table.size_text("matmul", 250) == "n = 250"
    assert readme_table.size_text("matmul", 1000) == "n = 1e3"
    assert readme_table.size_text("linreg_gd", 20) == "d = 20"
    assert readme_table.size_text("mlp", 4096) == "batch = 4096"


def test_the_readme_s_cells_are_in_the_default_grid():
    # `make run` then `make readme-table` fills every row of the README's table
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert config["baseline"] == {"library": "numpy", "device": "cpu"}
    assert config["device"] == readme_table.DEVICE and config["dtype"] == readme_table.DTYPE
    assert config["threads"] == readme_table.THREADS
    for row in readme_table.ROWS:
        assert row.library in config["libraries"], row
        assert row.size in config["operations"][row.operation]["sizes"], row


def test_the_readme_has_the_marked_block():
    text = (REPO / "README.md").read_text()
    assert text.count(START) == 1 and text.count(END) == 1
    assert text.index(START) < text.index(END)
