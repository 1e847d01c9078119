"""Environments against the base environment: results/versions.parquet, its summary section
and its charts, from constructed cell files of known slowdowns."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import MARGIN, constructed_results, run_script
from summarise import summarise
from test_html_escape import HOSTILE, live_tags

from numbench.analyse.findings import write_findings
from numbench.analyse.versions import (
    compute_versions,
    environment_cell,
)
from numbench.cells import cell_path
from numbench.contract import cell_table, write_atomic
from numbench.contract.conclusions import VERSIONS_COLUMNS, VERSIONS_SCHEMA
from numbench.measure.replicates import BASELINE, MEASURED, ProcessRun
from numbench.report.charts import build_charts, chart_names
from numbench.report.drawing import save_chart, versions_chart, versions_chart_name
from numbench.report.summary import to_html, write_summary
from numbench.spec import CellMeta, ProcessReport
from numbench.stats import Z95, typical_sd

ENV_VERSION, BASE_VERSION = "2.3.5", "2.4.6"
PAIRING_ENDED = (
    "the paired baseline process (numpy/cpu) ended crashed: killed by SIGSEGV; speedup taken "
    "against the baseline cell"
)


def round_samples(median: float, factor: float, noise: float, seed: int, n: int = 15):
    rng = np.random.default_rng(seed)
    return [float(s) for s in median * factor * np.exp(rng.normal(0.0, noise, n))]


def env_cell(
    root: Path,
    env: str,
    size: int,
    ratio: float,
    *,
    operation: str = "matmul",
    library: str = "numpy",
    rounds: int = 3,
    base_rounds: int | None = None,
    wobble: tuple[float, ...] = (),
    noise: float = 0.01,
) -> str:
    """An ok cell of ``env`` whose processes take ``ratio`` times the base's, round by round
    (each round's drift shared by both sides; ``wobble``: the environment's extra factor per
    round, a round-to-round spread of the ratio)."""
    median = 1e-6 * size
    runs = []
    for i in range(rounds if base_rounds is None else max(rounds, base_rounds)):
        drift = 1.0 + 0.05 * i
        extra = wobble[i] if i < len(wobble) else 1.0
        seed = size * 100 + i
        if i < rounds:
            own = round_samples(median * drift, ratio * extra, noise, seed)
            report = ProcessReport("ok", library_version=ENV_VERSION, loops=1, samples_s=own)
            runs.append(ProcessRun(MEASURED, i, float(i), report))
        if i < (rounds if base_rounds is None else base_rounds):
            base = round_samples(median * drift, 1.0, noise, seed + 50)
            report = ProcessReport("ok", library_version=BASE_VERSION, loops=1, samples_s=base)
            runs.append(ProcessRun(BASELINE, i, float(i), report))
    meta = CellMeta(status="ok", host="h", threads=1, replicates=rounds, paired_with="numpy/cpu")
    return _write(root, env, library, operation, size, meta, runs)


def broken_cell(root: Path, env: str, size: int, status: str = "failed", error: str = "boom"):
    """A cell of ``env`` whose own first process failed: one row, the failing process."""
    report = ProcessReport(status, error=error)
    meta = CellMeta(status=status, error=error, host="h", threads=1, replicates=1)
    return _write(root, env, "numpy", "matmul", size, meta, [ProcessRun(MEASURED, 0, 0.0, report)])


def pairing_ended_cell(root: Path, env: str, size: int) -> str:
    """An ok cell of ``env`` whose base process crashed: its own rows alone, the reason kept."""
    own = round_samples(1e-6 * size, 1.0, 0.01, size)
    report = ProcessReport("ok", library_version=ENV_VERSION, loops=1, samples_s=own)
    meta = CellMeta(status="ok", error=PAIRING_ENDED, host="h", threads=1, replicates=1)
    return _write(root, env, "numpy", "matmul", size, meta, [ProcessRun(MEASURED, 0, 0.0, report)])


def _write(root, env, library, operation, size, meta, runs) -> str:
    key = {"library": library, "device": "cpu", "operation": operation, "size": size}
    key["dtype"] = "float64"
    path = root / cell_path(library, "cpu", operation, size, environment=env)
    write_atomic(cell_table(key, meta, runs), path)
    return str(path)


def row(table: pd.DataFrame, env: str, size: int, operation: str = "matmul") -> pd.Series:
    hit = table[
        (table["environment"] == env) & (table["size"] == size) & (table["operation"] == operation)
    ]
    assert len(hit) == 1, hit
    return hit.iloc[0]


@pytest.fixture(scope="module")
def cells(tmp_path_factory) -> list[str]:
    """numpy-2.3: 1.3x slower at 100 and 1000, the same at 10^4, 0.7x (faster) in fft at
    1000; steady: the same speed everywhere."""
    root = tmp_path_factory.mktemp("versions")
    return [
        env_cell(root, "numpy-2.3", 100, 1.3),
        env_cell(root, "numpy-2.3", 1000, 1.3),
        env_cell(root, "numpy-2.3", 10_000, 1.0),
        env_cell(root, "numpy-2.3", 1000, 0.7, operation="fft"),
        env_cell(root, "steady", 100, 1.0),
        env_cell(root, "steady", 1000, 1.0),
    ]


@pytest.fixture(scope="module")
def table(cells) -> pd.DataFrame:
    return compute_versions(cells, MARGIN)


# -- the table ----------------------------------------------------------------------------------
def test_one_row_per_environment_cell_in_the_schema(table, cells):
    assert list(table.columns) == VERSIONS_COLUMNS
    assert len(table) == len(cells)
    assert sorted(set(table["environment"])) == ["numpy-2.3", "steady"]
    assert set(table["library"]) == {"numpy"} and set(table["host"]) == {"h"}
    pa.Table.from_pandas(table, schema=VERSIONS_SCHEMA, preserve_index=False)  # types hold


def test_a_known_slowdown_is_measured_with_its_interval(table):
    r = row(table, "numpy-2.3", 1000)
    assert r["ratio"] == pytest.approx(1.3, rel=0.02)
    assert r["median_s"] / r["base_median_s"] == pytest.approx(r["ratio"])
    assert 1.0 < r["ratio_ci_low"] < 1.3 < r["ratio_ci_high"] < 1.6
    assert r["change"] == "slower" and r["settled"]
    assert r["paired"] and r["rounds"] == 3 and r["status"] == "ok"
    assert r["version"] == ENV_VERSION and r["base_version"] == BASE_VERSION


def test_the_same_speed_and_a_speedup(table):
    same = row(table, "numpy-2.3", 10_000)
    assert same["ratio"] == pytest.approx(1.0, rel=0.02)
    assert same["ratio_ci_low"] < 1.0 < same["ratio_ci_high"]
    assert same["change"] == "same"
    faster = row(table, "numpy-2.3", 1000, "fft")
    assert faster["ratio"] == pytest.approx(0.7, rel=0.02)
    assert faster["ratio_ci_high"] < 1.0 and faster["change"] == "faster"
    assert set(table.loc[table["environment"] == "steady", "change"]) == {"same"}


def test_a_ratio_inside_the_margin_is_the_same_however_narrow(tmp_path):
    path = env_cell(tmp_path, "e", 100, 1.05, noise=0.001)
    r = compute_versions([path], MARGIN).iloc[0]
    assert r["ratio_ci_low"] > 1.0 and r["change"] == "same"
    assert compute_versions([path], 1.02).iloc[0]["change"] == "slower"


def test_the_round_floor_is_each_environments_own(tmp_path):
    """Tight samples, rounds that disagree: the interval is widened to the environment's
    typical round spread, s0 from its own paired cells."""
    wobbles = [(1.0, 1.08), (1.05, 0.98), (0.97, 1.04)]
    paths = [
        env_cell(tmp_path, "wobbly", 100 * 10**k, 1.0, rounds=2, wobble=w, noise=0.001)
        for k, w in enumerate(wobbles)
    ]
    paths.append(env_cell(tmp_path, "steady", 100, 1.0, rounds=2, noise=0.001))
    table = compute_versions(paths, MARGIN)
    variances = []
    for k in range(len(wobbles)):
        size = 100 * 10**k
        logs = [
            np.log(
                np.median(
                    round_samples(1e-6 * size * (1 + 0.05 * i), 1.0, 0.001, size * 100 + i + 50)
                )
                / np.median(
                    round_samples(
                        1e-6 * size * (1 + 0.05 * i), wobbles[k][i], 0.001, size * 100 + i
                    )
                )
            )
            for i in range(2)
        ]
        variances.append(np.var(logs, ddof=1))
    s0 = typical_sd(variances, [1] * len(variances))
    floor = np.expm1(Z95 * s0 / np.sqrt(2))
    wobbly = table[table["environment"] == "wobbly"]
    assert wobbly["ci_floor"].to_numpy() == pytest.approx([floor] * 3)
    assert wobbly["floored"].all()
    for r in wobbly.itertuples():
        assert r.ratio_ci_low <= r.ratio / (1 + floor) * 1.000001
        assert r.ratio_ci_high >= r.ratio * (1 + floor) * 0.999999
    # steady's rounds agree: its floor is its own, far below wobbly's
    assert 0.0 < row(table, "steady", 100)["ci_floor"] < floor / 3


def test_an_unpaired_cell_gets_no_floor(tmp_path):
    path = env_cell(tmp_path, "e", 100, 1.3, rounds=3, base_rounds=2)
    r = compute_versions([path], MARGIN).iloc[0]
    assert not r["paired"] and r["rounds"] == 3 and r["ci_floor"] == 0.0
    assert r["ratio"] == pytest.approx(1.3, rel=0.03)


def test_broken_and_not_comparable(tmp_path):
    failed = broken_cell(tmp_path, "e", 100, "failed", "ImportError: numpy 2.3 needs glibc 9")
    crashed_base = pairing_ended_cell(tmp_path, "e", 1000)
    mismatch = env_cell(tmp_path, "e", 10_000, 1.0)
    t = pq.read_table(mismatch)
    t = t.set_column(t.schema.get_field_index("status"), "status", pa.array(["mismatch"] * len(t)))
    pq.write_table(t, mismatch)
    # without benchmarks.parquet, the failed cell's base is unknown
    table = compute_versions([failed, crashed_base, mismatch], MARGIN)
    r = row(table, "e", 100)
    assert r["status"] == "failed" and r["change"] == "not comparable"
    assert pd.isna(r["base_status"]) and "glibc" in r["error"]
    assert pd.isna(r["ratio"]) and r["rounds"] == 0
    r = row(table, "e", 1000)
    assert r["status"] == "crashed" and r["base_status"] == "crashed"
    assert r["change"] == "not comparable" and pd.isna(r["ratio"])
    assert r["version"] == ENV_VERSION
    r = row(table, "e", 10_000)
    assert r["status"] == "mismatch" and r["base_status"] == "ok" and r["change"] == "broken"
    # with it, the base cell's status and version
    bench = pd.DataFrame(
        [
            {"library": "numpy", "device": "cpu", "operation": "matmul", "size": n}
            | {"dtype": "float64", "threads": 1, "status": "ok", "library_version": "2.4.6"}
            for n in (100, 1000)
        ]
    )
    table = compute_versions([failed, crashed_base], MARGIN, bench)
    r = row(table, "e", 100)
    assert r["change"] == "broken" and r["base_status"] == "ok"
    assert r["base_version"] == "2.4.6" and pd.isna(r["version"])
    assert row(table, "e", 1000)["change"] == "not comparable"  # the pairing says crashed


def test_only_cells_of_an_environment_are_taken(tmp_path):
    base = tmp_path / cell_path("numpy", "cpu", "matmul", 100)
    with pytest.raises(ValueError, match="base environment"):
        environment_cell(base)
    with pytest.raises(ValueError, match="not a cell"):
        environment_cell(tmp_path / "elsewhere.parquet")
    cell = environment_cell(tmp_path / cell_path("numpy", "gpu", "fft", 8, environment="np-2"))
    assert (cell.library, cell.environment, cell.device, cell.size) == ("numpy", "np-2", "gpu", 8)


def test_the_script_writes_the_table(tmp_path, cells):
    out = tmp_path / "results" / "versions.parquet"
    proc = run_script(
        "versions.py", "--margin", str(MARGIN), "--output", str(out), "--cells", *cells
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"versions: 6 rows, 3 changed -> {out}"
    written = pq.read_table(out)
    assert written.schema.equals(VERSIONS_SCHEMA)
    assert sorted(written.column("change").to_pylist()).count("slower") == 2


# -- the summary ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results():
    return constructed_results()


def versions_part(text: str) -> str:
    m = re.search(r"^## Versions\n.*?(?=^## )", text, flags=re.S | re.M)
    assert m, "no Versions section"
    return m.group(0)


def test_the_versions_section(results, table):
    text = summarise(*results, "numpy", "cpu", MARGIN, versions=table)
    part = versions_part(text)
    assert (
        "a change counts when its interval excludes 1 and the ratio passes the margin of 1.1x"
        in part.lower()
    )
    env = part.split("### numpy-2.3\n")[1].split("### steady")[0]
    assert f"numpy {BASE_VERSION} -> {ENV_VERSION}." in env
    assert "4 cells: 2 slower, 1 faster, 1 the same, 0 broken." in env
    lines = [line for line in env.splitlines() if line.startswith("| numpy")]
    assert [line.split(" | ")[6] for line in lines] == ["slower", "slower", "faster"]
    ratios = [float(line.split(" | ")[7].rstrip("×")) for line in lines[:2]]
    assert ratios == sorted(ratios, reverse=True)  # largest first
    assert re.search(r"\| 1\.3\d?× \| \(1\.\d+ to 1\.\d+\) \|", env)
    assert "charts/versions-numpy-2.3.html" in env
    steady = part.split("### steady\n")[1]
    assert "2 cells: 0 slower, 0 faster, 2 the same, 0 broken." in steady
    assert "Nothing changed" in steady and "| numpy" not in steady


def test_without_the_table_the_summary_is_unchanged(results, table):
    without = summarise(*results, "numpy", "cpu", MARGIN)
    assert "## Versions" not in without
    assert summarise(*results, "numpy", "cpu", MARGIN, versions=None) == without
    with_it = summarise(*results, "numpy", "cpu", MARGIN, versions=table)
    assert with_it.replace(versions_part(with_it), "") == without


def test_broken_cells_are_listed_with_what_they_said(results, tmp_path):
    paths = [
        broken_cell(tmp_path, "e", 100, "failed", "ImportError: no module"),
        env_cell(tmp_path, "e", 1000, 1.0),
    ]
    bench = pd.DataFrame(
        [
            {"library": "numpy", "device": "cpu", "operation": "matmul", "size": 100}
            | {"dtype": "float64", "threads": 1, "status": "ok", "library_version": BASE_VERSION}
        ]
    )
    table = compute_versions(paths, MARGIN, bench)
    part = versions_part(summarise(*results, "numpy", "cpu", MARGIN, versions=table))
    assert "1 the same, 1 broken." in part
    assert "| broken (failed) |" in part
    assert "- numpy cpu matmul 100: ImportError: no module" in part
    # without the base cell's status, the failed cell is not comparable, still quoted
    part = versions_part(
        summarise(*results, "numpy", "cpu", MARGIN, versions=compute_versions(paths, MARGIN))
    )
    assert "0 broken, 1 not comparable (" in part and "ended before they ran" in part
    assert "- numpy cpu matmul 100: ImportError: no module" in part
    assert "| broken" not in part


def test_the_summary_script_takes_the_versions(tmp_path, results, table):
    paths = {}
    for name, frame in zip(("benchmarks", "speedups", "crossovers", "versions"), (*results, table)):
        paths[name] = tmp_path / f"{name}.parquet"
        frame.to_parquet(paths[name])
    md = tmp_path / "summary.md"
    paths["findings"] = tmp_path / "findings.parquet"
    write_findings(
        *(paths[name] for name in ("benchmarks", "speedups", "crossovers", "findings")),
        "numpy",
        "cpu",
        MARGIN,
    )
    write_summary(
        paths["benchmarks"],
        paths["speedups"],
        paths["findings"],
        md,
        tmp_path / "charts",
        versions=paths["versions"],
    )
    assert "## Versions" in md.read_text()
    cmd = []
    for name in ("benchmarks", "speedups", "findings"):
        cmd += [f"--{name}", str(paths[name])]
    cmd += ["--charts-dir", str(tmp_path / "charts"), "--output", str(tmp_path / "s.md")]
    for extra in ([], ["--versions", str(paths["versions"])]):
        proc = run_script("summary.py", *cmd, *extra)
        assert proc.returncode == 0, proc.stderr
        assert ("## Versions" in (tmp_path / "s.md").read_text()) == bool(extra)


def hostile_versions(text: str, table: pd.DataFrame) -> pd.DataFrame:
    t = table.copy()
    for column in ("environment", "library", "operation", "version", "base_version", "error"):
        t[column] = text
    t.loc[t.index[0], "change"] = "broken"
    t.loc[t.index[0], "status"] = text
    return t


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_in_the_table_stays_text(results, table, text):
    page = to_html(
        summarise(*results, "numpy", "cpu", MARGIN, versions=hostile_versions(text, table))
    )
    assert live_tags(page) == []
    hrefs = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert all(h.startswith("charts/") for h in hrefs), hrefs
    assert "<img" not in page.lower() and "<script" not in page.lower()


# -- the charts ----------------------------------------------------------------------------------
def test_one_versions_chart_per_environment_beside_the_others(results, table):
    without = build_charts(*results, "numpy", "cpu")
    assert list(without) == chart_names(["fft", "sort"])
    charts = build_charts(*results, "numpy", "cpu", versions=table)
    assert list(charts) == [*without, "versions-numpy-2.3", "versions-steady"]


def test_the_versions_chart_draws_ratios_and_its_rules(table):
    spec = versions_chart(table, "numpy-2.3").to_dict()
    data = spec["datasets"]
    layers = spec["spec"]["layer"]
    rules = sorted(
        data[layer["data"]["name"]][0]["y"]
        for layer in layers
        if layer["mark"]["type"] == "rule" and "data" in layer
    )
    assert rules == pytest.approx(sorted([1.0, MARGIN, 1 / MARGIN]))
    assert spec["facet"]["field"] == "operation"
    [line] = [layer for layer in layers if layer["mark"]["type"] == "line"]
    assert line["encoding"]["y"]["field"] == "ratio"
    assert line["encoding"]["x"]["scale"]["type"] == "log"
    assert line["encoding"]["color"]["field"] == "series"
    values = data[spec["data"]["name"]]
    assert {v["operation"] for v in values} == {"matmul", "fft"}
    assert {v["series"] for v in values} == {"numpy"}
    assert {v["environment"] for v in values} == {"numpy-2.3"}


def test_the_versions_chart_is_written_in_every_format(tmp_path, table):
    written = save_chart(versions_chart(table, "numpy-2.3"), tmp_path, "versions-numpy-2.3")
    names = {p.name for p in written}
    assert names == {f"versions-numpy-2.3.{f}" for f in ("html", "svg", "png")}
    assert "<svg" in (tmp_path / "versions-numpy-2.3.svg").read_text()[:500]


def test_a_hostile_environment_name_is_neither_a_path_nor_markup(tmp_path, table):
    hostile = "</script><img src=x onerror=alert(1)>/../x"
    name = versions_chart_name(hostile)
    assert re.fullmatch(r"versions-env-[0-9a-f]{8}", name)
    assert versions_chart_name("numpy-2.3") == "versions-numpy-2.3"
    t = table.assign(environment=hostile)
    [page] = [
        p for p in save_chart(versions_chart(t, hostile), tmp_path, name) if p.suffix == ".html"
    ]
    html = page.read_text()
    assert "<img src=x" not in html
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in html


def test_a_change_in_doubt_is_marked(results, table):
    doubt = table.copy()
    slower = doubt.index[(doubt["change"] == "slower") & (doubt["size"] == 100)]
    doubt.loc[slower, "settled"] = False
    part = versions_part(summarise(*results, "numpy", "cpu", MARGIN, versions=doubt))
    assert "| slower ? |" in part and "?: in doubt" in part
    assert "?: in doubt" not in versions_part(
        summarise(*results, "numpy", "cpu", MARGIN, versions=table)
    )
