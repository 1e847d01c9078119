"""The benchmark scripts' command lines and the checks they make before measuring anything
(benchmarks/reproducibility.py, jax_long_process.py, triad_check.py): bad input stops with a
message naming the problem, never a traceback halfway through a run."""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd
import pytest
from conftest import REPO, make_spec

sys.path.insert(0, str(REPO / "benchmarks"))

import jax_long_process  # noqa: E402
import reproducibility  # noqa: E402
import triad_check  # noqa: E402


def refused(parse, argv: list[str], capsys) -> str:
    """What argparse said refusing ``argv`` (it exits with status 2)."""
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


# -- reproducibility.py --------------------------------------------------------------------------
def test_reproducibility_reads_disturb_b_as_two_whole_numbers(capsys):
    assert reproducibility.arguments(["--disturb-b", "1,2"]).disturb_b == (1, 2)
    assert reproducibility.arguments(["--disturb-b", "0,0"]).disturb_b == (0, 0)
    assert reproducibility.arguments([]).disturb_b is None
    for bad in ("1", "a,b", "1,2,3", "-1,1", "1.5,1", ""):
        # "--disturb-b=-1,1": a separate "-1,1" would read as an option
        err = refused(reproducibility.arguments, [f"--disturb-b={bad}"], capsys)
        assert f"{bad!r}: CPU,MEMORY: two whole numbers >= 0" in err


def test_reproducibility_refuses_run_options_beside_results(capsys):
    """--results runs nothing: --disturb-b and --keep would be silently ignored."""
    args = reproducibility.arguments(["--results", "a", "b", "--configfile", "c.yaml"])
    assert args.results == ["a", "b"] and args.configfile == "c.yaml"
    err = refused(reproducibility.arguments, ["--results", "a", "b", "--disturb-b", "1,1"], capsys)
    assert "--disturb-b acts on the two runs this script makes; --results runs none" in err
    err = refused(reproducibility.arguments, ["--keep", "k", "--results", "a", "b"], capsys)
    assert "--keep acts on the two runs" in err


# -- jax_long_process.py -------------------------------------------------------------------------
def test_jax_long_process_needs_two_rounds_and_name_value_variables(capsys):
    args = jax_long_process.arguments(["--rounds", "2", "--env", "A=1", "--env", "B=x=y"])
    assert args.rounds == 2 and dict(args.env) == {"A": "1", "B": "x=y"}
    assert jax_long_process.arguments(["--env", "EMPTY="]).env == [("EMPTY", "")]
    # the first round is a warm-up the figures leave out: one round would leave none
    for rounds in ("1", "0", "two"):
        err = refused(jax_long_process.arguments, ["--rounds", rounds], capsys)
        assert f"{rounds!r}: a whole number >= 2" in err
    for env in ("FOO", "=1"):
        err = refused(jax_long_process.arguments, ["--env", env], capsys)
        assert f"{env!r}: NAME=VALUE" in err
    assert "a whole number >= 1" in refused(jax_long_process.arguments, ["--calls", "0"], capsys)


def test_jax_long_process_stops_with_the_worker_s_reason_when_the_cell_cannot_run(
    tmp_path, monkeypatch
):
    """An inputs file drawn with another seed: the long process says so, as a worker would,
    instead of failing to unpack what the worker's step returned."""
    from numbench import libraries
    from numbench.measure import inputs

    monkeypatch.setattr(libraries, "pin_cpus", lambda threads: None)  # leave pytest unpinned
    path = tmp_path / "sort-100.npz"
    inputs.write("sort", 100, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    spec = make_spec("numpy", "cpu", "sort", 100, path, timing).replace(seed=4)
    with pytest.raises(SystemExit) as stop:
        jax_long_process.long_lived(spec.to_json(), 2, 3)
    assert "the cell cannot run in the long process (failed)" in str(stop.value.code)
    assert "drawn with seed 3 but the cell asks for seed 4" in str(stop.value.code)


# -- triad_check.py ------------------------------------------------------------------------------
def dram_row(l3: float | None, l2: float | None, candidates=None) -> pd.Series:
    return pd.Series({"l3_bytes": l3, "l2_bytes": l2, "candidates": candidates})


def test_triad_check_sizes_its_arrays_from_the_cache_or_the_option():
    size, words = triad_check.array_size(dram_row(32 * 2**20, 2**20), None, "r.parquet")
    assert size == 4 * 32 * 2**20 and words == "4x the roofs' last-level cache of 32 MiB"
    size, words = triad_check.array_size(dram_row(math.nan, 2**20), None, "r.parquet")
    assert size == 4 * 2**20 and "of 1 MiB" in words
    # --array-mib: its own size, and no words about the cache it did not come from
    assert triad_check.array_size(dram_row(32 * 2**20, 2**20), 8.0, "r.parquet") == (
        8 * 2**20,
        None,
    )
    assert triad_check.array_size(dram_row(None, math.nan), 8.0, "r.parquet")[0] == 8 * 2**20


def test_triad_check_stops_naming_the_roofs_file_with_no_cache_size():
    with pytest.raises(SystemExit) as stop:
        triad_check.array_size(dram_row(math.nan, None), None, "results/roofs.parquet")
    said = str(stop.value.code)
    assert said.startswith("results/roofs.parquet records no last-level cache")
    assert "--array-mib" in said


def test_triad_check_reads_missing_candidates_as_none():
    for empty in (None, math.nan, ""):
        assert triad_check.candidates_of(dram_row(1.0, 1.0, empty)) == {}
        assert triad_check.roof_triad(dram_row(1.0, 1.0, empty)) is None
    row = dram_row(1.0, 1.0, '{"numpy triad": 12.5, "numba triad": 14.0, "copy": 20.0}')
    assert triad_check.roof_triad(row) == 14.0
    for bad in ("0", "-1", "nan", "inf", "lots"):
        with pytest.raises(argparse.ArgumentTypeError, match="MiB per array, a number above 0"):
            triad_check.positive_mib(bad)
    assert triad_check.positive_mib("0.5") == 0.5
