"""``numbench compare OLD NEW --confirm``: the cells a gate flags as slower or suspect,
measured again, old against new in lockstep, before the gate fails.

A gate judges two runs made at different times: a slow spell of the machine during one of
them looks like a slowdown of the cell. ``--confirm`` takes each cell flagged slower and
measures it again here, now, both sides at once: each round starts a worker under OLD's
interpreter and one under NEW's and takes their samples in turns (``numbench.measure.lockstep``),
so whatever the machine does meanwhile falls on both. Rounds alternate which side starts.
Each round gives one paired ratio, the median of NEW's samples over the median of OLD's
(taken in turns, so a slow spell falls on both); the rounds are the independent units, and
the cell is judged on the mean of their logs with Student's t (``decide``):

- *confirmed* where the interval of the ratio lies wholly above 1 and the ratio is past
  the margin (``compare``'s rule, ``numbench.stats.verdict``): a 95% interval for one cell,
  and over k cells measured again a (1 - 0.05 / k) interval each (Bonferroni), so that the
  chance that any of them is confirmed with nothing changed stays at 5% or less;
- *cleared* where the one-sided upper bound lies below the margin at level
  ``CLEAR_ALPHA / looks``: the cell is looked at after ``rounds`` rounds and again after each
  round added, up to ``max_rounds`` (``looks`` in all), and Bonferroni's split keeps the chance
  of clearing a cell that is truly at the margin at ``CLEAR_ALPHA`` or less however many looks
  are taken. Clearing is the one outcome that lets a flagged cell pass, so it is the one
  held to the stricter rule;
- *in doubt* otherwise: one more round is measured, as a cell's own stopping rule adds
  rounds, until the cell is settled or ``max_rounds`` are spent; still in doubt then, its
  flag stands.

Which flags stand unsettled: a cell that the gate itself called *slower* (``strict``) fails
unless it is cleared. A *suspect* (the history's screen, ``numbench.compare.gate``: slower
at a per-cell level, not the family-wise one) fails only when it is confirmed: at its
default level the screen lets about one cell in five of unchanged code through, so its flags
are questions for the new measurement, which carries the family-wise guarantee.

Both sides run the same spec, built from the workflow's config as its ``cell`` rule builds it,
and the current numbench; what differs is the interpreter, and so the libraries it imports
(``environments``, or two virtual environments a CI job keeps). A side can be measured
again only where its cell was measured on this host, its interpreter is still here and still
imports the library version it measured with, and the config would measure what it measured
(the same operation code, parameters and options). Where any of this fails the cell is
*unconfirmed*, the reason is named, and the flag stands: ``--confirm`` can clear a false
alarm, never hide a slowdown it could not measure.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from numbench.cells import KEY, member
from numbench.errors import MachineryFault
from numbench.spec import CellSpec, Environment, ProcessReport
from numbench.stats import CONFIDENCE, SLOWER, verdict

#: the outcomes of a flagged cell; all but ``cleared`` keep a strict flag failing, and only
#: ``confirmed`` a suspect's
CONFIRMED, CLEARED, IN_DOUBT, UNCONFIRMED = "confirmed", "cleared", "in doubt", "unconfirmed"
#: the history's screen's flag (``numbench.compare.gate.SUSPECT``)
SUSPECT = "suspect"
#: the chance of clearing a cell whose true ratio is the margin, over all looks at it
CLEAR_ALPHA = 0.05
#: what the row of each side must agree with the config on, and its name in the reason
RECORDED = {"operation_hash": "operation code", "params": "parameters", "options": "options"}

#: runs one lockstep round: (specs, seed) -> each spec's (start, report), in the order given
RunPair = Callable[[list[CellSpec], int], list[tuple[float, ProcessReport]]]


class Unconfirmable(Exception):
    """Why a flagged cell cannot be measured again here (the message says it)."""


@dataclass(frozen=True)
class Outcome:
    """One flagged cell, measured again (or why not)."""

    key: dict[str, Any]
    outcome: str
    #: new / old median time of the paired rounds, with its 95% interval; None if unmeasured
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    rounds: int = 0
    reason: str | None = None
    #: flagged slower outright (True) or a suspect of the history's screen (False)
    strict: bool = True


def flagged(table: pd.DataFrame, change: tuple[str, ...] = (SLOWER, SUSPECT)):
    """The keys of the cells a gate's table calls slower or suspect (``change``), in its
    order."""
    rows = table[table["change"].isin(change)]
    return [{k: _plain(r[k]) for k in KEY} for _, r in rows.iterrows()]


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def row_of(frame: pd.DataFrame, key: dict[str, Any], side: str) -> dict[str, Any]:
    """The one row of ``frame`` (a side's benchmarks table) for ``key``."""
    hit = frame
    for k in KEY:
        hit = hit[hit[k] == key[k]]
    if len(hit) != 1:
        raise Unconfirmable(f"{side} holds {len(hit)} rows of this cell, not one")
    return hit.iloc[0].to_dict()


def cell_of(cfg: dict, key: dict[str, Any]):
    """The config's ``Cell`` whose key (its library with its environment) is ``key``."""
    from numbench.config import grid

    for cell in grid(cfg):
        fields = {**dataclasses.asdict(cell), "library": member(cell.library, cell.environment)}
        if all(fields[k] == key[k] for k in KEY):
            return cell
    raise Unconfirmable("the config's grid has no such cell: measure it with the same config")


def interpreter_of(row: dict[str, Any], side: str, root: Path) -> str:
    """The side's interpreter, where it is still on this host."""
    if row.get("host") != socket.gethostname():
        raise Unconfirmable(f"{side} was measured on {row.get('host')!r}, not on this host")
    python = row.get("python_executable")
    if not isinstance(python, str) or not python:
        raise Unconfirmable(f"{side} does not record the interpreter it ran")
    path = Path(python) if os.path.isabs(python) else root / python
    if not os.access(path, os.X_OK):
        raise Unconfirmable(f"{side}'s interpreter {python} is not here any more")
    return str(path)


def side_spec(spec: CellSpec, python: str, root: Path) -> CellSpec:
    """``spec`` run by ``python``, its paths made absolute, unpaired (its partner is the
    other side)."""
    env = spec.environment
    return dataclasses.replace(
        spec,
        inputs=str(root / spec.inputs),
        paired_with=None,
        environment=Environment(
            name=env.name if env else "base",
            pins=list(env.pins) if env else [],
            python=python,
            variables=dict(env.variables) if env else {},
        ),
    )


def check_recorded(row: dict[str, Any], recorded: dict[str, Any], side: str) -> None:
    """Unconfirmable where the side measured other code, parameters or options than the
    config gives now."""
    for column, what in RECORDED.items():
        if column in row and not pd.isna(row[column]) and row[column] != recorded[column]:
            raise Unconfirmable(
                f"{side} measured other {what} than the config gives now: it cannot be "
                "measured again as it was"
            )


def plan(
    cfg: dict, root: Path, key: dict[str, Any], old: pd.DataFrame, new: pd.DataFrame
) -> tuple[CellSpec, CellSpec, dict[str, dict]]:
    """The two specs of a flagged cell (old's, new's) and each side's row; Unconfirmable
    naming why where it cannot be measured again here."""
    from numbench.config import cell_spec
    from numbench.measure.supervisor import host_metadata

    spec = cell_spec(cfg, cell_of(cfg, key))
    meta = host_metadata(spec)
    recorded = {
        "operation_hash": meta.operation_hash,
        "params": meta.params,
        "options": meta.options,
    }
    rows, specs = {}, []
    for side, frame in (("OLD", old), ("NEW", new)):
        row = row_of(frame, key, side)
        check_recorded(row, recorded, side)
        specs.append(side_spec(spec, interpreter_of(row, side, root), root))
        rows[side] = row
    if not (root / spec.inputs).is_file():
        raise Unconfirmable(
            f"its inputs file {spec.inputs} is missing: make it with `snakemake {spec.inputs}`"
        )
    return specs[0], specs[1], rows


def remeasure(
    old: CellSpec, new: CellSpec, rows: dict[str, dict], rounds: range, run_pair: RunPair
) -> tuple[list[list[float]], list[list[float]]]:
    """Each side's samples per round of ``rounds`` (old's, new's), rounds alternating which
    side starts (round i's number is its seed);
    Unconfirmable where a worker fails or imports another library version than its side
    measured with."""
    got: dict[str, list[list[float]]] = {"OLD": [], "NEW": []}
    for i in rounds:
        order = [("OLD", old), ("NEW", new)] if i % 2 == 0 else [("NEW", new), ("OLD", old)]
        reports = run_pair([spec for _, spec in order], i)
        for (side, _), (_, report) in zip(order, reports, strict=True):
            if report.status != "ok" or not report.samples_s:
                why = report.error or "no samples"
                raise Unconfirmable(f"{side}'s worker ended {report.status}: {why}")
            measured = rows[side].get("library_version")
            if isinstance(measured, str) and report.library_version != measured:
                raise Unconfirmable(
                    f"{side}'s interpreter imports {old.adapter_name} {report.library_version} "
                    f"now; {measured} was measured"
                )
            got[side].append(list(report.samples_s))
    return got["OLD"], got["NEW"]


def round_ratios(old: list[list[float]], new: list[list[float]]) -> np.ndarray:
    """Each round's paired ratio: the median of NEW's samples over the median of OLD's."""
    return np.array([np.median(n) / np.median(o) for o, n in zip(old, new, strict=True)])


def decide(
    old: list[list[float]],
    new: list[list[float]],
    margin: float,
    key,
    looks: int = 1,
    family: int = 1,
) -> Outcome:
    """The paired verdict on new / old from the rounds' ratios (the module's docstring):
    ``confirmed`` (its interval's level split over the ``family`` of cells measured again),
    ``cleared`` (at level ``CLEAR_ALPHA / looks``) or ``in doubt``."""
    from scipy import stats

    logs = np.log(round_ratios(old, new))
    n, mean = len(logs), float(np.mean(logs))
    se = float(np.std(logs, ddof=1)) / np.sqrt(n)
    half = stats.t.ppf(1 - (1 - CONFIDENCE) / (2 * max(family, 1)), n - 1) * se
    ratio, lo, hi = float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))
    # a speedup of new over old is old / new: above 1 is faster
    if verdict(1 / ratio, 1 / hi, 1 / lo, margin) == SLOWER:
        return Outcome(key, CONFIRMED, ratio, lo, hi, n)
    bound = np.exp(mean + stats.t.ppf(1 - CLEAR_ALPHA / looks, n - 1) * se)
    if bound < margin:
        return Outcome(key, CLEARED, ratio, lo, hi, n)
    why = (
        f"after {n} rounds the paired ratio may still be past the margin {margin:g} (upper "
        f"bound {bound:.3f}): measure again with more (--confirm-max-rounds)"
    )
    return Outcome(key, IN_DOUBT, ratio, lo, hi, n, why)


def confirm(
    keys: list[dict[str, Any]],
    old: pd.DataFrame,
    new: pd.DataFrame,
    cfg: dict,
    root: str | os.PathLike,
    margin: float,
    rounds: int,
    max_rounds: int,
    run_pair: RunPair | None = None,
    say: Callable[[str], None] = lambda line: None,
    strict: list[dict[str, Any]] | None = None,
) -> list[Outcome]:
    """Each flagged cell of ``keys`` measured again, OLD's interpreter against NEW's, in
    ``rounds`` lockstep rounds, then one more at a time while it is in doubt, up to
    ``max_rounds`` (``run_pair``: ``numbench.measure.lockstep.run_lockstep``). ``strict``:
    the keys flagged slower outright (None: all of them); the others are suspects. Each is
    confirmed at the level split over all ``keys``."""
    if rounds < 2:
        raise ValueError(f"need at least 2 rounds to confirm, not {rounds}")
    if max_rounds < rounds:
        raise ValueError(f"need max_rounds >= rounds, not {max_rounds} < {rounds}")
    if run_pair is None:
        from numbench.measure.lockstep import run_lockstep as run_pair
    root = Path(root).resolve()
    out = []
    for key in keys:
        outcome = _confirm_one(
            key, old, new, cfg, root, margin, rounds, max_rounds, run_pair, say, len(keys)
        )
        out.append(dataclasses.replace(outcome, strict=strict is None or key in strict))
    return out


def _confirm_one(key, old, new, cfg, root, margin, rounds, max_rounds, run_pair, say, family):
    """One flagged cell measured again (``confirm``), or why it could not be."""
    from numbench.operations.loading import OperationError

    label = " ".join(str(key[k]) for k in KEY)
    try:
        old_spec, new_spec, rows = plan(cfg, root, key, old, new)
        say(f"confirm: {label}: {rounds} paired rounds")
        got_old, got_new = remeasure(old_spec, new_spec, rows, range(rounds), run_pair)
        looks = max_rounds - rounds + 1
        outcome = decide(got_old, got_new, margin, key, looks, family)
        while outcome.outcome == IN_DOUBT and len(got_old) < max_rounds:
            more = remeasure(
                old_spec, new_spec, rows, range(len(got_old), len(got_old) + 1), run_pair
            )
            got_old, got_new = got_old + more[0], got_new + more[1]
            outcome = decide(got_old, got_new, margin, key, looks, family)
        return outcome
    except (Unconfirmable, MachineryFault, OperationError, OSError) as exc:
        # the machinery (a worker that cannot start, the timing lock) or the operation's
        # file: the cell was not measured again, and the flag stands
        say(f"confirm: {label}: cannot measure it again: {exc}")
        return Outcome(key, UNCONFIRMED, reason=str(exc))


def still_failing(outcomes: list[Outcome]) -> list[Outcome]:
    """The flagged cells that still fail the gate: confirmed; and, where the gate flagged
    them slower outright (``strict``), in doubt or not measured again."""
    return [o for o in outcomes if o.outcome == CONFIRMED or (o.strict and o.outcome != CLEARED)]
