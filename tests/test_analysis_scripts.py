"""The analysis entry points chained on constructed cell files, with the command lines the
rules give them.

The scripts run in this process (``conftest.run_script``): six fresh interpreters importing
pandas, pyarrow and altair cost more than the chain itself. That each script also starts as a
process of its own, as its rule starts it, is checked end to end: the tiny run
(``conftest.tiny_run``) runs every one of them through Snakemake."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from conftest import run_script

from numbench import inputs_file as inputs
from numbench.cells import cell_path, inputs_path
from numbench.contract import cell_table, write_atomic
from numbench.measure.replicates import MEASURED, ProcessRun
from numbench.report.charts import chart_names
from numbench.report.drawing import FORMATS
from numbench.spec import CellMeta, ProcessReport


def write_cell(root: Path, library: str, operation: str, size: int, median: float) -> str:
    samples = median * np.exp(np.random.default_rng(size).normal(0.0, 0.02, 20))
    key = {"library": library, "device": "cpu", "operation": operation, "size": size}
    key["dtype"] = "float64"
    meta = CellMeta(status="ok", host="h", cpu_model="cpu", threads=1, cpu_count=4)
    report = ProcessReport(status="ok", loops=1, samples_s=[float(s) for s in samples])
    runs = [ProcessRun(MEASURED, 0, 0.0, report)]
    path = root / cell_path(library, "cpu", operation, size)
    if not (root / inputs_path(operation, size)).exists():  # aggregate checks the inputs too
        inputs.write(operation, size, 1, root / inputs_path(operation, size))
    write_atomic(cell_table(key, meta, runs), path)
    return str(path)


def ok(script: str, *args: str) -> None:
    proc = run_script(script, *args)
    assert proc.returncode == 0, proc.stderr


def test_scripts_chain_from_cells_to_summary(tmp_path):
    cells = []
    for size, torch_speedup in ((100, 0.5), (1000, 1.0), (10_000, 2.0)):
        cells.append(write_cell(tmp_path, "numpy", "fft", size, 1e-6 * size))
        cells.append(write_cell(tmp_path, "torch", "fft", size, 1e-6 * size / torch_speedup))
    res = tmp_path / "results"
    inputs_files = sorted({str(tmp_path / inputs_path("fft", n)) for n in (100, 1000, 10_000)})
    ok(
        "aggregate.py",
        "--output",
        str(res / "benchmarks.parquet"),
        "--samples",
        str(res / "samples.parquet"),
        "--inputs",
        *inputs_files,
        "--cells",
        *cells,
    )
    ok(
        "speedups.py",
        "--benchmarks",
        str(res / "benchmarks.parquet"),
        "--baseline-library",
        "numpy",
        "--baseline-device",
        "cpu",
        "--samples",
        str(res / "samples.parquet"),
        "--margin",
        "1.1",
        "--output",
        str(res / "speedups.parquet"),
    )
    ok(
        "crossovers.py",
        "--speedups",
        str(res / "speedups.parquet"),
        "--output",
        str(res / "crossovers.parquet"),
    )
    tables = ["--benchmarks", str(res / "benchmarks.parquet"), "--speedups"]
    tables += [str(res / "speedups.parquet"), "--crossovers", str(res / "crossovers.parquet")]
    baseline = ["--baseline-library", "numpy", "--baseline-device", "cpu"]
    ok("charts.py", *tables, *baseline, "--outdir", str(res / "charts"))
    findings = ["--findings", str(res / "findings.parquet")]
    ok("findings.py", *tables, *baseline, "--margin", "1.1", "--output", findings[1])
    ok(
        "summary.py",
        *tables[:4],
        *findings,
        "--charts-dir",
        str(res / "charts"),
        "--output",
        str(res / "summary.md"),
        "--html-output",
        str(res / "summary.html"),
    )

    speedups = pd.read_parquet(res / "speedups.parquet")
    assert len(speedups) == 3 and set(speedups["library"]) == {"torch"}
    crossover = pd.read_parquet(res / "crossovers.parquet").iloc[0]
    assert crossover["kind"] == "crosses"
    assert 100 < crossover["crossover_size"] < 10_000
    summary = (res / "summary.md").read_text(encoding="utf-8")
    assert "PyTorch beats NumPy on fft from n ≈" in summary
    assert "[time_fft](charts/time_fft.html)" in summary  # links relative to the summary
    for name in chart_names(["fft"]):  # every chart the summary links to was written
        assert f"[{name}](charts/{name}.html)" in summary
        assert {p.name for p in (res / "charts").glob(f"{name}.*")} == {
            f"{name}.{fmt}" for fmt in FORMATS
        }
    assert "| Cores (logical) | 4 |" in summary
    assert "<h2>Crossovers</h2>" in (res / "summary.html").read_text(encoding="utf-8")


def test_findings_and_charts_need_the_baseline():
    """The baseline is always passed in: neither script guesses it (the summary takes it from
    the findings)."""
    for script in ("findings.py", "charts.py"):
        proc = run_script(script, "--benchmarks", "b.parquet")
        assert proc.returncode == 2
        assert "--baseline-library" in proc.stderr and "--baseline-device" in proc.stderr
