"""``numbench compare --confirm``'s Markdown: the flagged cells measured again, each one's
outcome (as plain rows: ``numbench.confirm.Outcome`` as a dict). Cell keys come from result
files, so every value enters through a table cell (``md_table``)."""

from __future__ import annotations

from numbench.report.markdown import md_table

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
