"""The benchmark scripts' command lines and the checks they make before measuring anything
(benchmarks/reproducibility.py): bad input stops with a message naming the problem, never a
traceback halfway through a run."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import reproducibility  # noqa: E402


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
