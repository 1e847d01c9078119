"""The history gate's verdict (``numbench.compare.gate``) in words, the section "Against the
history" that ``numbench compare --history`` prints below compare's own, and as JSON."""

from __future__ import annotations

import json

import pandas as pd

from numbench.compare.gate import (
    ALPHA,
    MIN_HISTORY,
    MIN_LEVEL_CELLS,
    NO_HISTORY,
    PAIRED,
    REFERENCE_SLOWDOWN,
    SAME,
    SUSPECT,
    GateResult,
)


def gate_text(result: GateResult, store_runs: int, margin: float) -> str:
    """The gate's verdict as Markdown: what it judged and by which statistic, what it could
    see, its measured false-alarm rate, and every cell that is not the same speed."""
    table = result.table
    judged = table[~table["change"].isin([NO_HISTORY, "broken"])]
    n_paired = int((judged["statistic"] == PAIRED).sum())
    lines = [
        "## Against the history",
        "",
        f"{result.judged} cells judged against their own run-to-run series in the history "
        f"({store_runs} runs, the two compared left out): {n_paired} by their paired time "
        f"over the baseline's lockstep process, {len(judged) - n_paired} by their time less "
        f"the run's level. Screened at {result.screen_level:g} a cell, decided at a family-wise "
        f"false-alarm rate of {ALPHA:g} over all of them (Holm) and a margin of {margin:g}; "
        f"{int((table['change'] == NO_HISTORY).sum())} cells have fewer than {MIN_HISTORY} "
        "runs in it and are not judged by it.",
    ]
    for host, change in result.baseline_changes.items():
        lines.append(
            f"On {_safe(host)} the baseline changed version ({_safe(change)}): its paired "
            "cells there are judged by their time less the run's level instead."
        )
    lines += detectable_text(table, margin)
    lines += [shift_text(row) for _, row in result.shifts.iterrows()]
    if result.past_pairs:
        lines.append(
            f"On the history's own {result.past_pairs} past pairs of consecutive runs, the gate "
            f"failed {result.past_failed} ({result.past_failed / result.past_pairs:.0%}; "
            f"set to {ALPHA:.0%})."
        )
    else:
        lines.append(
            "The history holds no past pair of runs to measure the gate's false alarms on."
        )
    suspects = int((table["change"] == SUSPECT).sum())
    if suspects:
        lines.append(
            f"{suspects} cells are suspect (slower at the screen's level, not at the "
            f"family-wise one): about {result.screen_level:.0%} of unchanged cells are. They do not "
            "fail the gate unless `--confirm` measures them again, old against new in "
            "lockstep, and finds them slower."
        )
    lines += cell_rows(table[~table["change"].isin([SAME])])
    verdict = "fails" if result.failed else "passes"
    return "\n".join([*lines, "", f"The gate {verdict}."]) + "\n"


def cell_rows(shown: pd.DataFrame) -> list[str]:
    """The table of the cells that are not the same speed."""
    if shown.empty:
        return []
    lines = [
        "",
        "| cell | host | change | statistic | new / old | times new / old | history runs "
        "| spread |",
        "|---" * 8 + "|",
    ]
    for _, r in shown.iterrows():
        cell = f"{r['library']}/{r['device']} {r['operation']} {r['size']} {r['dtype']} t{r['threads']}"
        lines.append(
            f"| {_safe(cell)} | {_safe(r['host'])} | {r['change']} | {r['statistic']} | "
            f"{_ratio(r['ratio'])} | {_ratio(r['time_ratio'])} | {r['history_runs']} | "
            f"{'-' if pd.isna(r['spread']) else format(r['spread'], '.1%')} |"
        )
    return lines


def _ratio(value) -> str:
    return "-" if pd.isna(value) else f"{value:.3f}"


def detectable_text(table: pd.DataFrame, margin: float) -> list[str]:
    """What the judged cells could show, in a sentence (none where none is judged)."""
    strict, loose = table["detectable"].dropna(), table["screenable"].dropna()
    if strict.empty:
        return []
    # a ratio must be above the margin: where the margin is the bound, it is never reached
    within = int((strict <= REFERENCE_SLOWDOWN).sum()) if REFERENCE_SLOWDOWN > margin else 0
    screened = int((loose <= REFERENCE_SLOWDOWN).sum())
    return [
        f"With this history, {screened} of the {len(loose)} cells judged would be screened "
        f"at {REFERENCE_SLOWDOWN:g}x and {within} flagged slower without measuring again: "
        f"the slowdown the screen catches on its own is {loose.min():.3f}x at best, "
        f"{loose.median():.3f}x for the median cell (`screenable`); the one the family-wise "
        f"decision flags, {strict.min():.3f}x at best, {strict.median():.3f}x for the "
        f"median cell and {strict.quantile(0.9):.3f}x for the noisiest tenth (`detectable`)."
    ]


def shift_text(row: pd.Series) -> str:
    """A host and device's common shift beside the history's run levels, in a sentence."""
    where = f"{_safe(row['host'])}/{_safe(row['device'])}"
    if pd.isna(row["common"]):
        return (
            f"On {where}, {row['cells']} cells are ok on both sides, fewer than "
            f"{MIN_LEVEL_CELLS}: no common shift is given."
        )
    said = (
        f"On {where}, NEW's times read {row['common']:.3f}x OLD's over its {row['cells']} "
        "cells ok on both sides (the median cell): the machine's day, or a change to every "
        "cell alike"
    )
    if pd.isna(row["level_low"]):
        return f"{said}; the history holds too few runs there to say how far its days move."
    return (
        f"{said}. The history's {row['history_runs']} runs there differed as a whole by up "
        f"to {row['level_high'] / row['level_low']:.3f}x (their levels from "
        f"{row['level_low']:.3f}x to {row['level_high']:.3f}x of the median level)."
    )


def _safe(text) -> str:
    """Text from a results folder, safe in a Markdown table cell."""
    return "".join(c if c.isprintable() and c not in "|<>`" else " " for c in str(text))


def gate_json(result: GateResult, comparison_json: str) -> str:
    """``compare --history --json``: compare's own JSON and the gate's, one document."""
    cells = json.loads(result.table.to_json(orient="records", double_precision=15))
    gated = {
        "comparison": json.loads(comparison_json),
        "history": {
            "cells_judged": result.judged,
            "failed": result.failed,
            "suspects": int((result.table["change"] == SUSPECT).sum()),
            "screen_level": result.screen_level,
            "past_pairs": result.past_pairs,
            "past_pairs_failed": result.past_failed,
            "baseline_changes": result.baseline_changes,
            "shifts": json.loads(result.shifts.to_json(orient="records", double_precision=15)),
            "cells": cells,
        },
    }
    return json.dumps(gated, indent=1)
