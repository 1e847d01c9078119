"""The run's headline facts: how quiet the machine was while the cells measured
(``MachineQuality``), decided by ``numbench.analyse.machine`` from the cells' records, kept in
results/findings.parquet (topic ``machine``, one row, for a later run to be compared with) and
worded as the summary's first line.

The rule, in two named thresholds: a cell was measured on a *busy* machine when other
processes and the hypervisor (steal) together took more than ``BUSY_MACHINE_SHARE`` of all the
machine's CPU time while it held the timing lock (the cell's ``other_cpu_share`` plus
``steal_share``, ``numbench.measure.activity``); a run is *busy* when more than
``BUSY_RUN_FRACTION`` of its cells that recorded the machine were, and *quiet* otherwise.
10% of all CPUs' time is a fifth of one core on a 2-core machine: more than a shell, an editor
and the workflow's own scheduler take, less than any program that computes beside the run (one
CPU-bound process on one core of two is 50%). One busy cell in ten is what a quiet machine's
occasional neighbour gives; more is a machine doing other work.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a cell was measured on a busy machine past this share of all CPUs' time taken by others
BUSY_MACHINE_SHARE = 0.10
#: a run is busy when more than this fraction of its cells (with the machine recorded) were
BUSY_RUN_FRACTION = 0.10


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
