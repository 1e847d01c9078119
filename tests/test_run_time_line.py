"""Where a run's wall time went (``numbench.machine.analyse.timeline``), from hand-made records: the
parts, each worked out by hand below, sum to the wall exactly, and the summary says how much
of it was measurement."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from summarise import through_table

from numbench.contract.facts import Findings
from numbench.machine.analyse import run_time, timeline
from numbench.machine.report import time_line
from numbench.report.sections import run_time_section

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC).timestamp()


def at(seconds: float) -> str:
    """``started_at`` of a job started ``seconds`` after T0 (whole seconds, as written)."""
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC).isoformat(timespec="seconds")


def cell(library, paired_with, replicates, import_s, first_s, sampling_s, **more) -> dict:
    return {
        "library": library,
        "device": "cpu",
        "operation": "sort",
        "size": 1000,
        "dtype": "float64",
        "threads": 1,
        "host": "h",
        "status": "ok",
        "paired_with": paired_with,
        "replicates": replicates,
        "import_s": import_s,
        "first_call_s": first_s,
        "sampling_s": sampling_s,
        **more,
    }


def records() -> tuple[pd.DataFrame, pd.DataFrame]:
    """NumPy's own cell: 2 rounds, its job from 10 s to its lock's end at 20 s, 10.5 s of
    wall (0.5 s of it an early round), 1 s waiting for quiet. torch's, paired with it: 3
    rounds, its job from 25 s, the lock taken at 27.5 s and let go at 40 s, 18 s of wall (3 s
    of early rounds). The roofs: one job from 0 to 5 s (two roofs, one stretch), one from
    45 to 47 s."""
    bench = pd.DataFrame(
        [
            cell(
                "numpy", None, 2, 0.5, 0.1, 2.0,
                pipelined_sampling_s=None, started_at=at(10), locked_from_unix=T0 + 10.2,
                locked_until_unix=T0 + 20, wall_s=10.5, quiet_wait_s=1.0,
            ),
            cell(
                "torch", "numpy/cpu", 3, 2.0, 0.5, 1.5,
                pipelined_sampling_s=0.6, started_at=at(25), locked_from_unix=T0 + 27.5,
                locked_until_unix=T0 + 40, wall_s=18.0, quiet_wait_s=None,
            ),
        ]
    )  # fmt: skip
    roofs = pd.DataFrame(
        {
            "roof": ["dram", "compute", "dram"],
            "locked_from_unix": [T0, T0, T0 + 45],
            "locked_until_unix": [T0 + 5, T0 + 5, T0 + 47],
        }
    )
    return bench, roofs


def test_the_parts_are_the_records_summed_by_hand_and_sum_to_the_wall():
    bench, roofs = records()
    t = timeline(bench, roofs, finished_unix=T0 + 60)
    # the run began with the roofs (the cells' start less their early rounds: 10 - 3.5)
    assert t.started_unix == pytest.approx(T0) and t.ended_unix == pytest.approx(T0 + 60)
    assert t.wall_s == pytest.approx(60.0)
    # numpy 0.5 x 2; torch 2.0 x 3; its baseline beside each round 0.5 x 3
    assert t.imports_s == pytest.approx(1.0 + 6.0 + 1.5)
    assert t.first_calls_s == pytest.approx(0.2 + 1.5 + 0.3)
    # numpy 2.0; torch 1.5 + 0.6 pipelined; its baseline 2.0 / 2 rounds a process, x 3
    assert t.sampling_s == pytest.approx(2.0 + 2.1 + 3.0)
    assert t.quiet_waits_s == pytest.approx(1.0)
    # torch waited 2.5 s for the lock, 1.5 s of it past its start's whole second; numpy 0.2
    assert t.lock_waits_s == pytest.approx(1.5)
    assert t.roofs_s == pytest.approx(5.0 + 2.0)
    assert t.analysis_s == pytest.approx(60.0 - 47.0)
    assert t.other_s == pytest.approx(60.0 - 40.1)
    parts = (
        t.imports_s, t.first_calls_s, t.sampling_s, t.quiet_waits_s, t.lock_waits_s,
        t.roofs_s, t.analysis_s, t.other_s,
    )  # fmt: skip
    assert sum(parts) == pytest.approx(t.wall_s, abs=1e-9)


def test_a_zygotes_import_counts_once_where_the_cells_say_what_they_paid():
    """Workers forked from a zygote (``import_paid_s``): torch's 3 processes paid 2.3 s of
    import in all (the zygote's 2.0 s in the first, 0.1 s each of their own), not 3 x 2.0;
    its baseline's 2 processes 0.6 s, so 0.3 s each beside torch's 3 rounds."""
    bench, roofs = records()
    bench["import_paid_s"] = [0.6, 2.3]
    t = timeline(bench, roofs, finished_unix=T0 + 60)
    assert t.imports_s == pytest.approx(0.6 + 2.3 + 0.3 * 3)
    bench["import_paid_s"] = [None, 2.3]  # a cell that does not say: its import_s per round
    assert timeline(bench, roofs, finished_unix=T0 + 60).imports_s == pytest.approx(1.0 + 2.3 + 1.5)


def test_first_calls_count_what_the_processes_paid_where_they_shared_compilations():
    """A cell whose processes shared their compilations (``compile_cache``): torch's cell
    says its first call costs a user 0.5 s (its first, compiling process), while its 3
    processes paid 0.7 s in all (0.5 + 0.1 + 0.1), not 3 x 0.5; NumPy's 2 paid 0.2."""
    bench, roofs = records()
    bench["first_call_paid_s"] = [0.2, 0.7]
    t = timeline(bench, roofs, finished_unix=T0 + 60)
    # numpy 0.2; torch 0.7; its baseline 0.1 a process beside each of 3 rounds
    assert t.first_calls_s == pytest.approx(0.2 + 0.7 + 0.3)
    bench["first_call_paid_s"] = [None, 0.7]  # a cell that does not say: first_call_s per round
    assert timeline(bench, roofs, finished_unix=T0 + 60).first_calls_s == pytest.approx(
        0.2 + 0.7 + 0.3
    )


def test_without_the_findings_time_the_wall_ends_at_the_last_record():
    bench, roofs = records()
    t = timeline(bench, roofs)
    assert t.wall_s == pytest.approx(47.0) and t.analysis_s == 0.0
    assert t.other_s == pytest.approx(47.0 - 27.1)


def test_without_roofs_the_run_begins_before_the_first_cell_by_its_early_rounds():
    bench, _ = records()
    t = timeline(bench, None, finished_unix=T0 + 60)
    assert t.started_unix == pytest.approx(T0 + 10 - 3.5) and t.roofs_s == 0.0
    assert t.wall_s == pytest.approx(53.5) and t.analysis_s == pytest.approx(20.0)


def test_where_every_cell_says_when_its_first_job_started_the_run_begins_at_the_first():
    bench, _ = records()
    # torch's early rounds' jobs began at 4 s: earlier than the 6.5 s their recorded walls
    # (3 s) and NumPy's (0.5 s) give back from 10 s, since a job starts before its supervisor
    bench["jobs_from_unix"] = [T0 + 9.5, T0 + 4.0]
    t = timeline(bench, None, finished_unix=T0 + 60)
    assert t.started_unix == pytest.approx(T0 + 4.0) and t.wall_s == pytest.approx(56.0)
    # the parts as in the first test but the roofs' (20.1 s), and 20 s of analysis after 40 s
    assert t.other_s == pytest.approx(56.0 - 20.1 - 20.0)
    # one cell without it (written before it was recorded): the estimate, as above
    bench.loc[0, "jobs_from_unix"] = None
    assert timeline(bench, None, finished_unix=T0 + 60).started_unix == pytest.approx(T0 + 6.5)


def test_parts_past_the_estimated_span_widen_the_wall_and_leave_no_negative_rest():
    bench, _ = records()
    bench.loc[1, "sampling_s"] = 100.0  # more than the records' span: the start was earlier
    t = timeline(bench, None, finished_unix=T0 + 60)
    assert t.other_s == 0.0
    assert t.wall_s == pytest.approx(
        t.imports_s + t.first_calls_s + t.sampling_s + 1.0 + 1.5 + t.analysis_s
    )


def test_cells_without_lock_times_have_no_time_line():
    bench, roofs = records()
    assert timeline(bench.drop(columns=["locked_until_unix"]), roofs) is None


def test_the_summary_says_the_wall_its_measured_share_and_every_part():
    bench, roofs = records()
    r = run_time(bench, roofs, finished_unix=T0 + 60)
    # sampling 7.1 s of a 60 s wall: 12%
    assert "of the run's wall of 1 min 00 s, 12% was measurement" in time_line(r)
    section = "\n".join(run_time_section(r))
    assert section.startswith("## Run time")
    assert "1 min 00 s, of which 12% was measurement" in section
    assert "| Roofs (`roofs`, `roofs_at_end`) | 7 s | 12% |" in section
    assert "| Analysis: from the last measurement to the findings | 13 s | 22% |" in section
    assert "| Process starts, scheduling and other" in section and "| 20 s | 33% |" in section
    assert run_time_section(run_time(bench.drop(columns=["started_at"]))) == []


def test_the_time_line_survives_the_findings_table():
    bench, roofs = records()
    r = run_time(bench, roofs, finished_unix=T0 + 60)
    findings = Findings("numpy", "cpu", 1.1, False, None, (), (), (), (), (), run_time=r)
    assert through_table(findings).run_time == r
