"""``numbench compare --confirm``: flagged cells measured again, OLD's interpreter against
NEW's in lockstep (``numbench.compare.confirm``).

The unit tests hand ``confirm`` constructed rounds (``run_pair``); the e2e tests run real
workers, NEW's interpreter a wrapper that slows every call 1.5 times (the test-only
``NUMBENCH_TEST_SLOWDOWN``)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import REPO, _cell_row, copy_workflow

from numbench.compare.confirm import (
    CLEARED,
    CONFIRMED,
    IN_DOUBT,
    UNCONFIRMED,
    Outcome,
    confirm,
    decide,
    flagged,
    still_failing,
)
from numbench.compare.report import confirm_text
from numbench.config import cell_spec, grid, resolve
from numbench.contract import BENCHMARKS_SCHEMA
from numbench.measure.supervisor import host_metadata
from numbench.spec import ProcessReport

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SIZE = 20_000
KEY = {
    "library": "numpy",
    "device": "cpu",
    "operation": "sort",
    "size": SIZE,
    "dtype": "float64",
    "threads": 1,
}


def config() -> dict:
    return resolve({"libraries": ["numpy"], "operations": {"sort": {"sizes": [SIZE]}}}, SCHEMA)


def side_rows(cfg: dict, median: float, python: str, seed: int, **changed) -> pd.DataFrame:
    """A side's benchmarks table: the one cell, measured on this host by ``python``, with what
    the config records for it (code, parameters, options) unless ``changed``."""
    meta = host_metadata(cell_spec(cfg, grid(cfg)[0]))
    samples = median * np.exp(np.random.default_rng(seed).normal(0.0, 0.01, 25))
    row = _cell_row("numpy", "cpu", "sort", SIZE, samples=samples)
    row.update(
        host=socket.gethostname(),
        python_executable=python,
        operation_hash=meta.operation_hash,
        params=meta.params,
        options=meta.options,
        library_version=np.__version__,
    )
    row.update(changed)
    return pa.Table.from_pylist([row], schema=BENCHMARKS_SCHEMA).to_pandas()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workflow folder whose cell's inputs file exists (its content is not read here)."""
    inputs = tmp_path / "results" / "inputs" / "sort" / f"{SIZE}.npz"
    inputs.parent.mkdir(parents=True)
    inputs.write_bytes(b"")
    return tmp_path


def rounds_of(old_s: float, new_s: float, version: str = np.__version__, status="ok"):
    """A ``run_pair`` whose OLD processes (run by the test's interpreter) take ``old_s`` a
    call and NEW's (the wrapper) ``new_s``, with a shared slow spell in round 2; it records
    which side each round started."""
    starts = []

    def run_pair(specs, seed):
        rng = np.random.default_rng(seed)
        spell = 1.4 if seed == 2 else 1.0  # the machine is slow for a whole round: both sides
        out = []
        for spec in specs:
            is_new = spec.environment.python.endswith("wrapper")
            base = new_s if is_new else old_s
            samples = list(base * spell * np.exp(rng.normal(0.0, 0.01, 15)))
            out.append(
                (0.0, ProcessReport(status=status, samples_s=samples, library_version=version))
            )
        starts.append("NEW" if specs[0].environment.python.endswith("wrapper") else "OLD")
        return out

    run_pair.starts = starts
    return run_pair


@pytest.fixture
def wrapper(tmp_path: Path) -> str:
    path = tmp_path / "wrapper"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def run_confirm(root, old, new, run_pair, cfg=None):
    return confirm(
        [KEY], old, new, cfg or config(), root, 1.1, rounds=4, max_rounds=6, run_pair=run_pair
    )


def test_a_false_alarm_is_cleared_by_the_paired_rounds(root, wrapper):
    cfg = config()
    # flagged 1.5x slower by two runs made at different times; paired, the sides are alike
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)
    run_pair = rounds_of(1e-3, 1e-3)
    (got,) = run_confirm(root, old, new, run_pair)
    assert got.outcome == CLEARED and got.rounds == 4
    assert got.ci_low < 1 < got.ci_high  # the slow round fell on both sides and cancelled
    assert still_failing([got]) == []
    assert run_pair.starts == ["OLD", "NEW", "OLD", "NEW"]  # rounds alternate who starts


def test_a_real_slowdown_is_confirmed(root, wrapper):
    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)
    (got,) = run_confirm(root, old, new, rounds_of(1e-3, 1.5e-3))
    assert got.outcome == CONFIRMED
    assert got.ratio == pytest.approx(1.5, rel=0.02) and got.ci_low > 1.1
    assert still_failing([got]) == [got]


@pytest.mark.parametrize(
    "case, why",
    [
        ("host", "was measured on 'elsewhere', not on this host"),
        ("interpreter", "is not here any more"),
        ("code", "measured other operation code than the config gives now"),
        ("params", "measured other parameters than the config gives now"),
        ("version", f"imports numpy {np.__version__} now; 0.0.1 was measured"),
        ("failed", "worker ended failed: it broke"),
        ("inputs", "inputs file results/inputs/sort/20000.npz is missing"),
        ("grid", "the config's grid has no such cell"),
    ],
)
def test_a_cell_that_cannot_be_measured_again_stays_flagged_with_the_reason(
    root, wrapper, case, why
):
    cfg = config()
    old_changes = {
        "host": {"host": "elsewhere"},
        "interpreter": {"python_executable": str(root / "gone" / "python")},
        "code": {"operation_hash": "0" * 64},
        "params": {"params": '{"kind": "other"}'},
        "version": {"library_version": "0.0.1"},
    }.get(case, {})
    old = side_rows(cfg, 1e-3, sys.executable, 1, **old_changes)
    new = side_rows(cfg, 1.5e-3, wrapper, 2)
    if case == "inputs":
        (root / "results" / "inputs" / "sort" / f"{SIZE}.npz").unlink()
    if case == "grid":
        cfg = resolve({"libraries": ["numpy"], "operations": {"sort": {"sizes": [30]}}}, SCHEMA)
    run_pair = rounds_of(1e-3, 1e-3, status="failed" if case == "failed" else "ok")
    if case == "failed":
        base = run_pair

        def run_pair(specs, seed):
            return [
                (t, ProcessReport(status="failed", error="it broke")) for t, _ in base(specs, seed)
            ]

    (got,) = run_confirm(root, old, new, run_pair, cfg)
    assert got.outcome == UNCONFIRMED and got.ratio is None
    assert why in got.reason
    assert still_failing([got]) == [got]  # never cleared without a measurement


def test_a_noisy_remeasurement_leaves_the_cell_in_doubt_and_failing(root, wrapper):
    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)
    base = rounds_of(1e-3, 1.1e-3)

    def run_pair(specs, seed):  # one round's OLD process was slowed 3x on its own
        out = base(specs, seed)
        if seed == 1:
            i = [s.environment.python.endswith("wrapper") for s in specs].index(False)
            t, r = out[i]
            out[i] = (
                t,
                ProcessReport(
                    status="ok",
                    samples_s=[x * 3 for x in r.samples_s],
                    library_version=r.library_version,
                ),
            )
        return out

    (got,) = run_confirm(root, old, new, run_pair)
    assert got.outcome == IN_DOUBT and got.ci_low < 1.1 < got.ci_high
    assert got.rounds == 6  # one round at a time up to max_rounds, then the flag stands
    assert "after 6 rounds" in got.reason and "--confirm-max-rounds" in got.reason
    assert still_failing([got]) == [got]


def test_rounds_added_one_at_a_time_settle_a_cell_in_doubt(root, wrapper):
    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)
    base = rounds_of(1e-3, 1e-3)

    def run_pair(specs, seed):  # round 1's NEW process alone was slowed 1.3x by the machine
        out = base(specs, seed)
        if seed == 1:
            i = [s.environment.python.endswith("wrapper") for s in specs].index(True)
            t, r = out[i]
            slowed = [x * 1.3 for x in r.samples_s]
            out[i] = (
                t,
                ProcessReport(status="ok", samples_s=slowed, library_version=r.library_version),
            )
        return out

    first = confirm([KEY], old, new, cfg, root, 1.1, rounds=4, max_rounds=4, run_pair=run_pair)
    assert first[0].outcome == IN_DOUBT  # four rounds, one of them disturbed: not settled
    base.starts.clear()
    (got,) = confirm([KEY], old, new, cfg, root, 1.1, rounds=4, max_rounds=12, run_pair=run_pair)
    assert got.outcome == CLEARED and 4 < got.rounds <= 12
    assert len(base.starts) == got.rounds


def simulated_rounds(true_ratio: float, round_sd: float, seed: int):
    """A ``run_pair`` whose rounds' ratios are ``true_ratio`` times log-normal noise of
    ``round_sd`` between rounds (a slow spell of one side), with 1% noise within each."""
    rng = np.random.default_rng(seed)

    def run_pair(specs, _seed):
        spell = float(np.exp(rng.normal(0.0, round_sd)))
        out = []
        for spec in specs:
            base = 1e-3 * (true_ratio * spell if spec.environment.python.endswith("wrapper") else 1)
            samples = list(base * np.exp(rng.normal(0.0, 0.01, 5)))
            out.append(
                (0.0, ProcessReport(status="ok", samples_s=samples, library_version=np.__version__))
            )
        return out

    return run_pair


@pytest.mark.parametrize("true_ratio, most, least", [(1.1, 0.05, 0.0), (1.0, 1.0, 0.9)])
def test_clearing_holds_its_false_clear_rate_over_the_looks_and_clears_unchanged_cells(
    root, wrapper, true_ratio, most, least
):
    """A cell truly at the margin is cleared in at most 5% of tries however many rounds are
    added (each round another look); an unchanged cell is cleared in at least 90%."""
    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)
    tries, cleared = 300, 0
    for seed in range(tries):
        (got,) = confirm(
            [KEY],
            old,
            new,
            cfg,
            root,
            1.1,
            rounds=5,
            max_rounds=15,
            run_pair=simulated_rounds(true_ratio, 0.05, seed),
        )
        cleared += got.outcome == CLEARED
    assert least * tries <= cleared <= most * tries


def test_a_worker_that_cannot_start_leaves_the_cell_unconfirmed_not_a_traceback(root, wrapper):
    from numbench.errors import MachineryFault

    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1.5e-3, wrapper, 2)

    def run_pair(specs, seed):
        raise MachineryFault("the worker cannot start: exec format error")

    (got,) = run_confirm(root, old, new, run_pair)
    assert got.outcome == UNCONFIRMED and "cannot start" in got.reason


def test_flagged_takes_the_slower_cells_of_either_gate_table():
    table = pd.DataFrame(
        [
            {**KEY, "change": "slower"},
            {**KEY, "size": 30, "change": "same"},
            {**KEY, "size": 40, "change": "broken"},
        ]
    )
    assert flagged(table) == [KEY]


def test_fewer_than_two_rounds_is_refused(root, wrapper):
    cfg = config()
    old, new = side_rows(cfg, 1e-3, sys.executable, 1), side_rows(cfg, 1e-3, wrapper, 2)
    with pytest.raises(ValueError, match="at least 2 rounds"):
        confirm(
            [KEY], old, new, cfg, root, 1.1, rounds=1, max_rounds=1, run_pair=rounds_of(1e-3, 1e-3)
        )
    with pytest.raises(ValueError, match="max_rounds >= rounds"):
        confirm(
            [KEY], old, new, cfg, root, 1.1, rounds=3, max_rounds=2, run_pair=rounds_of(1e-3, 1e-3)
        )


def test_the_text_names_each_outcome_and_keeps_a_hostile_key_in_its_cell():
    rows = [
        {
            "key": {**KEY, "library": "numpy|<b>"},
            "outcome": CLEARED,
            "ratio": 1.01,
            "ci_low": 0.98,
            "ci_high": 1.04,
            "rounds": 5,
            "reason": None,
        },
        {
            "key": KEY,
            "outcome": UNCONFIRMED,
            "ratio": None,
            "ci_low": None,
            "ci_high": None,
            "rounds": 0,
            "reason": "OLD's interpreter /x/python is not here any more",
        },
    ]
    text = confirm_text(rows, 5, 1.1)
    assert "not slower when paired: cleared" in text and "not measured again: fails" in text
    assert "1 still fail the gate" in text
    # escaped, so that the pipe splits no cell and the tag is text (numbench.report.markdown)
    assert "numpy\\|\\<b>/cpu" in text and "numpy|<b>" not in text
    assert "nothing to measure again" in confirm_text([], 5, 1.1)


# -- end to end: real workers --------------------------------------------------------------------
def _write_side(path: Path, frame: pd.DataFrame) -> str:
    frame.to_parquet(path)
    return str(path)


@pytest.mark.e2e
@pytest.mark.parametrize("slowed", [False, True])
def test_compare_confirm_runs_real_workers_and_decides_the_gate(tmp_path, slowed):
    """A cell planted 1.5x slower in NEW's table: measured again with NEW's interpreter
    really slower (3x), the gate still fails; with it the same speed, the flag is never
    confirmed. Whether it is cleared or left in doubt depends on this machine's noise in real
    rounds (a busy CI host left one in doubt at 1.032, upper bound 1.120), so that outcome is
    tested with injected timings above, and here only its agreement with the exit code."""
    from numbench import inputs_file as inputs

    wf = copy_workflow(tmp_path / "wf")
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(
        f"libraries: [numpy]\noperations:\n  sort:\n    sizes: [{SIZE}]\n"
        "timing: {min_sample_time_s: 0.002, min_samples: 5, max_samples: 20, budget_s: 0.05}\n"
    )
    cfg = resolve(
        {
            "libraries": ["numpy"],
            "operations": {"sort": {"sizes": [SIZE]}},
            "timing": {
                "min_sample_time_s": 0.002,
                "min_samples": 5,
                "max_samples": 20,
                "budget_s": 0.05,
            },
        },
        SCHEMA,
    )
    spec = cell_spec(cfg, grid(cfg)[0])
    inputs.write("sort", SIZE, spec.seed, wf / spec.inputs, spec.params)
    slow = tmp_path / "python-slow"
    factor = "3" if slowed else "1"
    slow.write_text(f'#!/bin/sh\nNUMBENCH_TEST_SLOWDOWN={factor} exec "{sys.executable}" "$@"\n')
    slow.chmod(0o755)
    old = _write_side(tmp_path / "old.parquet", side_rows(cfg, 1e-3, sys.executable, 1))
    new = _write_side(tmp_path / "new.parquet", side_rows(cfg, 1.5e-3, str(slow), 2))
    env = {**os.environ, "NUMBENCH_TIMING_LOCK": str(tmp_path / ".timing.lock")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "numbench",
            "compare",
            old,
            new,
            "--fail-on-slowdown",
            "--confirm",
            "--confirm-rounds",
            "5",
            "--confirm-max-rounds",
            "40",
            "--directory",
            str(wf),
            "--configfile",
            str(config_file),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert "## Measured again (--confirm)" in done.stdout, done.stderr
    if slowed:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "slower, confirmed: fails" in done.stdout
        assert "slower after measuring again" in done.stderr
    else:
        assert "slower, confirmed" not in done.stdout, done.stdout
        cleared = "not slower when paired: cleared" in done.stdout
        in_doubt = "in doubt: fails" in done.stdout
        assert cleared != in_doubt, done.stdout
        assert done.returncode == (0 if cleared else 1), done.stdout + done.stderr


def test_a_suspect_fails_only_where_confirmed_and_a_strict_flag_unless_cleared():
    """The history's screen lets suspects through that --confirm must find slower to fail
    the gate; a cell the gate flagged slower outright fails unless it is cleared."""
    for strict, failing in ((False, {CONFIRMED}), (True, {CONFIRMED, IN_DOUBT, UNCONFIRMED})):
        outcomes = [
            Outcome(KEY, outcome, strict=strict)
            for outcome in (CONFIRMED, CLEARED, IN_DOUBT, UNCONFIRMED)
        ]
        assert {o.outcome for o in still_failing(outcomes)} == failing, strict


def test_confirming_among_many_flagged_cells_asks_a_narrower_interval():
    """Four rounds whose paired ratios are 1.30, 1.15, 1.25 and 1.18: alone, the 95%
    interval (about 1.12 to 1.33) is wholly above 1 and the ratio past 1.1, so the cell is
    confirmed; as one of 20 cells measured again, each interval is at 99.75% and reaches
    below 1, so it is not."""
    old = [[1.0]] * 4
    new = [[1.30], [1.15], [1.25], [1.18]]
    alone = decide(old, new, 1.1, KEY)
    assert alone.outcome == CONFIRMED and 1.10 < alone.ci_low < 1.13
    among = decide(old, new, 1.1, KEY, family=20)
    assert among.outcome != CONFIRMED and among.ci_low < 1.0
    assert among.ratio == pytest.approx(alone.ratio)
