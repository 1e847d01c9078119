"""The run's headline: quiet or busy, decided from the cells' records of the machine
(``numbench.machine.analyse``), kept in the findings table and worded as the summary's
first line."""

from __future__ import annotations

import pytest
from conftest import MARGIN, constructed_results
from summarise import summarise, through_table

from numbench.analyse.findings import decide
from numbench.machine.analyse import machine_quality
from numbench.machine.contract import BUSY_MACHINE_SHARE, MachineQuality


def with_machine(busy_fraction: float, other_busy=0.45, other_quiet=0.02):
    """The constructed results, every ok cell's machine recorded: the first
    ``busy_fraction`` of them (in table order) beside other processes taking
    ``other_busy`` of the CPUs, the rest ``other_quiet``; steal 1% everywhere."""
    bench, speedups, crossovers = constructed_results()
    bench = bench.copy()
    ok = bench.index[bench["status"] == "ok"]
    busy = ok[: round(busy_fraction * len(ok))]
    bench["other_cpu_share"], bench["steal_share"], bench["load_avg_1m"] = other_quiet, 0.01, 1.0
    bench.loc[busy, "other_cpu_share"] = other_busy
    return bench, speedups, crossovers, busy


def first_line(text: str) -> str:
    return text.split("\n")[2]


def test_a_quiet_set_of_cells_says_quiet_with_its_figures():
    bench, speedups, crossovers, _ = with_machine(0.0)
    m = machine_quality(bench, speedups)
    assert m.quiet is True and m.busy_cells == 0
    assert m.watched == int((bench["status"] == "ok").sum())
    assert m.other_cpu_share == pytest.approx(0.02) and m.steal_share == pytest.approx(0.01)
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Quiet machine**: while the cells measured, other processes took 2%")
    assert "(steal) 1%" in line
    assert f"0 of the {m.watched} measured busy (others above {BUSY_MACHINE_SHARE:.0%}" in line


def test_a_busy_set_of_cells_says_busy_with_its_figures_and_the_verdicts_it_puts_in_doubt():
    bench, speedups, crossovers, busy = with_machine(0.6)
    speedups = speedups.copy()
    speedups["settled"] = True
    # two verdicts in doubt: one of a cell measured busy, one of a quiet cell
    busy_cell = bench.loc[busy[-1]]
    quiet_cell = bench.loc[bench.index[(bench["status"] == "ok")][-1]]
    for cell in (busy_cell, quiet_cell):
        row = (speedups["library"] == cell["library"]) & (speedups["size"] == cell["size"])
        row &= speedups["operation"] == cell["operation"]
        assert row.sum() == 1, "each chosen cell has a speedup"
        speedups.loc[row, "settled"] = False
    bench.loc[busy[:3], "unstable"] = True
    m = machine_quality(bench, speedups)
    assert m.quiet is False and m.busy_cells == len(busy)
    assert m.other_cpu_share == pytest.approx(0.45) and m.busiest_share == pytest.approx(0.46)
    assert (m.unstable_cells, m.busy_unstable) == (3, 3)
    assert (m.in_doubt, m.busy_in_doubt) == (2, 1)
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Busy machine**: while the cells measured, other processes took 45%")
    assert f"{len(busy)} of the {m.watched} measured busy" in line
    assert "the busiest at 46%" in line
    assert "3 of" in line and "cells unstable (3 of them measured busy)" in line
    assert (
        "2 of" in line
        and "verdicts in doubt, 1 of them measured while the machine was busy" in line
    )


def test_one_busy_cell_in_ten_is_still_a_quiet_run_and_one_more_is_busy():
    bench, speedups, *_ = with_machine(0.0)
    ok = bench.index[bench["status"] == "ok"]
    limit = int(0.10 * len(ok))
    bench.loc[ok[:limit], "other_cpu_share"] = 0.5
    assert machine_quality(bench, speedups).quiet is True
    bench.loc[ok[: limit + 1], "other_cpu_share"] = 0.5
    assert machine_quality(bench, speedups).quiet is False


def test_cells_that_did_not_record_the_machine_say_so_and_judge_nothing():
    bench, speedups, crossovers = constructed_results()
    m = machine_quality(bench, speedups)
    assert m.quiet is None and m.watched == 0 and m.other_cpu_share is None
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Machine not watched**")
    older = bench.drop(columns=["other_cpu_share", "steal_share", "load_avg_1m"])
    assert machine_quality(older, speedups).quiet is None


def test_the_figures_are_kept_in_the_findings_table_for_later_comparison():
    bench, speedups, crossovers, _ = with_machine(0.6)
    findings = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    again = through_table(findings).machine
    assert isinstance(again, MachineQuality) and again == findings.machine
    assert again.quiet is False and again.other_cpu_share == pytest.approx(0.45)


# -- the sentinel ---------------------------------------------------------------------------
def test_the_sentinel_s_spread_is_in_the_headline_and_the_findings():
    """Injected sentinel times: 10 ms at first, the machine slowing to 12.5 ms by the end
    (one cell with none: not timed); the spread is the slowest over the fastest."""
    bench, speedups, crossovers, _ = with_machine(0.0)
    bench = bench.copy()
    bench["sentinel_s"] = [0.010 + 0.0025 * i / (len(bench) - 1) for i in range(len(bench))]
    bench.loc[bench.index[1], "sentinel_s"] = None
    findings = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    m = findings.machine
    assert m.sentinel_cells == len(bench) - 1
    assert m.sentinel_fastest_s == pytest.approx(0.010)
    assert m.sentinel_slowest_s == pytest.approx(0.0125)
    assert m.sentinel_spread == pytest.approx(1.25)
    assert through_table(findings).machine == m  # kept in findings.parquet's machine row
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Quiet machine**")
    said = f"the sentinel (a fixed sort timed before each cell) spread 1.25x over {len(bench) - 1}"
    assert said + " cells (10 ms to 12.5 ms;" in line
    # the same sentinel a busy run: said there too
    busy = with_machine(0.6)[0].assign(sentinel_s=bench["sentinel_s"])
    line = first_line(summarise(busy, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Busy machine**") and said in line


def test_without_two_sentinel_times_no_spread_is_said():
    bench, speedups, crossovers, _ = with_machine(0.0)
    m = machine_quality(bench, speedups)  # no sentinel_s column: cells before contract 8
    assert m.sentinel_cells == 0 and m.sentinel_spread is None
    one = bench.assign(sentinel_s=None)
    one.loc[one.index[0], "sentinel_s"] = 0.01
    m = machine_quality(one, speedups)
    assert m.sentinel_cells == 1 and m.sentinel_spread is None
    line = first_line(summarise(one, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert "sentinel" not in line


# -- where the time went (item: time on a busy machine) --------------------------------------
def with_times(capped_cell: tuple[str, str, int] | None = None):
    """The constructed results with injected timings: every cell 30 s over min = 2 rounds;
    the jax fft cells took 4 rounds (2 added by the stopping rule) and one of them a round
    measured again; ``capped_cell`` (library, operation, size) was stopped by a 60 s cap."""
    bench, speedups, crossovers, busy = with_machine(0.0)
    bench = bench.copy()
    settings = '{"lockstep": true, "max_cell_s": 60.0, "min": 2}'
    bench["wall_s"], bench["replicates"], bench["set_aside"] = 30.0, 2, 0
    bench["replicate_settings"], bench["capped"] = settings, False
    jax_fft = (bench["library"] == "jax") & (bench["operation"] == "fft")
    bench.loc[jax_fft, ["wall_s", "replicates"]] = [60.0, 4]
    bench.loc[bench.index[jax_fft][0], ["wall_s", "set_aside"]] = [75.0, 1]
    if capped_cell is not None:
        library, operation, size = capped_cell
        row = (bench["library"] == library) & (bench["operation"] == operation)
        row &= bench["size"] == size
        bench.loc[row, ["capped", "wall_s", "replicates"]] = [True, 62.0, 3]
    return bench, speedups, crossovers


def test_the_summary_says_how_long_the_cells_took_and_where_the_time_went():
    bench, speedups, crossovers = with_times()
    t = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).run_time
    jax_fft = int(((bench["library"] == "jax") & (bench["operation"] == "fft")).sum())
    assert t.cells == len(bench) and t.capped == 0
    assert t.total_s == pytest.approx(30.0 * (len(bench) - jax_fft) + 60.0 * jax_fft + 15.0)
    assert t.added_rounds == 2 * jax_fft and t.retries == 1
    # 60 s over 4 rounds: 15 s a round; the retried cell 75 s over 5 attempts, the same
    assert t.added_s == pytest.approx(2 * 15.0 * jax_fft) and t.retries_s == pytest.approx(15.0)
    text = summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    line = text.split("\n")[4]
    assert line.startswith(f"Time: the {len(bench)} cells took ")
    assert (
        f"the stopping rule added {2 * jax_fft} rounds for verdicts in doubt (about 1 min 30 s)"
        in line
    )
    assert "1 round measured again because other programs took the CPUs (about 15 s)" in line


def test_a_cell_stopped_by_the_time_cap_says_so_with_its_verdict():
    bench, speedups, crossovers = with_times(("torch", "fft", 1000))
    f = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert f.run_time.capped == 1
    text = summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert "1 cell stopped early at the time cap (`replicates.max_cell_s`" in text
    warn = text.split("## Warnings")[1]
    assert "Cells stopped early by the time cap (`replicates.max_cell_s` = 60 s)" in warn
    verdict = speedups.loc[
        (speedups["library"] == "torch")
        & (speedups["operation"] == "fft")
        & (speedups["size"] == 1000),
        "verdict",
    ].item()
    assert f"- torch (cpu) fft n = 10^3: 3 rounds in 1 min 02 s; verdict {verdict}" in warn


def test_the_waits_for_quiet_are_reported():
    bench, speedups, crossovers = with_times()
    assert decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).run_time.waited_cells is None
    bench["quiet_wait_s"], bench["quiet_reached"] = 1.0, True
    first, second = bench.index[:2]
    bench.loc[first, ["quiet_wait_s", "quiet_reached"]] = [120.0, True]
    bench.loc[second, ["quiet_wait_s", "quiet_reached"]] = [300.0, False]
    t = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN).run_time
    assert (t.waited_cells, t.not_quiet) == (len(bench), 1)
    assert t.waited_s == pytest.approx(420.0 + len(bench) - 2)
    text = summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert f"{len(bench)} cells waited 7 min {len(bench) - 2:02d} s in all for the machine" in text
    assert "1 of them measured still busy at its limit" in text


def test_one_of_anything_is_said_in_the_singular():
    from numbench.machine.report import machine_line

    m = MachineQuality(False, 1, 1, 0.86, 0.0, 0.86, 1, 1, 1, 1, 1, 0)
    line = machine_line(m)
    assert "(medians over 1 cell); 1 of the 1 measured busy" in line
    assert "1 of 1 cell unstable" in line and "1 of 1 verdict in doubt, none of them" in line


# -- the workflow's own share (Snakemake's scheduler): told beside, never counted -----------
def test_a_machine_busy_only_with_the_workflow_itself_reads_quiet_and_says_its_share():
    """Every cell's record: others 1%, the workflow's own processes 29% (Snakemake's
    scheduler, taken out of other_cpu_share by the cell's watch)."""
    bench, speedups, crossovers, _ = with_machine(0.0, other_quiet=0.01)
    bench["workflow_cpu_share"] = 0.29
    m = machine_quality(bench, speedups)
    assert m.quiet is True and m.busy_cells == 0
    assert m.workflow_cpu_share == pytest.approx(0.29)
    assert m.busiest_share == pytest.approx(0.02)  # others and steal: the workflow is not in it
    findings = decide(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    assert through_table(findings).machine == findings.machine == m
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Quiet machine**: while the cells measured, other processes took 1%")
    assert "; the workflow itself took 29% (median; Snakemake's scheduler" in line


def test_others_busy_beside_the_workflow_still_read_busy_with_both_shares():
    bench, speedups, crossovers, busy = with_machine(0.6)
    bench["workflow_cpu_share"] = 0.05
    m = machine_quality(bench, speedups)
    assert m.quiet is False and m.busy_cells == len(busy)
    assert m.other_cpu_share == pytest.approx(0.45)
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Busy machine**: while the cells measured, other processes took 45%")
    assert "the workflow itself took 5%" in line


def test_an_older_benchmarks_table_without_the_workflow_s_share_still_reads(tmp_path):
    """A benchmarks.parquet from before contract 9: no ``workflow_cpu_share`` column (its
    other_cpu_share holds the workflow's share); the headline says nothing of it."""
    from numbench.analyse.findings import write_findings
    from numbench.contract.conclusions import read_findings

    bench, speedups, crossovers, _ = with_machine(0.0)
    bench = bench.drop(columns=["workflow_cpu_share"])
    paths = {n: tmp_path / f"{n}.parquet" for n in ("benchmarks", "speedups", "crossovers")}
    for name, frame in zip(paths, (bench, speedups, crossovers), strict=True):
        frame.to_parquet(paths[name])
    out = tmp_path / "findings.parquet"
    findings = write_findings(*paths.values(), out, "numpy", "cpu", MARGIN)
    m = read_findings(out).machine
    assert m == findings.machine and m.quiet is True and m.workflow_cpu_share is None
    line = first_line(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN))
    assert line.startswith("**Quiet machine**") and "workflow itself" not in line
    # a findings row written before the field: read with it unknown
    import json

    from numbench.contract.conclusions import findings_from_rows, findings_rows

    rows = findings_rows(findings)
    for row in rows:
        if row["topic"] == "machine":
            detail = json.loads(row["detail"])
            del detail["workflow_cpu_share"]
            row["detail"] = json.dumps(detail)
    assert findings_from_rows(rows).machine.workflow_cpu_share is None
