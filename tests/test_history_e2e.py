"""The workflow adds its finished run to the history (rule history) when the config asks, and
adds nothing more when a step of it is run again; clearing results/ keeps the history; the
site rule builds the results site from it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import TINY_RUN_LIBRARIES, copy_run, snakemake
from test_history import results_frame, write_results

from numbench import history
from numbench.cells import KEY

pytestmark = pytest.mark.e2e

#: two cheap libraries, one cell each, one process, no roofs; the history turned on (a test's
#: copy of the workflow has it off), in a folder with a space in its name (a run that adds
#: itself: the session's tiny run, conftest.TINY_RUN_CONFIG)
HISTORY_CONFIG = """\
libraries: [numpy, numba]
roofs: false
operations:
  elementwise: {sizes: [2000]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 120
history: {add: true, folder: "kept runs", site: "the site"}
"""


#: Snakemake's arguments on a copy of the session's tiny run
COPY_ARGS = ("--cores", "1", "--configfile", "e2e.yaml", "--rerun-triggers", "mtime")


def test_a_finished_run_adds_itself_once_and_outlives_its_results(tiny_run: Path, tmp_path):
    """The session's shared run adds itself (conftest.TINY_RUN_CONFIG: history.add, its
    store "kept runs"); a step run again on a copy of it adds nothing more."""
    added = json.loads((tiny_run / "results" / "history.json").read_text())
    assert added["store"] == "kept runs" and [r["added"] for r in added["runs"]] == [True]
    found = history.read(tiny_run / "kept runs")
    assert list(found.runs["run_id"]) == [added["runs"][0]["run_id"]]
    assert set(found.cells["library"]) == set(TINY_RUN_LIBRARIES)
    bench = pd.read_parquet(tiny_run / "results" / "benchmarks.parquet")
    assert len(found.cells) == len(bench)  # each cell once

    # On a copy, only files' times say what is out of date: the copy moved the example's
    # operation file, whose path is part of its cells' spec (config/README.md), and a cell
    # measured again would make a new run for the history
    workdir = copy_run(tiny_run, tmp_path / "wf")
    store, args = workdir / "kept runs", COPY_ARGS
    again = snakemake(workdir, *args, "--forcerun", "summary")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already in the history" in (workdir / "logs" / "history.log").read_text()
    assert len(history.read(store).runs) == 1

    site = snakemake(workdir, "site", *args)
    assert site.returncode == 0, site.stdout[-3000:] + site.stderr[-3000:]
    index = (workdir / "the site" / "index.html").read_text(encoding="utf-8")
    assert "1 run on 1 machine" in index and added["runs"][0]["run_id"] in index
    assert "op-elementwise-" in index and (workdir / "the site" / "assets" / "vega.js").is_file()
    # built, the site is not built again until a run is added
    assert "rule site:" not in planned_site(workdir, *args)

    # Cleared, results/ takes nothing of the run's record with it: the store still holds each
    # cell's figures, and the site is built again from the store alone, nothing measured or
    # analysed again (history.add off: nothing then asks for results/)
    shutil.rmtree(workdir / "results")
    shutil.rmtree(workdir / "the site")
    kept = history.read(store)
    assert list(kept.runs["run_id"]) == [added["runs"][0]["run_id"]]
    medians = kept.cells.set_index(list(KEY))["median_s"].sort_index()
    expected = bench.set_index(list(KEY))["median_s"].sort_index()
    pd.testing.assert_series_equal(medians, expected, check_dtype=False, check_index_type=False)
    config = (workdir / "e2e.yaml").read_text()
    (workdir / "site.yaml").write_text(config.replace("add: true", "add: false"))
    site_args = ("--cores", "1", "--configfile", "site.yaml", "--rerun-triggers", "mtime")
    planned = re.findall(r"^(?:local)?rule (\w+):", planned_site(workdir, *site_args), re.M)
    assert planned == ["site"], planned
    rebuilt = snakemake(workdir, "site", *site_args)
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:] + rebuilt.stderr[-3000:]
    index = (workdir / "the site" / "index.html").read_text(encoding="utf-8")
    assert "1 run on 1 machine" in index and added["runs"][0]["run_id"] in index
    assert not (workdir / "results").exists()


def test_the_history_is_left_alone_unless_the_config_asks(workdir: Path):
    (workdir / "h.yaml").write_text(HISTORY_CONFIG.replace("add: true", "add: false"))
    proc = snakemake(workdir, "-n", "--cores", "1", "--configfile", "h.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rule history:" not in proc.stdout + proc.stderr
    (workdir / "h.yaml").write_text(HISTORY_CONFIG)
    planned = snakemake(workdir, "-n", "--cores", "1", "--configfile", "h.yaml")
    assert "rule history:" in planned.stdout + planned.stderr


def planned_site(workdir: Path, *args: str) -> str:
    """What `snakemake -n -p site` plans (its output, the shell commands printed); ``args``:
    the run's own (default: this file's config)."""
    args = args or ("--cores", "1", "--configfile", "h.yaml")
    proc = snakemake(workdir, "site", "-n", "-p", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_the_site_is_built_again_once_a_run_reaches_the_store_any_way(workdir: Path):
    """With history.add off, the runs come from `numbench history add` (here its function):
    the first builds the site, each later one builds it again; the config's margin is the
    one the site's steps pass."""
    config = HISTORY_CONFIG.replace("add: true", "add: false") + "margin: 1.3\n"
    (workdir / "h.yaml").write_text(config)
    store = workdir / "kept runs"
    history.add_results(write_results(workdir / "r1", results_frame(1)), store)
    first = snakemake(workdir, "site", "--cores", "1", "--configfile", "h.yaml")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "1 run on 1 machine" in (workdir / "the site" / "index.html").read_text()
    assert "rule site:" not in planned_site(workdir)
    history.add_results(write_results(workdir / "r2", results_frame(2)), store)
    again = planned_site(workdir)
    assert "rule site:" in again and "--margin 1.3" in again
    second = snakemake(workdir, "site", "--cores", "1", "--configfile", "h.yaml")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "2 runs on 1 machine" in (workdir / "the site" / "index.html").read_text()
    assert "rule site:" not in planned_site(workdir)
