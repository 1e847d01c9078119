"""The run's headline facts: how quiet the machine was while the cells measured
(``MachineQuality``), decided by ``numbench.machine.analyse`` from the cells' records, kept in
results/findings.parquet (topic ``machine``, one row, for a later run to be compared with) and
worded as the summary's first line.

The rule, in two named thresholds: a cell was measured on a *busy* machine when other
processes and the hypervisor (steal) together took more than ``BUSY_MACHINE_SHARE`` of all the
machine's CPU time while it held the timing lock (the cell's ``other_cpu_share`` plus
``steal_share``, ``numbench.measure.activity``); a run is *busy* when more than
``BUSY_RUN_FRACTION`` of its cells that recorded the machine were, and *quiet* otherwise.
The workflow's own processes (Snakemake's scheduler, ``workflow_cpu_share``) are not others:
their share is told beside the rule's figures, never counted in them.
10% of all CPUs' time is a fifth of one core on a 2-core machine: more than a shell and an
editor take, less than any program that computes beside the run (one CPU-bound process on one
core of two is 50%). One busy cell in ten is what a quiet machine's
occasional neighbour gives; more is a machine doing other work.

A run with no other programs is still not *quiet* when the machine's own speed moved
(``speed_moved``: the sentinel's middle spread past ``UNSTEADY_SENTINEL_SPREAD``) or most of
its cells are unstable (``mostly_unstable``: past ``UNSTABLE_RUN_FRACTION``): the headline
then says *unsteady*, with what it did to the verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a cell was measured on a busy machine past this share of all CPUs' time taken by others
BUSY_MACHINE_SHARE = 0.10
#: a run is busy when more than this fraction of its cells (with the machine recorded) were
BUSY_RUN_FRACTION = 0.10
#: the sentinel's spread is read between these quantiles of its cells' times (its *middle*
#: spread), not between the slowest and the fastest: one cell whose sentinel ran through a
#: moment's hiccup sets the slowest over fastest alone, and that grows with the number of
#: cells; the middle spread moves only when a tenth of the cells or more saw the machine slow
SENTINEL_QUANTILES = (0.10, 0.90)
#: the machine's own speed moved during the run past this middle spread of the sentinel: the
#: same sort 20% slower for a tenth of the cells than for another tenth is twice the default
#: report margin (1.1), so a cell's rounds taken minutes apart can differ by more than the
#: smallest change a verdict is asked to see; a steady machine's best-of-5 sort should move
#: by a few percent at most between cells, far below it (docs/method.md, the sentinel)
UNSTEADY_SENTINEL_SPREAD = 1.2
#: a run is unsteady, whatever its sentinel says, when more than this fraction of its ok cells
#: are unstable (their processes disagree far beyond their own spread): most of them
UNSTABLE_RUN_FRACTION = 0.5


@dataclass(frozen=True)
class MachineQuality:
    """The machine around the run's cells and what it means for the verdicts.

    ``quiet``: the rule's answer (None: no cell recorded the machine: cells from before
    contract 7, or no ``/proc``). The shares are medians over the ``watched`` cells (those
    with the machine recorded) and the highest; ``busy_cells`` of them were measured on a
    busy machine. ``unstable_cells`` of the ``ok_cells`` are unstable (``busy_unstable`` of
    them busy); ``in_doubt`` of the ``verdicts`` are in doubt, ``busy_in_doubt`` of them
    measured on a busy machine: the verdicts the disturbance may have put in doubt."""

    quiet: bool | None
    watched: int
    busy_cells: int
    other_cpu_share: float | None
    steal_share: float | None
    busiest_share: float | None
    ok_cells: int
    unstable_cells: int
    busy_unstable: int
    verdicts: int
    in_doubt: int
    busy_in_doubt: int
    #: the sentinel (``numbench.measure.activity.time_sentinel``, a fixed sort each cell's job timed just
    #: before it measured): how many cells timed it, the fastest and slowest of their times,
    #: and the spread, slowest over fastest (1.0: the machine ran the same work as fast
    #: throughout; None: fewer than two cells timed it)
    sentinel_cells: int = 0
    sentinel_fastest_s: float | None = None
    sentinel_slowest_s: float | None = None
    sentinel_spread: float | None = None
    #: the median share of the CPUs' time the workflow's own processes took (Snakemake's
    #: scheduler: ``workflow_cpu_share``) over the watched cells that recorded it, apart from
    #: ``other_cpu_share`` (None: no cell recorded it, cells from before contract 9)
    workflow_cpu_share: float | None = None
    #: the sentinel's middle spread: its cells' time at ``SENTINEL_QUANTILES[1]`` over that at
    #: ``SENTINEL_QUANTILES[0]`` (None: fewer than two cells timed it, or a findings table
    #: from before it was kept)
    sentinel_middle_spread: float | None = None
    #: the machine's own speed moved during the run: the middle spread past
    #: ``UNSTEADY_SENTINEL_SPREAD`` (None: not known, as for the spread)
    speed_moved: bool | None = None
    #: more than ``UNSTABLE_RUN_FRACTION`` of the ok cells are unstable
    mostly_unstable: bool = False

    @property
    def unsteady(self) -> bool:
        """The machine's speed moved, or most cells are unstable: not a quiet run's answer."""
        return bool(self.speed_moved) or self.mostly_unstable


@dataclass(frozen=True)
class RunTime:
    """How long the run's cells took and where the time went, from the cells' records
    (``numbench.machine.analyse.run_time``). ``total_s``: the sum of the cells' ``wall_s``
    (their early rounds' jobs included; cells take the host's timing lock one at a time, so
    this is the run's measuring time). ``rounds``: the rounds kept, ``added_rounds`` of them
    added by the stopping rule beyond ``replicates.min``; ``retries``: rounds measured again
    because other programs took the CPUs (``set_aside``). ``added_s`` and ``retries_s``
    estimate their time, each cell's ``wall_s`` shared evenly among its attempts. ``busy_s``:
    the time of the cells measured on a busy machine (``BUSY_MACHINE_SHARE``). ``capped``:
    cells a time cap stopped (``replicates.max_cell_s``). ``total_s`` includes the waits
    for quiet."""

    cells: int
    total_s: float
    rounds: int
    added_rounds: int
    added_s: float
    retries: int
    retries_s: float
    busy_s: float
    capped: int
    #: the waits for quiet (``wait_for_quiet``): cells that waited (None: none was asked),
    #: their seconds in all, and how many measured anyway, still busy at the limit
    waited_cells: int | None = None
    waited_s: float = 0.0
    not_quiet: int = 0
    #: where the run's whole wall time went (None: no cell recorded when it held the lock)
    timeline: TimeLine | None = None


@dataclass(frozen=True)
class TimeLine:
    """Where the run's wall time went, from its first record to its findings
    (``numbench.machine.analyse.timeline``): parts that sum to ``wall_s`` exactly, the last of them
    (``other_s``) what no record accounts for.

    ``started_unix``: the run's first record, the earlier of the roofs' first lock and the
    first cell job's start less every cell's early rounds (they all ran before it);
    ``ended_unix``: when the findings were decided (or, without that, the last record).
    ``imports_s``, ``first_calls_s``, ``sampling_s``: the worker processes' import of their
    library, their first call, and their calibration and samples (both modes): each cell's
    per-process figure times its kept rounds, plus, for a paired cell, its baseline's per-process
    figures for the baseline process beside each round. ``quiet_waits_s``: the waits for
    quiet; ``lock_waits_s``: the cells' jobs waiting for the timing lock past the second
    their start is recorded to; ``roofs_s``: the roofs' jobs holding the lock; ``analysis_s``:
    from the last record to the findings. ``other_s``: process starts (the interpreter, the
    inputs, the sentinel), rounds measured again, processes that ended without figures
    (a timeout), scheduling between jobs, making the inputs and anything else."""

    started_unix: float
    ended_unix: float
    wall_s: float
    imports_s: float
    first_calls_s: float
    sampling_s: float
    quiet_waits_s: float
    lock_waits_s: float
    roofs_s: float
    analysis_s: float
    other_s: float


@dataclass(frozen=True)
class CappedCell:
    """A cell that ``replicates.max_cell_s`` stopped before its stopping rule did: its
    verdict rests on fewer rounds than the rule asked for."""

    library: str
    device: str
    operation: str
    size: int
    replicates: int
    wall_s: float
    max_cell_s: float | None
    #: its speedup's verdict and whether it is settled (None: no speedup, the baseline's own)
    verdict: str | None = None
    settled: bool | None = None
