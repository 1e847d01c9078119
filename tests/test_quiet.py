"""Waiting for quiet (``wait_for_quiet``): the supervisor samples the machine until others
take at most a share of its CPUs, up to a limit, and the cell records the wait. Readings, the
sleep and the clock are constructed: nothing here sleeps."""

from __future__ import annotations

import pytest

from numbench.measure.quiet import QuietSettings, QuietWait, wait_for_quiet
from numbench.measure.supervisor import record_quiet_wait
from numbench.spec import CellMeta

#: ticks per second of the constructed /proc/stat
HZ = 100


class Machine:
    """A constructed /proc/stat whose busy share over each sample follows ``shares`` (of it,
    ``workflow`` the workflow's own processes': Snakemake's), and a clock that the sleep
    moves on."""

    def __init__(self, shares: list[float | None], workflow: float = 0.0):
        self.shares = list(shares)
        self.workflow, self.workflow_ticks = workflow, 0
        self.now = 0.0
        self.ticks = [0] * 8
        self.sleeps: list[float] = []

    def read(self):
        return None if self.ticks is None else list(self.ticks)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        share = self.shares.pop(0) if self.shares else 0.0
        total = int(2 * HZ * seconds)  # two CPUs
        busy = round(share * total)
        self.ticks[0] += busy  # user
        self.ticks[3] += total - busy  # idle
        self.workflow_ticks += round(self.workflow * total)

    def readers(self):
        return {
            "ticks": self.read,
            "own_s": lambda: 0.0,
            "sleep": self.sleep,
            "clock": lambda: self.now,
            "ticks_per_s": HZ,
            "workflow": lambda: {200: (5000, self.workflow_ticks)},
        }


def test_it_waits_until_the_others_quiet_down():
    machine = Machine([0.6, 0.5, 0.05])
    waited = wait_for_quiet(0.1, 300, **machine.readers())
    assert waited == QuietWait(3.0, True, pytest.approx(0.05))
    assert machine.sleeps == [1.0, 1.0, 1.0]


def test_the_workflow_s_own_processes_are_not_others_to_wait_for():
    """The machine 40% busy, 35 points of it Snakemake's scheduler: quiet at once."""
    machine = Machine([0.4, 0.4], workflow=0.35)
    waited = wait_for_quiet(0.1, 300, **machine.readers())
    assert waited.reached is True and waited.share == pytest.approx(0.05)
    assert machine.sleeps == [1.0]


def test_a_quiet_machine_costs_one_sample():
    machine = Machine([0.02])
    waited = wait_for_quiet(0.1, 300, **machine.readers())
    assert waited.reached and waited.waited_s == 1.0


def test_it_gives_up_at_the_limit_and_says_so(capsys):
    machine = Machine([0.7] * 100)
    waited = wait_for_quiet(0.1, 5, **machine.readers())
    assert waited.reached is False and waited.waited_s == 5.0
    assert waited.share == pytest.approx(0.7)
    assert "still take 70% of the CPUs' time (above 0.1) after 5 s" in capsys.readouterr().out


def test_without_proc_it_does_not_wait():
    machine = Machine([0.9])
    machine.ticks = None
    waited = wait_for_quiet(0.1, 300, **machine.readers())
    assert waited.reached is None and machine.sleeps == []


def test_no_wait_is_asked_by_default_and_bad_settings_are_refused():
    assert QuietSettings(0.1, 0).wait(**Machine([0.9]).readers()) is None
    with pytest.raises(ValueError, match="below"):
        wait_for_quiet(0, 10)


def test_the_cell_records_its_wait_and_its_rounds():
    meta = CellMeta()
    record_quiet_wait(meta, None, None)
    assert meta.quiet_wait_s is None and meta.quiet_reached is None
    record_quiet_wait(meta, QuietWait(12.0, True, 0.04), 30.0)
    assert meta.quiet_wait_s == 42.0 and meta.quiet_reached is True


def test_the_config_s_wait_reaches_each_timing_job_and_no_spec():
    from pathlib import Path

    from numbench.config import cell_spec, grid, load_file
    from numbench.config.grid import job_plan

    repo = Path(__file__).resolve().parents[1]
    schema = repo / "workflow" / "schemas" / "config.schema.yaml"
    cfg = load_file(repo / "config" / "config.yaml", schema)
    assert cfg["wait_for_quiet"] == {"below": 0.1, "max_wait_s": 0}
    assert all("quiet" not in cell_spec(cfg, c).to_json() for c in grid(cfg))
    cfg["wait_for_quiet"] = {"below": 0.05, "max_wait_s": 90.5}
    plan = job_plan(cfg, grid(cfg))
    assert (plan.quiet_wait_s, plan.quiet_below) == (91, "0.05")
