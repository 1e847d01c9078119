"""``numbench compare``'s Markdown: a ``Comparison`` (``numbench.compare.runs``) in words
and tables. Either side may come from another host: its text is data, so every value enters
through ``md_text`` or a table cell (``md_table``).

And ``--confirm``'s section (``confirm_text``): the flagged cells measured again, each one's
outcome (as plain rows: ``numbench.compare.confirm.Outcome`` as a dict). Cell keys come from
result files, so every value enters through a table cell too."""

from __future__ import annotations

import pandas as pd

from numbench.compare.runs import SPREAD_MEASURED, Comparison
from numbench.contract.conclusions import BROKEN, NOT_COMPARABLE
from numbench.report.markdown import md_table, md_text
from numbench.stats import FASTER, SAME, SLOWER


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
