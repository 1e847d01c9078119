"""A cell's record of the whole machine while it measured (``numbench.measure.activity``):
other processes' share of all CPUs' time and the hypervisor's steal from two constructed
``/proc/stat`` readings, the cell's own CPU time taken out; the load; unknown without
``/proc``; and a real cell's row carrying the three columns."""

from __future__ import annotations

import pytest

from numbench.measure.activity import (
    ActivityWatch,
    read_cpu_ticks,
    read_load_1m,
    shares,
)

#: user nice system idle iowait irq softirq steal: 400 ticks pass (2 CPUs, 2 s at 100 Hz)
BEFORE = [1000, 0, 500, 10000, 100, 0, 0, 0]
AFTER = [1200, 0, 540, 10120, 120, 0, 0, 20]


def test_other_processes_share_is_the_busy_ticks_less_the_cells_own():
    # 240 busy ticks (user 200, system 40) of 400; steal 20 (5%); the cell's processes ran
    # 1.5 CPU seconds = 150 ticks: 90 ticks of other work, 22.5%
    other, steal = shares(BEFORE, AFTER, own_s=1.5, ticks_per_s=100)
    assert other == pytest.approx(90 / 400) and steal == pytest.approx(20 / 400)
    # the cell's own time read a tick high: never below 0
    other, _ = shares(BEFORE, AFTER, own_s=2.5, ticks_per_s=100)
    assert other == 0.0
    assert shares(None, AFTER, 1.0, 100) == (None, None)
    assert shares(BEFORE, BEFORE, 0.0, 100) == (None, None)  # no tick passed


def test_the_watch_reads_at_its_start_and_its_stop():
    readings = iter([BEFORE, AFTER])
    own = iter([10.0, 11.5])
    watch = ActivityWatch(
        ticks=lambda: next(readings), own_s=lambda: next(own), load=lambda: 1.25, ticks_per_s=100
    )
    got = watch.stop()
    assert got.other_cpu_share == pytest.approx(0.225) and got.steal_share == pytest.approx(0.05)
    assert got.load_avg_1m == 1.25


def test_without_proc_everything_is_unknown(tmp_path):
    assert read_cpu_ticks(tmp_path) is None and read_load_1m(tmp_path) is None
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\n")
    (tmp_path / "proc/loadavg").write_text("0.75 0.5 0.25 1/100 9\n")
    assert read_cpu_ticks(tmp_path) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert read_load_1m(tmp_path) == 0.75
    watch = ActivityWatch(ticks=lambda: None, own_s=lambda: 0.0, load=lambda: None)
    got = watch.stop()
    assert (got.other_cpu_share, got.steal_share, got.load_avg_1m) == (None, None, None)


def test_a_cell_row_records_the_machine_while_it_measured(tmp_path):
    from conftest import make_spec

    from numbench.contract import read_cell
    from numbench.measure import inputs
    from numbench.measure.supervisor import run_cell

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 3, "budget_s": 0.01}
    out = tmp_path / "cell.parquet"
    meta = run_cell(make_spec("numpy", "cpu", "sort", 1000, str(path), timing), out)
    assert meta.status == "ok", meta
    row = read_cell(out).to_pylist()[0]
    assert 0.0 <= row["other_cpu_share"] <= 1.0 and 0.0 <= row["steal_share"] <= 1.0
    assert row["load_avg_1m"] >= 0.0
    assert row["sentinel_s"] > 0.0  # the real sentinel, timed before the cell measured
    # the sentinel's time as given (the tests inject theirs), on every row of the cell
    spec = make_spec("numpy", "cpu", "sort", 1000, str(path), timing)
    run_cell(spec, out, sentinel=lambda: 0.0123)
    assert set(read_cell(out).column("sentinel_s").to_pylist()) == {0.0123}


def test_the_sentinel_is_the_fastest_of_its_timed_calls_after_an_untimed_one():
    from numbench.measure.sentinel import (
        SENTINEL_KERNEL,
        SENTINEL_SIZE,
        sentinel_kernel,
        time_sentinel,
    )

    calls = []
    ticks = iter([0.0, 0.030, 1.0, 1.012, 2.0, 2.020])  # calls of 30, 12 and 20 ms
    best = time_sentinel(lambda: calls.append(1), clock=lambda: next(ticks), repeats=3)
    assert best == pytest.approx(0.012) and len(calls) == 4
    assert time_sentinel(lambda: None, repeats=1) >= 0.0
    with pytest.raises(ValueError, match="at least one timed call, not 0"):
        time_sentinel(lambda: None, repeats=0)
    # the kernel is the same every time: its values come from a fixed seed
    first, again = sentinel_kernel()(), sentinel_kernel()()
    assert "sort" in SENTINEL_KERNEL and len(first) == SENTINEL_SIZE
    assert (first == again).all() and (first[1:] >= first[:-1]).all()
