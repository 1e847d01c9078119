"""What the workflow's jobs ask of the scheduler (numbench.config.grid): the roofs job, the
timing lock's wait, the wall times and the priorities, from the resolved config and its grid."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from numbench.cells import Cell, roof_dims, roof_libraries
from numbench.config import grid, job_plan, resolve
from numbench.config.grid import (
    RUNTIME_MARGIN_MIN,
    JobOrder,
    cell_max_processes,
    cell_runtime_min,
    cpu_taken_option,
    lock_timeout_s,
    roof_gpus,
    roof_threads,
    round_runtime_min,
    runtime_min,
)

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
TINY = yaml.safe_load((REPO / "tests" / "tiny.yaml").read_text())


def resolved(**over) -> dict:
    """The tiny grid of the end-to-end tests, with ``over`` on top, resolved as the workflow
    resolves it for a cluster (so that no thread count is held against this host's CPUs)."""
    return resolve({**TINY, **over}, SCHEMA, cells_run_here=False)


def replicates(cfg: dict, **over) -> dict:
    return {**cfg, "replicates": {**cfg["replicates"], **over}}


def test_roof_dims_are_the_grids_device_dtype_threads_once_each_sorted():
    cells = [
        Cell("torch", "gpu", "matmul", 64, "float32", 1),
        Cell("numpy", "cpu", "matmul", 64, "float64", 2),
        Cell("numpy", "cpu", "fft", 1024, "float64", 2),
        Cell("numpy", "cpu", "fft", 1024, "float32", 1),
    ]
    dims = roof_dims(cells)
    assert dims == [("cpu", "float32", 1), ("cpu", "float64", 2), ("gpu", "float32", 1)]
    assert roof_threads(dims) == 2
    assert roof_gpus(dims) == 1
    assert roof_gpus(dims[:2]) == 0
    assert roof_threads([]) == 1 and roof_gpus([]) == 0


def test_roof_libraries_are_each_device_s_own_so_a_gpu_library_sets_no_cpu_roof():
    # device: gpu's grid: the baseline's cells on the CPU, the others' on the GPU
    placed = [("torch", "gpu"), ("jax", "gpu"), ("numpy", "cpu"), ("numpy", "cpu")]
    cells = [
        Cell(lib, device, "fft", 64 * (n + 1), "float32", 1)
        for n, (lib, device) in enumerate(placed)
    ]
    assert roof_libraries(cells) == {"cpu": ["numpy"], "gpu": ["jax", "torch"]}
    assert roof_libraries([]) == {}


def test_cpu_taken_option_is_empty_without_a_limit():
    cfg = resolved()
    assert cpu_taken_option(replicates(cfg, max_cpu_taken=0.25)) == "--max-cpu-taken 0.25"
    assert cpu_taken_option(replicates(cfg, max_cpu_taken=None)) == ""


def test_lock_timeout_is_whole_seconds_rounded_up():
    cfg = resolved()
    assert lock_timeout_s({**cfg, "lock_timeout_s": 90}) == 90
    assert lock_timeout_s({**cfg, "lock_timeout_s": 0.2}) == 1
    assert isinstance(lock_timeout_s({**cfg, "lock_timeout_s": 12.5}), int)


@pytest.mark.parametrize(
    ("paired", "max_", "timeout_s", "cell_min", "round_min"),
    [
        # paired: two processes a round; 6 rounds of 120 s each = 24 minutes
        (True, 6, 120, 24 + RUNTIME_MARGIN_MIN, 4 + RUNTIME_MARGIN_MIN),
        # unpaired: one process a round
        (False, 6, 120, 12 + RUNTIME_MARGIN_MIN, 2 + RUNTIME_MARGIN_MIN),
        # a part of a minute counts as a whole one
        (False, 1, 61, 2 + RUNTIME_MARGIN_MIN, 2 + RUNTIME_MARGIN_MIN),
        (True, 3, 10, 1 + RUNTIME_MARGIN_MIN, 1 + RUNTIME_MARGIN_MIN),
    ],
)
def test_wall_time_covers_every_worker_reaching_its_timeout(
    paired, max_, timeout_s, cell_min, round_min
):
    cfg = replicates(resolved(cell_timeout_s=timeout_s), paired=paired, max=max_)
    assert cell_max_processes(cfg) == max_ * (2 if paired else 1)
    assert cell_runtime_min(cfg) == cell_min
    assert round_runtime_min(cfg) == round_min


def test_runtime_is_whole_minutes_plus_the_margin():
    assert runtime_min(1, 60) == 1 + RUNTIME_MARGIN_MIN
    assert runtime_min(1, 60.5) == 2 + RUNTIME_MARGIN_MIN
    assert runtime_min(0, 600) == RUNTIME_MARGIN_MIN


def test_priorities_put_inputs_then_rounds_by_number_then_cells():
    cfg = replicates(resolved(), min=3, max=3, early_rounds=2)
    cells = grid(cfg)
    order = JobOrder.of(cfg, cells)
    assert order.early_rounds == 2 and order.stage == len(cells)
    assert sorted(order.rank.values()) == list(range(len(cells)))
    cell_jobs = [order.cell_priority(c) for c in cells]
    round_1 = [order.round_priority(c, 1) for c in cells]
    round_0 = [order.round_priority(c, 0) for c in cells]
    # every stage above the next, whatever the cell's rank
    assert max(cell_jobs) < min(round_1)
    assert max(round_1) < min(round_0)
    assert max(round_0) < order.inputs_priority
    # within a stage, the seeded order: the same for every stage
    assert [p - min(round_0) for p in round_0] == cell_jobs
    assert [p - min(round_1) for p in round_1] == cell_jobs


def test_job_order_is_seeded():
    cfg = resolved()
    cells = grid(cfg)
    assert JobOrder.of(cfg, cells).rank == JobOrder.of(cfg, list(reversed(cells))).rank
    other = JobOrder.of({**cfg, "seed": cfg["seed"] + 1}, cells).rank
    assert other != JobOrder.of(cfg, cells).rank


def test_a_cell_outside_the_grid_has_the_lowest_priority():
    cfg = resolved()
    order = JobOrder.of(cfg, grid(cfg))
    stranger = Cell("numpy", "cpu", "matmul", 123_456)
    assert order.cell_priority(stranger) == 0


def test_without_early_rounds_inputs_come_just_above_every_cell():
    cfg = replicates(resolved(), early_rounds=0)
    cells = grid(cfg)
    order = JobOrder.of(cfg, cells)
    assert order.inputs_priority == len(cells)
    assert max(order.cell_priority(c) for c in cells) == len(cells) - 1


def test_job_plan_gathers_what_the_rules_use():
    cfg = resolved(threads=[1, 2], lock_timeout_s=7.5)
    cells = grid(cfg)
    plan = job_plan(cfg, cells)
    assert plan.roof_dims == [("cpu", "float64", 1), ("cpu", "float64", 2)]
    assert plan.roof_threads == 2 and plan.roof_gpus == 0
    assert plan.roof_cpu_taken_option == cpu_taken_option(cfg)
    assert plan.lock_timeout_s == 8
    assert plan.cell_runtime_min == cell_runtime_min(cfg)
    assert plan.round_runtime_min == round_runtime_min(cfg)
    assert plan.order == JobOrder.of(cfg, cells)
