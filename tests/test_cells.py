"""Inputs, operations and the supervised cell, run in-process on small sizes."""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import make_spec

from numbench import inputs_file as inputs
from numbench import operations
from numbench.config import default_sizes
from numbench.contract import CELL_COLUMNS, CorruptFile, read_cell
from numbench.errors import MachineryFault
from numbench.measure.supervisor import run_cell, run_round

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}


def test_inputs_are_seeded_and_hold_the_reference(tmp_path):
    a = inputs.make("elementwise", 100, seed=7)
    b = inputs.make("elementwise", 100, seed=7)
    c = inputs.make("elementwise", 100, seed=8)
    np.testing.assert_array_equal(a["a"], b["a"])
    assert not np.array_equal(a["a"], c["a"])
    assert int(a["n_outputs"]) == 3
    np.testing.assert_allclose(a["ref_2"], np.sin(a["a"]))
    inputs.write("sort", 50, 1, tmp_path / "x.npz")
    with np.load(tmp_path / "x.npz") as d:
        assert np.all(np.diff(d["ref_0"]) >= 0)


@pytest.mark.parametrize("name", sorted(operations.OPERATIONS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_implementation_matches_reference(name, dtype):
    op = operations.get(name)
    data = inputs.make(name, default_sizes(name)[0], seed=1)
    ref = tuple(data[f"ref_{i}"] for i in range(int(data["n_outputs"])))
    fn = op.build("numpy", np, dtype)
    out = fn(*[data[n].astype(dtype) for n in op.input_names])
    assert operations.relative_error(out, ref if len(ref) > 1 else ref[0]) <= op.tolerance_for(
        "numpy", dtype
    )


def test_relative_error_detects_a_wrong_result():
    ref = np.arange(1.0, 11.0)
    assert operations.relative_error(ref, ref) == 0.0
    assert operations.relative_error(ref[::-1], ref) > 0.1
    assert operations.relative_error(np.full(10, np.nan), ref) == float("inf")
    with pytest.raises(ValueError):
        operations.relative_error(ref[:5], ref)


def test_mismatch_report_tells_one_wrong_element_from_a_result_a_little_off_everywhere():
    rng = np.random.default_rng(0)
    ref = (rng.uniform(-1.0, 1.0, 2000), rng.uniform(-1.0, 1.0, (40, 50)))
    flipped = ref[1].astype(np.float32)
    flipped[7, 3] = np.float32(ref[1][7, 3] + 0.5)  # one element wrong, the rest exact
    report = operations.mismatch_report((ref[0], flipped), ref, worst=2)
    lines = report.splitlines()
    assert lines[0].startswith("output 0 (float64, shape (2000,)): relative error 0;")
    assert "0 of 2000 elements off" in lines[0]
    assert lines[3].startswith("output 1 (float32, shape (40, 50)): relative error")
    assert "1 of 2000 elements off by more than 1e-3" in lines[3]
    assert lines[4].startswith("  [7, 3] ") and f"against {ref[1][7, 3]:.9g}" in lines[4]
    assert len(lines) == 6  # two outputs, each a line and its two worst elements

    blurred = ref[0] * (1 + 1e-2)
    report = operations.mismatch_report(blurred, ref[0], worst=1)
    assert "relative error 0.01;" in report
    far = int(np.sum(np.abs(ref[0]) * 1e-2 > 1e-3 * np.abs(ref[0]).max()))
    assert f"{far} of 2000 elements off" in report and far > 1000
    assert operations.mismatch_report(ref[0][:5], ref[0]).startswith(
        "output 0: shape (5,), reference (2000,)"
    )
    assert operations.mismatch_report((ref[0],), ref) == "expected 2 outputs, got 1"


def _spec(tmp_path, library, operation="sort", size=1000, dtype="float64", **kw):
    path = tmp_path / f"{operation}-{size}.npz"
    if not path.exists():
        inputs.write(operation, size, 3, path)
    return make_spec(
        library, "cpu", operation, size, path, FAST, dtype=dtype, timeout_s=kw.get("timeout", 120)
    )


def test_numpy_cell_writes_samples_and_metadata(tmp_path):
    out = tmp_path / "cell.parquet"
    meta = run_cell(_spec(tmp_path, "numpy"), out, lock=str(tmp_path / "lock"))
    assert meta.status == "ok", meta
    table = read_cell(out)
    assert table.column_names == CELL_COLUMNS
    df = table.to_pandas()
    assert len(df) == 3 and (df["seconds"] > 0).all() and (df["loops"] >= 1).all()
    row = df.iloc[0]
    assert row["status"] == "ok" and row["rel_error"] <= row["tolerance"]
    assert row["library_version"] == np.__version__
    assert row["import_s"] > 0 and row["first_call_s"] > 0 and row["peak_rss_mb"] > 0
    assert row["threads"] == 1 and row["host"] and row["device_name"]
    # sort gives bytes and no flops (its work is comparisons): a GB/s, no GFLOP/s
    assert pd.isna(row["gflop_per_s"]) and pd.isna(row["flops_exact"]) and row["gb_per_s"] > 0
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing behind


def test_a_cell_continues_from_its_early_round_file(tmp_path):
    spec = _spec(tmp_path, "numpy")
    spec = spec.replace(
        replicates={**spec.replicates.__dict__, "min": 2, "max": 2, "early_rounds": 1}
    )
    round_file = tmp_path / "r0.json"
    runs = run_round(spec, 0, round_file, lock=str(tmp_path / "lock"))
    assert [r.report.status for r in runs] == ["ok"]
    out = tmp_path / "cell.parquet"
    meta = run_cell(spec, out, lock=str(tmp_path / "lock"), earlier=[round_file])
    assert meta.status == "ok" and meta.meta.replicates == 2
    df = read_cell(out).to_pandas()
    first = df.groupby("replicate")["process_started_unix"].first()
    assert list(first.index) == [0, 1] and first[0] == runs[0].started_unix
    assert first[0] < df["locked_from_unix"].iloc[0] < first[1]  # round 0 before the job


def test_an_unreadable_early_round_fails_the_job_names_the_file_and_removes_it(tmp_path):
    """A round file is numbench's own: one it cannot read is no fault of the library. The
    job fails with no cell file, and the file goes, so the next run measures the round."""
    spec = _spec(tmp_path, "numpy")
    bad = tmp_path / "r0.json"
    bad.write_text("{truncated")
    out = tmp_path / "cell.parquet"
    with pytest.raises(MachineryFault) as err:
        run_cell(spec, out, lock=str(tmp_path / "lock"), earlier=[bad])
    assert str(bad) in str(err.value) and "not a readable early round" in str(err.value)
    assert "next run measures that round again" in str(err.value)
    assert not out.exists() and not bad.exists()


def test_a_round_file_with_a_bad_activity_entry_fails_the_job_before_it_measures(tmp_path):
    """A round's activity figures are combined after the lock is released: a bad one is
    refused as the round files are read, as a fault of numbench's machinery naming the file,
    never a traceback that loses the cell's measurement."""
    from numbench.measure.replicates import write_round

    spec = _spec(tmp_path, "numpy")
    spec = spec.replace(replicates={**spec.replicates.__dict__, "early_rounds": 1})
    bad = tmp_path / "r0.json"
    write_round(bad, spec, [], wall_s=1.0, activity={"other_cpu_share": "n/a"})
    out = tmp_path / "cell.parquet"
    with pytest.raises(MachineryFault) as err:
        run_cell(spec, out, lock=str(tmp_path / "lock"), earlier=[bad])
    assert str(bad) in str(err.value) and "activity's other_cpu_share is 'n/a'" in str(err.value)
    assert not out.exists() and not bad.exists()


def test_unsupported_cell_says_why(tmp_path):
    out = tmp_path / "fft.parquet"
    meta = run_cell(_spec(tmp_path, "numba", "fft", 1024), out, lock=str(tmp_path / "lock"))
    assert meta.status == "unsupported"
    df = pq.read_table(out).to_pandas()
    assert len(df) == 1 and df["seconds"].isna().all()
    assert "FFT" in df["error"].iloc[0]


def test_gpu_cell_is_unavailable_on_a_cpu_host(tmp_path):
    spec = _spec(tmp_path, "torch").replace(device="gpu")
    meta = run_cell(spec, tmp_path / "gpu.parquet", lock=str(tmp_path / "lock"))
    assert meta.status == "unavailable"
    assert "no CUDA device visible to torch" in meta.error


def test_timeout_kills_the_worker(tmp_path):
    spec = _spec(tmp_path, "numpy", "grad", 10000, timeout=0.5)
    spec = spec.replace(timing={**FAST, "min_samples": 100, "max_samples": 100, "budget_s": 100})
    meta = run_cell(spec, tmp_path / "t.parquet", lock=str(tmp_path / "lock"))
    assert meta.status == "timeout" and "cell_timeout_s" in meta.error


def test_corrupt_cell_file_names_itself_and_the_fix(tmp_path):
    bad = tmp_path / "results" / "cells" / "numpy" / "cpu" / "sort" / "10.parquet"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not parquet")
    with pytest.raises(CorruptFile) as err:
        read_cell(bad)
    assert str(bad) in str(err.value) and "snakemake" in str(err.value)


@pytest.mark.e2e
def test_a_worker_leaves_no_temporary_file_behind(tmp_path, monkeypatch):
    """Workers leave without the interpreter's teardown, so TensorFlow never deletes its
    autograph modules itself: they go to the worker's own folder, removed with it."""
    import tempfile

    from numbench import inputs_file as inputs
    from numbench.measure.process import run_worker

    path = tmp_path / "elementwise-1000.npz"
    inputs.write("elementwise", 1000, 1, path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # this process
    monkeypatch.setenv("TMPDIR", str(scratch))  # what a worker would inherit
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 2, "budget_s": 0.01}
    report = run_worker(make_spec("tensorflow", "cpu", "elementwise", 1000, str(path), timing))
    assert report.status == "ok", report.error
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_results_get_the_mode_a_plain_write_gives(tmp_path, umask, mode):
    """Cell files, rounds, inputs and tables are readable by whom the user's umask says (a
    group sharing results/), not only by their owner as mkstemp's 0600 would have it."""
    from numbench.contract import write_text_atomic

    spec = _spec(tmp_path, "numpy")
    before = os.umask(umask)
    try:
        run_cell(spec, tmp_path / "cell.parquet", lock=str(tmp_path / "lock"))
        run_round(spec, 0, tmp_path / "r0.json", lock=str(tmp_path / "lock"))
        inputs.write("sort", 10, 1, tmp_path / "inputs.npz")
        write_text_atomic("# summary", tmp_path / "summary.md")
    finally:
        os.umask(before)
    for name in ("cell.parquet", "r0.json", "inputs.npz", "summary.md"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_cell_records_the_cpus_its_worker_really_had(tmp_path):
    """Under a cluster the job may get fewer CPUs than the config's threads: each worker
    records the CPUs it could run on (``cpus_allowed``), beside the threads asked, in the
    cell file and in benchmarks.parquet, with a note where they differ."""
    from numbench.analyse.aggregate import aggregate

    spec = _spec(tmp_path, "numpy")
    out = tmp_path / "cells" / "t1.parquet"
    run_cell(spec, out, lock=str(tmp_path / "lock"))
    row = read_cell(out).to_pylist()[0]
    assert row["threads"] == 1 and row["cpus_allowed"] == 1 and row["threads_note"] is None

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])  # a one-CPU allocation
    two = spec.replace(threads=2)
    out2 = tmp_path / "cells" / "t2.parquet"
    run_cell(two, out2, lock=str(tmp_path / "lock"))
    row = read_cell(out2).to_pylist()[0]
    assert row["status"] == "ok" and row["threads"] == 2 and row["cpus_allowed"] == 1
    assert "asked for 2 threads, the worker may run on 1 CPUs" in row["threads_note"]

    bench = tmp_path / "benchmarks.parquet"
    aggregate([out, out2], bench)
    got = {r["threads"]: r["cpus_allowed"] for r in pq.read_table(bench).to_pylist()}
    assert got == {1: 1, 2: 1}
