"""A cell's time against ``replicates.max_cell_s`` (``numbench.measure.replicates``): the
seconds its rounds have taken, its early rounds' jobs included, and whether the cap stopped
it from adding a round."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from numbench.spec import CellSpec


@dataclass
class CellClock:
    """The time a cell has spent on its rounds, held against ``replicates.max_cell_s``:
    ``earlier_s`` (its early rounds' jobs) and the ``clock``'s seconds since it was made
    (tests hand in a constructed clock). ``capped`` is set once the cap stopped the cell."""

    earlier_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    capped: bool = False
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spent_s(self) -> float:
        return self.earlier_s + self.clock() - self.started


def capped(spec: CellSpec, replicate: int, clock: CellClock) -> bool:
    """True when the cell adds no round ``replicate`` because of ``replicates.max_cell_s``
    (never its first round); says so in the cell's log."""
    cap = spec.replicates.max_cell_s
    if cap is None or replicate < 1 or clock.spent_s() < cap:
        return False
    print(
        f"round {replicate}: the cell has spent {clock.spent_s():.1f} s on its rounds, "
        f"past replicates.max_cell_s = {cap:g}; stopping at {replicate} rounds",
        flush=True,
    )
    clock.capped = True
    return True
