"""The one rule for a disturbed measurement (``numbench.measure.quiet.undisturbed``), driven by
injected CPU shares: measured again while a share is over the limit, never more than
``CPU_TAKEN_RETRIES`` times, the last or the quietest attempt kept; and a cell's round and a
roof job both follow it."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import make_spec

from numbench.measure import quiet
from numbench.measure.quiet import CPU_TAKEN_RETRIES, LAST, QUIETEST, undisturbed
from numbench.spec import ProcessReport

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}


def attempts_of(shares_by_attempt: list[list[float | None]]):
    """A measurement whose n-th attempt reports the n-th list of shares; records the calls."""
    calls: list[int] = []

    def measure(attempt: int) -> dict:
        calls.append(attempt)
        return {"attempt": attempt, "shares": shares_by_attempt[attempt]}

    return measure, calls


def shares(result: dict) -> list[float | None]:
    return result["shares"]


def test_a_quiet_measurement_is_taken_once():
    measure, calls = attempts_of([[0.05, 0.0]])
    said = []
    kept, set_aside = undisturbed(measure, shares, 0.1, said.append)
    assert calls == [0] and kept["attempt"] == 0 and set_aside == 0 and said == []


def test_a_disturbed_measurement_is_taken_again_until_it_is_quiet():
    measure, calls = attempts_of([[0.3, 0.0], [0.0, 0.25], [0.02, 0.01], [0.0, 0.0]])
    said = []
    kept, set_aside = undisturbed(measure, shares, 0.1, said.append)
    assert calls == [0, 1, 2] and kept["attempt"] == 2 and set_aside == 2
    assert [r["attempt"] for r in said] == [0, 1]  # told before each new attempt


@pytest.mark.parametrize(("keep", "kept_attempt"), [(LAST, 2), (QUIETEST, 1)])
def test_the_retries_are_bounded_and_keep_says_which_attempt_stays(keep, kept_attempt):
    measure, calls = attempts_of([[0.5], [0.2, None], [0.4], [0.0]])
    kept, set_aside = undisturbed(measure, shares, 0.1, lambda _: None, keep=keep)
    assert len(calls) == 1 + CPU_TAKEN_RETRIES
    assert kept["attempt"] == kept_attempt and set_aside == CPU_TAKEN_RETRIES


def test_without_a_limit_or_a_known_share_nothing_is_measured_again():
    measure, calls = attempts_of([[0.9]])
    assert undisturbed(measure, shares, None, lambda _: None) == (
        {"attempt": 0, "shares": [0.9]},
        0,
    )
    measure, calls = attempts_of([[None, None]])
    assert undisturbed(measure, shares, 0.1, lambda _: None)[1] == 0 and calls == [0]


def test_the_share_at_the_limit_is_not_over_it():
    assert quiet.taken_beyond([0.1, None, 0.11], 0.1) == [0.11]
    assert quiet.taken_beyond([0.9], None) == []
    assert quiet.disturbance([None, 0.2, 0.1]) == 0.2 and quiet.disturbance([None]) == 0.0


def test_an_unknown_keep_is_refused():
    measure, _ = attempts_of([[0.0]])
    with pytest.raises(ValueError, match="keep"):
        undisturbed(measure, shares, 0.1, lambda _: None, keep="first")


def test_a_cells_round_and_a_roof_job_follow_the_same_rule(monkeypatch):
    """Both call ``quiet.undisturbed``: a round keeps its last attempt, a roof its
    quietest; each is measured again as often as the rule says."""
    from numbench.measure import replicates
    from numbench.roofline import measure as roofs

    seen = []
    real = quiet.undisturbed

    def spy(measure, shares, limit, again, keep=LAST, **look):
        seen.append(keep)
        return real(measure, shares, limit, again, keep, **look)

    monkeypatch.setattr(replicates, "undisturbed", spy)
    monkeypatch.setattr(roofs, "undisturbed", spy)
    taken = iter([0.5, 0.3, 0.4])
    roof = roofs.RoofJobs("steady", 0.1, lambda _: None, lambda _: {"cpu_taken": next(taken)})
    assert roof.measure({"kind": "memory", "threads": 1}) == {"cpu_taken": 0.3, "set_aside": 2}

    spec = make_spec("numpy", "cpu", "sort", 1000, "x.npz", FAST)
    spec = spec.replace(replicates=dataclasses.replace(spec.replicates, max_cpu_taken=0.1))
    taken = iter([0.5, 0.3, 0.4])

    def run_worker(_spec) -> ProcessReport:
        return ProcessReport(status="ok", loops=1, samples_s=[1e-3], cpu_taken=next(taken))

    (run,) = replicates.measure_round(spec, 0, run_worker, None, busy_now=None)
    assert run.report.cpu_taken == 0.4 and run.report.set_aside == CPU_TAKEN_RETRIES
    assert seen == [QUIETEST, LAST]


def looks(*readings: float | None):
    """A look at the machine that gives ``readings`` in turn; records how often it looked."""
    given = iter(readings)
    asked: list[int] = []

    def busy_now() -> float | None:
        asked.append(1)
        return next(given)

    return busy_now, asked


@pytest.mark.parametrize("keep", [LAST, QUIETEST])
def test_others_still_busy_when_looked_at_stop_the_retries(keep):
    """A disturber that never stops: the look before the first retry finds it still busy,
    so the first attempt is kept, none set aside, and the caller says how busy."""
    measure, calls = attempts_of([[0.5], [0.5], [0.5]])
    busy_now, asked = looks(0.45)
    said, still = [], []
    kept, set_aside = undisturbed(
        measure,
        shares,
        0.1,
        said.append,
        keep,
        busy_now=busy_now,
        still_busy=lambda result, now: still.append((result["attempt"], now)),
    )
    assert calls == [0] and kept["attempt"] == 0 and set_aside == 0
    assert len(asked) == 1 and said == [] and still == [(0, 0.45)]


def test_others_that_let_go_get_the_retry_and_the_quiet_attempt_is_kept():
    measure, calls = attempts_of([[0.5], [0.0]])
    busy_now, asked = looks(0.02)
    still = []
    kept, set_aside = undisturbed(
        measure, shares, 0.1, lambda _: None, busy_now=busy_now, still_busy=still.append
    )
    assert calls == [0, 1] and kept["attempt"] == 1 and set_aside == 1
    assert len(asked) == 1 and still == []  # no look after a quiet attempt


def test_a_look_that_lets_go_once_then_finds_them_back_stops_at_the_second_retry():
    measure, calls = attempts_of([[0.5], [0.3], [0.0]])
    busy_now, asked = looks(0.0, 0.6)
    kept, set_aside = undisturbed(measure, shares, 0.1, lambda _: None, QUIETEST, busy_now=busy_now)
    assert calls == [0, 1] and kept["attempt"] == 1 and set_aside == 1 and len(asked) == 2


@pytest.mark.parametrize("reading", [None, 0.1])
def test_a_look_that_cannot_tell_or_reads_at_the_limit_retries_as_without_one(reading):
    measure, calls = attempts_of([[0.5], [0.4], [0.3]])
    busy_now, asked = looks(reading, reading)
    kept, set_aside = undisturbed(measure, shares, 0.1, lambda _: None, busy_now=busy_now)
    assert calls == [0, 1, 2] and kept["attempt"] == 2 and set_aside == CPU_TAKEN_RETRIES
    assert len(asked) == CPU_TAKEN_RETRIES  # before each retry, never after the last


def test_no_look_without_a_limit_or_a_quiet_first_attempt():
    busy_now, asked = looks()
    measure, _ = attempts_of([[0.9]])
    undisturbed(measure, shares, None, lambda _: None, busy_now=busy_now)
    measure, _ = attempts_of([[0.0]])
    undisturbed(measure, shares, 0.1, lambda _: None, busy_now=busy_now)
    assert asked == []
