"""``numbench compare``'s words: the comparison, the history's gate and ``--confirm`` as
Markdown (and the gate as JSON), on the report floor of the comparison's package.

The modules that judge (``runs``, ``gate``, ``confirm``) return tables and outcomes; this one
alone words them, and ``numbench.compare.command`` prints what it returns. ``markdown``: a
``Comparison`` (``numbench.compare.runs``) in words and tables. ``gate_text``: the history
gate's verdict (``numbench.compare.gate``), the section "Against the history" printed below
compare's own, and ``gate_json`` the same as JSON. ``confirm_text``: ``--confirm``'s section,
the flagged cells measured again, each one's outcome (as plain rows:
``numbench.compare.confirm.Outcome`` as a dict).

Either side may come from another host: its text is data, so every value enters through
``md_text`` or a table cell (``md_table``), and the gate's through ``_safe``; cell keys come
from result files, so every value of ``confirm_text`` enters through a table cell too."""

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
    SUSPECT,
    GateResult,
)
from numbench.compare.runs import SPREAD_MEASURED, Comparison
from numbench.contract.conclusions import BROKEN, NOT_COMPARABLE
from numbench.report.markdown import md_table, md_text
from numbench.stats import FASTER, SAME, SLOWER


# -- the comparison in words ------------------------------------------------------------------
def environment_text(differences: list[dict]) -> str:
    if not differences:
        return "The two environments are alike: same hosts, CPU models, versions and settings."
    rows = [
        [d["what"], ", ".join(d["old"]) or "–", ", ".join(d["new"]) or "–"] for d in differences
    ]
    return (
        "The two environments differ (a cell measured differently is marked in `alike`):\n\n"
        + md_table(["", "old", "new"], rows)
    )


def spread_text(c: Comparison) -> str:
    """The Markdown above compare's table: how the interval was made, each side's s_p per
    device and where it came from, and the median ratio."""
    rows = []
    for side in ("old", "new"):
        for device, s in sorted(c.spreads.get(side, {}).items()):
            source = (
                f"measured over {s['cells']} cells"
                if s["source"] == SPREAD_MEASURED
                else f"default ({s['cells']} cells with 2+ processes, {c.min_spread_cells} needed)"
            )
            rows.append([side, str(device), f"{s['sd']:.4f}", source])
    median = c.overall["median_ratio"]
    shift = (
        f" The median ratio over the {c.overall['median_ratio_cells']} cells compared is "
        f"{median:.3f}: a shift of the whole machine between the runs moves every cell alike."
        if median is not None
        else ""
    )
    return (
        "The interval includes run-to-run variance: on the log scale, each side's standard "
        "error is its own interval's, or s_p / sqrt(processes) where larger (s_p: the side's "
        f"typical spread between processes, below), with run_sd = {c.run_sd:g} added for the "
        "drift between runs. `floor` is the least half-width that gives, `widened` where the "
        f"process floor was above the cell's own.{shift}\n\n"
        + md_table(["side", "device", "s_p", "from"], rows, "llrl")
    )


def _change_text(r) -> str:
    if r.change in (BROKEN, NOT_COMPARABLE):
        return f"{r.change} ({r.status_old} -> {r.status_new})"
    return r.change


def _head(c: Comparison) -> str:
    n = c.counts
    head = (
        f"Comparing {md_text(c.new_name)} (new) against {md_text(c.old_name)} (old): ratio = "
        f"new median / old median, 95% interval; margin {c.margin:g}x. "
        f"{n.get(BROKEN, 0)} broken (ok before, not now), {n.get(SLOWER, 0)} slower, "
        f"{n.get(FASTER, 0)} faster, {n.get(SAME, 0)} the same"
    )
    others = {k: v for k, v in n.items() if k not in (BROKEN, SLOWER, FASTER, SAME)}
    head += "".join(f", {v} {k}" for k, v in sorted(others.items())) + "."
    unlike = int((c.table["alike"] == False).sum())  # noqa: E712 - None is neither
    if unlike:
        head += f" {unlike} cell(s) were not measured alike (see `alike`)."
    return head


def markdown(c: Comparison) -> str:
    """The comparison as Markdown: the counts, what differs between the two sides, how the
    interval was made, and one row per cell."""
    rows = []
    for r in c.table.itertuples():
        ratio = "" if pd.isna(r.ratio) else f"{r.ratio:.3f}"
        ci = "" if pd.isna(r.ci_low) else f"{r.ci_low:.3f} to {r.ci_high:.3f}"
        floor = "" if pd.isna(r.ci_floor) else f"±{r.ci_floor:.1%}"
        floor += " widened" if floor and r.floored else ""
        cell = [r.library, r.device, r.operation, str(r.size), r.dtype, str(int(r.threads))]
        alike = "" if r.alike is None else "yes" if r.alike else "no: " + ", ".join(r.differs)
        rows.append([*cell, ratio, ci, floor, _change_text(r), alike])
    header = ["library", "device", "operation", "size", "dtype", "threads", "ratio", "95% CI"]
    header += ["floor", "change", "alike"]
    parts = [_head(c)]
    if c.differences is not None:
        parts.append(environment_text(c.differences))
    if c.spreads is not None:
        parts.append(spread_text(c))
    parts.append(md_table(header, rows, "lllrlrrrrll"))
    return "\n\n".join(parts) + "\n"


# -- --confirm: the flagged cells measured again ----------------------------------------------
#: what each outcome means for the gate, in the table, for a cell flagged slower outright
MEANING = {
    "confirmed": "slower, confirmed: fails",
    "cleared": "not slower when paired: cleared",
    "in doubt": "in doubt: fails",
    "unconfirmed": "not measured again: fails",
}
#: and for a suspect of the history's screen, which fails only where confirmed
SUSPECT_MEANING = {
    **MEANING,
    "in doubt": "suspect, in doubt: passes, not confirmed",
    "unconfirmed": "suspect, not measured again: passes, not confirmed",
}


def confirm_text(outcomes: list[dict], rounds: int, margin: float) -> str:
    """The section ``--confirm`` adds below the gate's text."""
    lines = ["## Measured again (--confirm)", ""]
    if not outcomes:
        lines.append("No cell was flagged slower or suspect: nothing to measure again.")
        return "\n".join(lines) + "\n"
    failing = sum(
        o["outcome"] == "confirmed" or (o.get("strict", True) and o["outcome"] != "cleared")
        for o in outcomes
    )
    level = 0.05 / len(outcomes)
    lines += [
        f"{len(outcomes)} cell(s) flagged slower or suspect were measured again here, OLD's "
        f"interpreter against NEW's in {rounds} lockstep rounds each, more while in doubt. A "
        f"cell is confirmed slower where the paired ratio's {1 - level:.4g} interval (5% "
        f"split over the cells measured again) lies wholly above 1 and the ratio past "
        f"{margin:g}, cleared where its upper bound (5% split over the looks at it) lies "
        f"below {margin:g}, and in doubt otherwise. A cell flagged slower outright fails "
        f"unless cleared; a suspect only where confirmed. {failing} still fail the gate.",
        "",
    ]
    rows = []
    for o in outcomes:
        key = o["key"]
        cell = (
            f"{key['library']}/{key['device']} {key['operation']} {key['size']} "
            f"{key['dtype']} t{key['threads']}"
        )
        ratio = "–" if o["ratio"] is None else f"{o['ratio']:.3f}"
        interval = "–" if o["ci_low"] is None else f"{o['ci_low']:.3f} – {o['ci_high']:.3f}"
        meaning = (MEANING if o.get("strict", True) else SUSPECT_MEANING)[o["outcome"]]
        rows.append([cell, meaning, ratio, interval, o["reason"] or ""])
    header = ["cell", "outcome", "new / old, paired", "interval", "why"]
    lines.append(md_table(header, rows))
    return "\n".join(lines) + "\n"


# -- the history's gate in words --------------------------------------------------------------
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
