"""A plan run over several leases: ``offsite run --stop-after-s`` packs a part and stops,
``--resume-from`` goes on from the earlier parts on a fresh machine, measuring no cell twice,
and ``offsite import`` takes every part; a part of another plan, or a damaged one, is
refused with the problem named."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake
from test_offsite import archive_json, job_counts, offsite, remote_run, repack

from numbench.offsite import OffsiteError, run_plan, write_plan
from numbench.offsite import parts as offsite_parts
from numbench.offsite import run as offsite_run
from numbench.offsite.parts import Budget, Part, joined

SIZES = (100, 200, 300)
CELLS = [f"results/cells/numpy/cpu/float64/t1/sort/{n}.parquet" for n in SIZES]
CONFIG = """\
libraries: [numpy]
operations:
  sort: {sizes: [100, 200, 300]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, max_cpu_taken: null}
cell_timeout_s: 120
roofs: false
"""


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_stops_before_a_piece_that_would_end_past_it():
    clock = Clock()
    budget = Budget(100, clock)
    assert budget.allows("cell")  # nothing measured yet: only the time passed counts
    clock.now = 30.0
    budget.note("cell", 30.0)
    clock.now = 60.0
    assert budget.allows("cell")  # 60 + 30 <= 100
    assert budget.allows("round")  # no round so far
    clock.now = 75.0
    assert not budget.allows("cell")  # 75 + 30 > 100
    assert not budget.allows("round")  # once stopped, stopped for good
    assert Budget(None, clock).allows("cell")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(OffsiteError, match="--stop-after-s must be a number of seconds"):
            Budget(bad)


def test_rounds_run_ahead_stop_while_their_cells_still_fit():
    """A batch's rounds stop once what their cells still owe would pass the budget, and its
    cells begun on are measured all the same (a lease on an H200 ran a batch's rounds to
    its budget and then measured no cell: the rounds were lost)."""
    clock = Clock()
    budget = Budget(100, clock)
    assert budget.allows_ahead(0.0)
    budget.note("round", 40.0)  # one round of 40 s: its cell owes about as much again
    clock.now = 40.0
    assert not budget.allows_ahead(40.0)  # 40 + 40 (a round) + 40 (owed) > 100
    assert budget.rounds_stopped and not budget.stopped
    assert budget.allows("cell")  # the cell begun on still fits: 40 + nothing so far
    budget.note("cell", 40.0)
    clock.now = 80.0
    assert not budget.allows_ahead(0.0)  # rounds stopped stay stopped
    assert not budget.allows("cell")  # 80 + 40 > 100


class CellsOnly:
    """A budget that lets ``n`` cells begin, then stops (the real one's clock would make
    the test depend on the machine's speed)."""

    def __init__(self, n: int):
        self.left, self.stopped, self.rounds_stopped = n, False, False

    def allows_ahead(self, owed: float) -> bool:
        return not self.stopped

    def allows(self, kind: str) -> bool:
        if kind == "cell" and not self.stopped:
            self.stopped = self.left == 0
            self.left -= 1
        return not self.stopped

    def note(self, kind: str, seconds: float) -> None:
        pass


@pytest.fixture
def there(tmp_path, monkeypatch):
    """The plan, made here with its bundle, and a function that unpacks the bundle into a
    fresh folder: a fresh machine for each lease."""
    monkeypatch.setenv("NUMBENCH_TIMING_LOCK", str(tmp_path / ".timing.lock"))
    here = copy_workflow(tmp_path / "here")  # the workflow the parts are imported into
    (here / "grid.yaml").write_text(CONFIG)
    write_plan(here, tmp_path / "plan.json", [str(here / "grid.yaml")], bundle=tmp_path / "b.tgz")

    def fresh(name: str) -> Path:
        folder = tmp_path / name
        with tarfile.open(tmp_path / "b.tgz") as tar:
            tar.extractall(folder, filter="data")
        return folder

    return fresh


def lease(monkeypatch, folder: Path, cells: int | None, earlier: list[Path]) -> dict:
    """One lease: the plan run in ``folder`` with the earlier parts copied over, stopping
    after ``cells`` cells (None: no budget); the part's manifest."""
    carried = [Path(shutil.copy(p, folder / f"earlier-{i}.tar.gz")) for i, p in enumerate(earlier)]
    with monkeypatch.context() as patch:
        if cells is not None:
            patch.setattr(offsite_run, "Budget", lambda seconds: CellsOnly(cells))
        return run_plan(
            folder / "plan.json",
            folder / "part.tar.gz",
            stop_after_s=None if cells is None else 600,
            resume_from=carried,
            batch=1,
            say=lambda _: None,
        )


def members(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {n for n in tar.getnames() if n.startswith("results/cells/")}


@pytest.mark.e2e
def test_a_grid_goes_on_over_fresh_machines_and_imports_as_parts(there, monkeypatch, tmp_path):
    first, second, third = there("lease1"), there("lease2"), there("lease3")
    one = lease(monkeypatch, first, 1, [])
    assert one["part"]["complete"] is False and one["part"]["cells_left"] == 2
    assert len(members(first / "part.tar.gz")) == 1 == len(one["cells"])

    two = lease(monkeypatch, second, 1, [first / "part.tar.gz"])
    assert two["part"]["cells_left"] == 1
    assert [e["cells"] for e in two["part"]["earlier"]] == [1]
    assert not set(one["cells"]) & set(two["cells"])  # nothing measured twice

    three = lease(monkeypatch, third, None, [first / "part.tar.gz", second / "part.tar.gz"])
    assert three["part"]["complete"] is True and three["part"]["cells_left"] == 0
    parts = [d / "part.tar.gz" for d in (first, second, third)]
    assert set().union(*(members(p) for p in parts)) == set(CELLS)
    assert sum(len(members(p)) for p in parts) == len(CELLS)

    wf = tmp_path / "here"
    short = offsite(wf, "import", *map(str, parts[:2]), "--configfile", "grid.yaml")
    assert short.returncode == 1, short.stdout + short.stderr
    assert "the 2 archives hold 2 of the plan's 3 cells (first missing: " in short.stderr
    assert not (wf / "results" / "cells").exists()  # nothing brought in

    proc = offsite(wf, "import", *map(str, parts), "--configfile", "grid.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imported 3 cells" in proc.stdout
    run = snakemake(wf, "--cores", "1", "--configfile", "grid.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = job_counts(run)
    assert "cell" not in jobs and "inputs" not in jobs, jobs
    assert (wf / "results" / "speedups.parquet").exists()


def test_the_command_stops_at_its_budget_with_exit_3_and_an_empty_part(there):
    folder = there("lease")
    proc = remote_run(folder, "plan.json", "--output", "p.tar.gz", "--stop-after-s", "0.001")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "stopped at the time budget: 0 of the plan's 3 cells measured" in proc.stdout
    assert "--resume-from" in proc.stdout
    manifest = archive_json(folder / "p.tar.gz", "manifest.json")
    assert manifest["cells"] == {} and manifest["part"]["cells_left"] == 3
    assert members(folder / "p.tar.gz") == set()


def test_a_part_of_another_plan_is_refused_before_anything_is_made(there, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "grid.yaml").write_text(CONFIG.replace("[100, 200, 300]", "[100, 200]"))
    write_plan(tmp_path / "here", other / "plan.json", [str(other / "grid.yaml")])
    proc = remote_run(other, "plan.json", "--output", "p.tar.gz", "--stop-after-s", "0.001")
    assert proc.returncode == 3, proc.stdout + proc.stderr

    folder = there("lease")
    with pytest.raises(OffsiteError) as info:
        run_plan(
            folder / "plan.json",
            folder / "cells.tar.gz",
            resume_from=[other / "p.tar.gz"],
            say=lambda _: None,
        )
    plan_hash = json.loads((folder / "plan.json").read_text())["plan_hash"]
    assert str(info.value).startswith(f"{other / 'p.tar.gz'} holds cells of another plan (")
    assert f"this plan is {plan_hash[:12]}): only the parts of one plan's runs go" in str(
        info.value
    )
    assert not (folder / "cells.work").exists() and not (folder / "cells.tar.gz").exists()


def test_a_damaged_part_is_refused_by_the_archive_checks(there, monkeypatch):
    first = there("lease1")
    lease(monkeypatch, first, 1, [])
    bad = repack(first / "part.tar.gz", first / "bad.tar.gz", {"../outside.txt": b"x"})
    folder = there("lease2")
    with pytest.raises(OffsiteError, match=r"unexpected member '\.\./outside\.txt'"):
        run_plan(folder / "plan.json", folder / "c.tar.gz", resume_from=[bad], say=print)
    assert not (folder.parent / "outside.txt").exists() and not (folder / "c.work").exists()
    part = first / "part.tar.gz"
    before = part.read_bytes()
    with pytest.raises(OffsiteError, match="is one of the --resume-from parts: name a new one"):
        run_plan(first / "plan.json", part, resume_from=[part], workdir=first / "w", say=print)
    assert part.read_bytes() == before


def test_inputs_made_otherwise_than_the_earlier_parts_stop_the_run(there, monkeypatch):
    first = there("lease1")
    lease(monkeypatch, first, 1, [])
    manifest = archive_json(first / "part.tar.gz", "manifest.json")
    [measured] = manifest["cells"]
    path = next(p for p in manifest["inputs"] if p.split("/")[-1] != measured.split("/")[-1])
    entry = manifest["inputs"][path]  # the inputs of a cell lease2 measures
    entry["arrays"]["a"]["crc32"] ^= 1
    bad = repack(
        first / "part.tar.gz",
        first / "bad.tar.gz",
        {"manifest.json": json.dumps(manifest).encode()},
    )
    folder = there("lease2")
    with pytest.raises(OffsiteError) as info:
        run_plan(folder / "plan.json", folder / "c.tar.gz", resume_from=[bad], say=print)
    assert str(info.value).startswith(
        f"{path}: the inputs file made on this host differs from the one the earlier parts' "
        "cells were measured on (array a: CRC"
    )
    assert not (folder / "c.tar.gz").exists()


def test_two_parts_with_one_cell_measured_otherwise_are_refused():
    plan = {"plan_hash": "ab" * 32, "cells": [{"path": CELLS[0]}]}

    def part(name: str, sha: str) -> Part:
        manifest = {"cells": {CELLS[0]: {"sha256": sha}}, "inputs": {}}
        return Part(name, {}, manifest, plan)

    with pytest.raises(OffsiteError) as info:
        joined([part("a.tar.gz", "1" * 64), part("b.tar.gz", "2" * 64)])
    assert str(info.value).startswith(
        f"{CELLS[0]} was measured twice, in a.tar.gz and in b.tar.gz, with other results"
    )
    assert joined([part("a.tar.gz", "1" * 64), part("b.tar.gz", "1" * 64)])[1]["cells"] == {
        CELLS[0]: {"sha256": "1" * 64}
    }


def test_the_batches_split_the_cells_and_a_budget_defaults_to_some():
    assert offsite_parts.batches([1, 2, 3], 2) == [[1, 2], [3]]
    assert offsite_parts.batches([1, 2, 3], None) == [[1, 2, 3]]
    assert offsite_parts.checked_batch(None, 60.0) == offsite_parts.DEFAULT_BATCH
    assert offsite_parts.checked_batch(None, None) is None
    with pytest.raises(OffsiteError, match="--batch must be a whole number of cells"):
        offsite_parts.checked_batch(0, None)


def test_a_batch_whose_rounds_stopped_measures_the_cells_begun_on_and_no_other(
    tmp_path, monkeypatch
):
    """The lease's case: three cells, the second's round as long as the budget can bear.
    Its round stops the rounds ahead; the first two cells are measured, the third (no round)
    is left for the next lease."""
    from types import SimpleNamespace

    from numbench.measure import supervisor

    monkeypatch.chdir(tmp_path)
    clock = Clock()
    round_s = {"a": 10.0, "b": 40.0, "c": 10.0}

    def fake_round(spec, k, path):
        clock.now += round_s[spec.name]
        path.write_text("round")
        return []

    def fake_cell(spec, path, earlier, round_sd_at=None):
        clock.now += round_s[spec.name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"cell")
        return SimpleNamespace(status="ok", error=None)

    monkeypatch.setattr(supervisor, "run_round", fake_round)
    monkeypatch.setattr(supervisor, "run_cell", fake_cell)
    monkeypatch.setattr(offsite_run, "time", SimpleNamespace(perf_counter=clock))
    cells = [
        SimpleNamespace(
            path=f"cells/{n}.parquet", log=f"logs/{n}.log", round_path=lambda k, n=n: f"r/{n}{k}"
        )
        for n in "abc"
    ]
    Path("r").mkdir()
    specs = [
        SimpleNamespace(name=n, replicates=SimpleNamespace(min=2, early_rounds=1)) for n in "abc"
    ]
    budget = Budget(120, clock)
    rounds = offsite_run.run_early_rounds(cells, specs, False, lambda _: None, budget)
    # a: 10 s, owed 10; b: 40 s (10 + 10 + 10 <= 120 let it begin), owed 50; c: 50 + 40 + 50 > 120
    assert sorted(rounds) == ["cells/a.parquet", "cells/b.parquet"]
    assert budget.rounds_stopped and not budget.stopped
    measured = offsite_run.run_cells(cells, specs, rounds, False, lambda _: None, budget)
    assert sorted(measured) == ["cells/a.parquet", "cells/b.parquet"]
    assert clock.now == 10 + 40 + 10 + 40 <= 120
