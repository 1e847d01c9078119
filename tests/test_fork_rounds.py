"""benchmarks/fork_rounds.py on a small NumPy cell: both ways give the worker's report, the
forked children run in the zygote (which held one thread when it forked), the figures are
made from the rounds, and a child that never answers is seen as hung. No time is asserted."""

from __future__ import annotations

import os
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import fork_rounds  # noqa: E402

TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 5, "budget_s": 0.01}


def test_both_ways_measure_the_cell_with_the_worker(tmp_path):
    rows, zygotes = fork_rounds.study([("numpy", "sort", 1000)], 2, TIMING, str(tmp_path))
    cell = "numpy sort 1000"
    assert [(r["way"], r["round"]) for r in rows] == [
        ("fresh", 0),
        ("forked", 0),
        ("forked", 1),
        ("fresh", 1),
    ]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    assert all(3 <= len(r["samples_s"]) <= 5 for r in rows)
    forked = [r for r in rows if r["way"] == "forked"]
    assert all(r["threads_at_fork"] == 1 and r["fork_s"] is not None for r in forked)
    assert zygotes[cell]["threads"] == 1
    for way in ("fresh", "forked"):
        s = fork_rounds.summary(rows, cell, way)
        assert s["rounds_ok"] == 2 and s["max_over_min"] >= 1.0
        assert s["unstable_sets"] == "0/0"  # two rounds make no set of four
    assert fork_rounds.summary(rows, cell, "forked")["paired_ratio"] > 0
    lines = fork_rounds.table([fork_rounds.summary(rows, cell, w) for w in ("fresh", "forked")])
    assert len(lines) == 4


def test_a_child_that_never_answers_is_hung():
    read_end, write_end = os.pipe()
    try:
        assert fork_rounds._read_within(read_end, 0.05) == (b"", True)
        os.write(write_end, b"{}")
        os.close(write_end)
        assert fork_rounds._read_within(read_end, 5.0) == (b"{}", False)
    finally:
        os.close(read_end)


def test_output_lines_drop_the_native_log_prefix():
    text = "I0000 00:00:1795770179.226054    9791 port.cc:153] oneDNN on\nW1127 09:01:02.5 7 x] y\n"
    assert fork_rounds.output_lines(text + text) == ["port.cc:153] oneDNN on", "x] y"]


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--rounds", "1"], "a whole number >= 2"),
        (["--cells", "numpy:sort"], "library:operation:size"),
        (["--cells", "numpy:sort:0"], "library:operation:size"),
        (["--cells", "cupy:sort:100"], "one of numpy"),
        (["--cells", "numpy:nosuch:100"], "'nosuch'"),
    ],
)
def test_bad_arguments_are_refused_with_a_message(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        fork_rounds.arguments(argv)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err


def test_the_default_cells_are_the_five():
    cells = fork_rounds.arguments([]).cells
    assert [c[0] for c in cells] == ["numpy", "torch", "jax", "numba", "tensorflow"]
