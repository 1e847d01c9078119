"""The history store (numbench.history): runs added from constructed results folders, read
back as a plain Parquet dataset, and its promises: a duplicate add adds nothing, two adds at
once are safe, a write cut off leaves the store as it was, a corrupt or foreign file is named
and skipped, a newer store is refused."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO

from numbench import history
from numbench.cli import main
from numbench.history import store as store_module
from numbench.history.changes import steps

LIBRARIES = ("numpy", "jax", "torch", "numba")
OPERATIONS = {"fft": (1000, 10000, 100000), "sort": (1000, 10000, 100000)}
VERSIONS = {"numpy": "2.4.6", "jax": "0.10.2", "torch": "2.13.0", "numba": "0.68.1"}


def results_frame(run: int, host: str = "testhost", seed: int = 0, slow=None, versions=None):
    """A benchmarks table of 24 ok cells for run number ``run`` (1, 2, ...): each cell's
    median moves 2% run to run; ``slow``: (library, operation, size, factor) applied."""
    rng = np.random.default_rng([seed, run, len(host)])
    rows = []
    for library in LIBRARIES:
        for operation, sizes in OPERATIONS.items():
            for size in sizes:
                median = 1e-6 * size ** (0.9 + 0.05 * LIBRARIES.index(library))
                median *= float(np.exp(rng.normal(0.0, 0.02)))
                if slow and slow[:3] == (library, operation, size):
                    median *= slow[3]
                rows.append(
                    {
                        "library": library,
                        "device": "cpu",
                        "operation": operation,
                        "size": size,
                        "dtype": "float64",
                        "threads": 1,
                        "host": host,
                        "status": "ok",
                        "median_s": median,
                        "ci_low_s": median * 0.97,
                        "ci_high_s": median * 1.03,
                        "n_samples": 20,
                        "n_processes": 4,
                        "replicates": 2,
                        "unstable": False,
                        "cpu_taken": 0.02,
                        "library_version": (versions or VERSIONS)[library],
                        "cpu_model": "Test CPU 9000",
                        "cpu_count": 2,
                        "ram_gb": 24.0,
                        "platform": "Linux-6.1.0-test-x86_64-with-glibc2.36",
                        "python_version": "3.11.7",
                        "params": "{}",
                        "started_at": f"2026-01-{run:02d}T00:00:00+00:00",
                    }
                )
    return pd.DataFrame(rows)


def write_results(folder: Path, bench: pd.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    bench.to_parquet(folder / "benchmarks.parquet", index=False)
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    """``numbench history ARGS`` as the command runs it (``numbench.cli.main``), in this
    process: its exit status and what it printed. A fresh interpreter a call cost a second of
    CPU each. The command's start as a process of its own stays checked:
    test_two_adds_at_once_are_safe runs two of them at once."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["history", *args])
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


def store_files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.fixture
def two_runs(tmp_path) -> tuple[Path, list[Path]]:
    """A store of two runs, and their results folders."""
    folders = [write_results(tmp_path / f"r{i}", results_frame(i)) for i in (1, 2)]
    store = tmp_path / "history"
    for folder in folders:
        history.add_results(folder, store)
    return store, folders


def test_a_run_is_read_back_and_the_store_is_a_plain_parquet_dataset(two_runs):
    store, _ = two_runs
    found = history.read(store)
    assert len(found.runs) == 2 and len(found.cells) == 48 and found.skipped == []
    run = found.runs.iloc[0]
    assert run["host"] == "testhost" and run["kernel"] == "6.1.0-test"
    assert json.loads(run["library_versions"]) == VERSIONS
    assert (run["cells"], run["cells_ok"], run["cells_unstable"]) == (24, 24, 0)
    # pyarrow and pandas read the tables as they are, without numbench
    assert pq.read_table(store / "cells").num_rows == 48
    assert set(pd.read_parquet(store / "runs")["run_id"]) == set(found.runs["run_id"])


def test_the_same_run_added_twice_adds_nothing(two_runs):
    store, folders = two_runs
    before = store_files(store)
    again = history.add_results(folders[0], store)
    assert [run["added"] for run in again] == [False]
    assert store_files(store) == before
    assert len(history.read(store).runs) == 2


def test_a_run_keeps_its_sentinel_s_spread_and_an_older_run_file_reads_without_it(tmp_path):
    import pyarrow as pa

    bench = results_frame(1)
    bench["sentinel_s"] = [0.010 + 0.004 * (i % 2) for i in range(len(bench))]
    bench.loc[0, "sentinel_s"] = None  # a cell that did not time it
    store = tmp_path / "history"
    history.add_results(write_results(tmp_path / "r1", bench), store)
    history.add_results(write_results(tmp_path / "r2", results_frame(2)), store)
    runs = history.read(store).runs.set_index("started_at").sort_index()
    assert runs["sentinel_spread"].iloc[0] == pytest.approx(1.4)
    assert pd.isna(runs["sentinel_spread"].iloc[1])  # its cells timed no sentinel
    # a run file written before the column was kept: read, the spread null, nothing skipped
    for path in (store / "runs").glob("*.parquet"):
        table = pq.read_table(path)
        keep = [n for n in table.column_names if n != "sentinel_spread"]
        old = table.select(keep).replace_schema_metadata(table.schema.metadata)
        pq.write_table(old, path)
        assert "sentinel_spread" not in pq.read_schema(path).names
    found = history.read(store)
    assert found.skipped == [] and len(found.runs) == 2
    assert found.runs["sentinel_spread"].isna().all()
    assert found.runs["sentinel_spread"].dtype == pa.float64().to_pandas_dtype()


def test_two_adds_at_once_are_safe(tmp_path):
    """Six adds started together: four runs, two of them added twice at the same time."""
    folders = [write_results(tmp_path / f"r{i}", results_frame(i)) for i in range(1, 5)]
    store = tmp_path / "history"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "numbench", "history", "add", str(f), "--store", str(store)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        for f in [*folders, folders[0], folders[1]]
    ]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in outcomes), outcomes
    found = history.read(store)
    assert len(found.runs) == 4 and len(found.cells) == 4 * 24 and found.skipped == []
    assert not [p for p in store.rglob(".*")]  # no temporary file left behind


def test_a_write_cut_off_halfway_leaves_the_store_as_it_was(two_runs, tmp_path, monkeypatch):
    store, _ = two_runs
    before, files = history.read(store), store_files(store)
    third = write_results(tmp_path / "r3", results_frame(3))
    real_write = store_module.write_atomic

    def cut_off_after_the_cells(table, path):
        if Path(path).parent.name == "runs":
            raise KeyboardInterrupt("cut off")
        real_write(table, path)

    monkeypatch.setattr(store_module, "write_atomic", cut_off_after_the_cells)
    with pytest.raises(KeyboardInterrupt):
        history.add_results(third, store)

    def cut_off_inside_the_file(table, where, **_):
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(store_module, "write_atomic", real_write)
    monkeypatch.setattr("pyarrow.parquet.write_table", cut_off_inside_the_file)
    with pytest.raises(OSError, match="disk full"):
        history.add_results(third, store)
    monkeypatch.undo()
    after = history.read(store)
    pd.testing.assert_frame_equal(after.runs, before.runs)
    pd.testing.assert_frame_equal(after.cells, before.cells)
    assert after.skipped == []
    assert set(store_files(store)) - set(files) == {f"cells/{after_id(third)}.parquet"}
    # adding it again completes it
    assert [run["added"] for run in history.add_results(third, store)] == [True]
    assert len(history.read(store).runs) == 3


def after_id(results: Path) -> str:
    from numbench.history.store import runs_of

    return runs_of(results)[0][0].column("run_id")[0].as_py()


def test_a_corrupt_or_foreign_file_is_named_and_skipped(two_runs):
    store, folders = two_runs
    broken = store / "cells" / f"{after_id(folders[0])}.parquet"
    broken.write_bytes(b"not parquet at all")
    foreign = store / "runs" / "0123456789abcdef.parquet"
    pd.DataFrame({"run_id": ["0123456789abcdef"]}).to_parquet(foreign)
    (store / "runs" / "notes.txt").write_text("mine")
    found = history.read(store)
    assert len(found.runs) == 2  # the foreign file is no run
    assert set(found.cells["run_id"]) == {after_id(folders[1])}
    said = "\n".join(found.skipped)
    assert f"{broken}: not readable as Parquet" in said
    assert f"{foreign}: not a file of a numbench history store" in said
    assert "notes.txt: not a Parquet file of the store" in said
    proc = cli("list", "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    assert f"history: skipped {broken}" in proc.stderr
    assert proc.stdout.count("testhost") == 2


def test_a_store_written_by_a_newer_numbench_is_refused_naming_its_version(two_runs):
    store, folders = two_runs
    (store / "store.json").write_text(json.dumps({"format": 99, "numbench": "9.1.0"}))
    with pytest.raises(history.NewerStore, match=r"numbench 9\.1\.0 \(history store format 99\)"):
        history.read(store)
    proc = cli("list", "--store", str(store))
    assert proc.returncode == 2 and "numbench 9.1.0" in proc.stderr and "upgrade" in proc.stderr
    add = cli("add", str(folders[0]), "--store", str(store))
    assert add.returncode == 2 and "numbench 9.1.0" in add.stderr


def test_a_file_written_by_a_newer_numbench_is_refused_too(two_runs):
    store, folders = two_runs
    path = store / "runs" / f"{after_id(folders[0])}.parquet"
    table = pq.read_table(path)
    meta = {**table.schema.metadata, store_module.FORMAT_KEY: b"7", store_module.VERSION_KEY: b"8"}
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(history.NewerStore, match="numbench 8 "):
        history.read(store)


def test_each_host_of_a_results_folder_is_a_run_of_its_own(tmp_path):
    """An imported offsite run's cells lie beside the local ones: a second machine."""
    both = pd.concat([results_frame(1), results_frame(1, host="gpuhost")])
    folder = write_results(tmp_path / "r", both)
    done = history.add_results(folder, tmp_path / "history")
    assert sorted(run["host"] for run in done) == ["gpuhost", "testhost"]
    assert all(run["added"] for run in done)


def test_a_folder_without_benchmarks_is_refused_by_name(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = cli("add", str(tmp_path / "empty"), "--store", str(tmp_path / "history"))
    assert proc.returncode == 2
    assert "has no benchmarks.parquet" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "history").exists()


def eight_runs(tmp_path: Path, slow=None, seed: int = 0, versions_from: int | None = None):
    """A store of 8 runs of 24 cells; ``slow`` from run 5 on; numpy 2.5.0 from
    ``versions_from``."""
    store = tmp_path / "history"
    for run in range(1, 9):
        versions = dict(VERSIONS, numpy="2.5.0") if versions_from and run >= versions_from else None
        bench = results_frame(run, seed=seed, slow=slow if run >= 5 else None, versions=versions)
        history.add_results(write_results(tmp_path / f"r{run}", bench), store)
    return store


def test_changes_names_the_planted_slowdown_at_run_5_and_nothing_else(tmp_path):
    store = eight_runs(tmp_path, slow=("torch", "sort", 10000, 1.2), versions_from=5)
    proc = cli("changes", "--store", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert len(found) == 1, found
    step = found[0]
    cell = {k: step[k] for k in ("library", "operation", "size", "run_number")}
    assert cell == {"library": "torch", "operation": "sort", "size": 10000, "run_number": 5}
    assert 1.1 < step["ratio"] < 1.3 and step["ratio_low"] > 1.0
    assert step["changed"] == "numpy 2.4.6 -> 2.5.0"
    text = cli("changes", "--store", str(store)).stdout
    assert "torch/cpu sort 10000" in text and "numpy 2.4.6 -> 2.5.0" in text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unchanged_code_shows_no_step(tmp_path, seed):
    proc = cli("changes", "--store", str(eight_runs(tmp_path, seed=seed)))
    assert proc.returncode == 0 and "no step found" in proc.stdout, proc.stdout


def test_one_disturbed_run_is_no_step():
    medians = [1.0, 1.01, 0.99, 1.6, 1.0, 1.02, 0.98, 1.0]
    assert steps(medians) == []
    assert [s.index for s in steps([1.0, 1.01, 0.99, 1.0, 1.6, 1.58, 1.62, 1.6])] == [4]


def test_list_says_what_changed_since_the_hosts_last_run(tmp_path):
    store = eight_runs(tmp_path, versions_from=3)
    lines = cli("list", "--store", str(store)).stdout.splitlines()
    assert len(lines) == 9  # the header and a line a run
    assert "first run" in lines[1] and "24/24 ok" in lines[1]
    assert "numpy 2.4.6 -> 2.5.0" in lines[3] and "numpy" not in lines[4]


def test_show_selects_cells_and_writes_their_series(tmp_path):
    store = eight_runs(tmp_path)
    proc = cli("show", "--store", str(store), "--library", "jax", "--size", "1000", "--json")
    series = json.loads(proc.stdout)
    assert len(series) == 2 * 8  # fft and sort, eight runs each
    assert {(r["library"], r["size"]) for r in series} == {("jax", 1000)}
    assert [r["run_number"] for r in series[:8]] == list(range(1, 9))
    assert series[0]["run_started_at"] == series[0]["started_at"] == "2026-01-01T00:00:00+00:00"
    table = cli("show", "--store", str(store), "--operation", "fft", "--size", "1000").stdout
    assert len(table.splitlines()) == 1 + 4 * 8
    none = cli("show", "--store", str(store), "--library", "cupy").stdout
    assert "no cell of the history matches" in none


@pytest.mark.parametrize("folder", ["results", "results/history", "./results/../results/h"])
def test_a_history_folder_inside_results_is_a_config_error(tmp_path, folder):
    from numbench.config import ConfigError, check_history

    with pytest.raises(ConfigError, match=r"history.folder = .* is inside results/"):
        check_history({"history": {"folder": folder}}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="inside results/"):
        check_history({"history": {"folder": str(tmp_path / folder)}}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("site", "how"),
    [
        ("history", "is the store"),
        ("./history/site", "is inside the store"),
        ("results", "is results/"),
        ("results/site", "is inside results/"),
        (".", "holds the store"),
    ],
)
def test_a_site_folder_in_the_store_or_results_is_a_config_error(tmp_path, site, how):
    from numbench.config import ConfigError, check_history

    for folder in (site, str(tmp_path / site)):
        with pytest.raises(ConfigError, match=f"history.site = '.*' {re.escape(how)}"):
            check_history({"history": {"folder": "history", "site": folder}}, cwd=tmp_path)
    store = str(tmp_path / "elsewhere" / "kept")
    with pytest.raises(ConfigError, match="history.site = .* is the store"):
        check_history({"history": {"folder": store, "site": store + "/"}}, cwd=tmp_path)


def test_the_history_defaults_to_a_folder_beside_results_added_to(tmp_path):
    from numbench.config import check_history, validate_schema

    cfg = validate_schema({"operations": {"fft": {}}}, REPO / "workflow/schemas/config.schema.yaml")
    assert cfg["history"] == {"folder": "history", "add": True, "site": "history-site"}
    check_history(cfg, cwd=tmp_path)
    check_history({"history": {"folder": "../results-history"}}, cwd=tmp_path)
    for site in ("history-site", "../site", "results-site", str(tmp_path / "web" / "site")):
        check_history({"history": {"folder": "history", "site": site}}, cwd=tmp_path)


def test_text_from_another_host_reaches_the_terminal_without_control_characters(tmp_path):
    bench = results_frame(1, host="evil\x1b[2J\nhost")
    history.add_results(write_results(tmp_path / "r", bench), tmp_path / "history")
    out = cli("list", "--store", str(tmp_path / "history")).stdout
    assert "\x1b" not in out and "evil [2J host" in out


def write_roofs(folder: Path, rounds: list[str | None]) -> None:
    """results/roofs.parquet of testhost: the DRAM roof once per round (None: a table from
    before the rounds, without the column)."""
    import pyarrow as pa

    from numbench.roofline.contract import ROOFS_SCHEMA

    rows = [
        {"host": "testhost", "device": "cpu", "dtype": "float64", "threads": 1, "roof": "dram"}
        | {"status": "ok", "value": 20.0 + i, "unit": "GB/s", "round": r}
        for i, r in enumerate(rounds)
    ]
    table = pa.Table.from_pylist(rows, schema=ROOFS_SCHEMA)
    if rounds == [None]:
        table = table.drop_columns(["round"])
    pq.write_table(table, folder / "roofs.parquet")


def test_the_roofs_of_a_run_keep_their_round_and_an_older_table_still_adds(tmp_path):
    folder = write_results(tmp_path / "r1", results_frame(1))
    write_roofs(folder, ["start", "end"])
    history.add_results(folder, tmp_path / "history")
    roofs = json.loads(history.read(tmp_path / "history").runs.iloc[0]["roofs"])
    assert [(r["roof"], r["round"], r["value"]) for r in roofs] == [
        ("dram", "start", 20.0),
        ("dram", "end", 21.0),
    ]
    older = write_results(tmp_path / "r2", results_frame(2))
    write_roofs(older, [None])
    history.add_results(older, tmp_path / "history")
    runs = history.read(tmp_path / "history").runs
    assert [(r["roof"], r["round"]) for r in json.loads(runs.iloc[1]["roofs"])] == [("dram", None)]
