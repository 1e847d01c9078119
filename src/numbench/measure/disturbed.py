"""The one rule for a measurement that other programs disturbed: it is measured again while
something else took more than ``max_cpu_taken`` of its CPUs (the config's
``replicates.max_cpu_taken``), up to ``CPU_TAKEN_RETRIES`` times.

Its samples timed the other program too. The share taken is the worker's own reading
(``numbench.measure.cpu_taken``: its CPUs' busy time less its own). Two kinds of measurement
follow the rule:

* a cell's round (``numbench.measure.replicates.measure_round``): an attempt is the whole
  round, both processes of a paired one, since a busy process would weigh on one side of
  the ratio only; only a process that ended ``ok`` has a share that counts;
* a roof job (``numbench.roofline.measure.jobs``): an attempt is one worker.

Which attempt is kept once the retries are spent differs, and is the caller's to say
(``keep``): a round keeps the last (``LAST``: the cells' results stay what they were before
this rule was shared); a roof, the best of its trials of what the host can do, keeps the
quietest (``QUIETEST``: the attempt whose largest share is least), the one nearest the
undisturbed host. Either way the kept attempt says how many others were measured
(``set_aside``).

A retry helps only if the other programs have let go: one that never stops disturbs every
retry too, and the retries then cost two more rounds or jobs to keep a busy one anyway. So,
given a look at the machine (``busy_now``: the share of the worker's CPUs that what others
take over a short moment cannot avoid, ``numbench.measure.busy_now``), the rule looks before
each retry and, where that is still over the limit, stops: the attempts so far are kept as ``keep`` says,
and the caller says so (``still_busy``). A look that cannot tell (None), or none given, lets
the retry run as without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

#: times a measurement is measured again because other programs took its CPUs
CPU_TAKEN_RETRIES = 2
#: which attempt is kept when every one was disturbed: the last, or the least disturbed
LAST, QUIETEST = "last", "quietest"
#: what the callers say when a look at the machine stopped the retries (``still_busy``)
STILL_BUSY = "a retry would time them too; kept as measured"

T = TypeVar("T")


def taken_beyond(shares: Iterable[float | None], limit: float | None) -> list[float]:
    """The shares over ``limit`` (none without a limit; an unknown share is never over)."""
    if limit is None:
        return []
    return [share for share in shares if share is not None and share > limit]


def disturbance(shares: Iterable[float | None]) -> float:
    """The largest known share, 0 where none is known."""
    return max((share for share in shares if share is not None), default=0.0)


def undisturbed(
    measure: Callable[[int], T],
    shares: Callable[[T], Iterable[float | None]],
    limit: float | None,
    again: Callable[[T], None],
    keep: str = LAST,
    *,
    busy_now: Callable[[], float | None] | None = None,
    still_busy: Callable[[T, float], None] | None = None,
) -> tuple[T, int]:
    """Measure (``measure(attempt)``, attempt 0 first); while a share of the attempt
    (``shares``) is over ``limit``, say so (``again``) and measure again, up to
    ``CPU_TAKEN_RETRIES`` times. Returns the attempt kept (``keep``: ``LAST`` or
    ``QUIETEST``) and the number of the others (``set_aside``). Without a limit (None) the
    measurement is taken once.

    ``busy_now`` (None: no look) is called before each retry; where the share it gives is
    over ``limit``, no retry is made: ``still_busy(attempt, share)`` says so, and the
    attempts so far are kept as above."""
    if keep not in (LAST, QUIETEST):
        raise ValueError(f"keep must be {LAST!r} or {QUIETEST!r}, not {keep!r}")
    attempts: list[T] = []
    for attempt in range(CPU_TAKEN_RETRIES + 1):
        attempts.append(measure(attempt))
        if not taken_beyond(shares(attempts[-1]), limit) or attempt == CPU_TAKEN_RETRIES:
            break
        now = None if busy_now is None else busy_now()
        if taken_beyond([now], limit):
            if still_busy is not None:
                still_busy(attempts[-1], now)
            break
        again(attempts[-1])
    if keep == LAST:
        kept = attempts[-1]
    else:
        kept = min(attempts, key=lambda result: disturbance(shares(result)))
    return kept, len(attempts) - 1
