"""The ``replicates`` section of the config as a cell's spec holds it: how many worker
processes a cell runs, when it stops adding rounds, and the names two of its settings are
stored under (``STORED_NAMES``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: The names two replicate settings are stored under, in a cell's spec (the rules' parameter,
#: the round files, an offsite plan) and its ``replicate_settings`` column: the config keys
#: they had before each word of the config was given one meaning (``replicates.margin``,
#: ``replicates.spread``; ``numbench.config.normalise.RENAMED_KEYS``). Kept so that a spec is
#: the same text as before, and the cells, history runs and plans made before keep the same
#: settings: Snakemake measures no cell again for the new names, and the history store's
#: config hash and ``numbench compare`` see the same grid.
STORED_NAMES = {"stop_margin": "margin", "early_rounds": "spread"}


@dataclass(frozen=True)
class ReplicateSettings:
    """The ``replicates`` section of the config: how many worker processes a cell runs. No
    defaults here: they live in the config schema and ``config/config.yaml`` alone."""

    #: processes always run
    min: int
    #: processes never exceeded
    max: int
    #: after ``min``, an unpaired cell adds processes until the 95% interval of its median is
    #: within this relative half-width, or ``max`` is reached
    target_ci: float
    #: the stopping margin (``replicates.stop_margin``): a paired speedup whose whole interval
    #: lies beyond it is settled. Not the report's margin, which changes no cell
    stop_margin: float
    #: the early rounds (``replicates.early_rounds``): the first rounds, each measured by a job
    #: of its own scheduled before every cell's remaining rounds, so that a cell's rounds lie
    #: minutes apart (``numbench.measure.replicates``)
    early_rounds: int
    #: after ``min``, a paired cell adds rounds while its speedup's verdict is in doubt: while
    #: its interval, widened to at least ``1.96 * round_sd / sqrt(rounds)`` in log terms,
    #: holds ``stop_margin`` or ``1 / stop_margin`` (``numbench.stats.verdict_settled``)
    round_sd: float
    #: a round with a process whose CPUs other programs used more than this share of while it
    #: measured (``ProcessReport.cpu_taken``) is measured again, up to ``CPU_TAKEN_RETRIES``
    #: times; None measures every round once, busy machine or not
    max_cpu_taken: float | None
    #: a paired round starts both processes and takes their samples in turns
    #: (``numbench.measure.lockstep``) instead of running them back to back
    lockstep: bool
    #: a cell that has spent this many seconds on its rounds adds no further round (its
    #: first always runs; ``numbench.measure.replicates.capped``); None: no cap
    max_cell_s: float | None

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.max:
            raise ValueError("need 1 <= replicates.min <= replicates.max")
        if not 0 <= self.early_rounds <= self.min:
            raise ValueError("need 0 <= replicates.early_rounds <= replicates.min")
        if not self.round_sd >= 0:
            raise ValueError("need replicates.round_sd >= 0")
        if self.max_cpu_taken is not None and not self.max_cpu_taken > 0:
            raise ValueError("need replicates.max_cpu_taken > 0 (or null)")
        if self.max_cell_s is not None and not self.max_cell_s > 0:
            raise ValueError("need replicates.max_cell_s > 0 (or null)")

    def to_dict(self) -> dict[str, Any]:
        """The settings under their stored names (``STORED_NAMES``), as a cell's spec and its
        ``replicate_settings`` column hold them."""
        return {STORED_NAMES.get(k, k): v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicateSettings:
        """The settings from a dict under either their stored or their own names (not both)."""
        own = {stored: name for name, stored in STORED_NAMES.items()}
        twice = sorted(k for k in data if k in own and own[k] in data)
        if twice:
            raise ValueError(f"replicate settings: {twice} given under both names")
        return cls(**{own.get(k, k): v for k, v in data.items()})
