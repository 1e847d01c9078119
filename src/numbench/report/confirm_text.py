"""``numbench compare --confirm``'s Markdown: the flagged cells measured again, each one's
outcome (as plain rows: ``numbench.confirm.Outcome`` as a dict). Cell keys come from result
files, so every value enters through a table cell (``md_table``)."""

from __future__ import annotations

from numbench.report.markdown import md_table

#: what each outcome means for the gate, in the table
MEANING = {
    "confirmed": "slower, confirmed: fails",
    "cleared": "not slower when paired: cleared",
    "in doubt": "in doubt: fails",
    "unconfirmed": "not measured again: fails",
}


def confirm_text(outcomes: list[dict], rounds: int, margin: float) -> str:
    """The section ``--confirm`` adds below the gate's text."""
    lines = ["## Measured again (--confirm)", ""]
    if not outcomes:
        lines.append("No cell was flagged slower: nothing to measure again.")
        return "\n".join(lines) + "\n"
    failing = sum(o["outcome"] != "cleared" for o in outcomes)
    lines += [
        f"{len(outcomes)} cell(s) flagged slower were measured again here, OLD's interpreter "
        f"against NEW's in {rounds} lockstep rounds each, more while in doubt. A cell is "
        f"confirmed slower where the paired ratio's 95% interval lies wholly above 1 and the "
        f"ratio past {margin:g}, cleared where its upper bound (5% split over the looks at "
        f"it) lies below {margin:g}, and in doubt otherwise. {failing} still fail the gate.",
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
        rows.append([cell, MEANING[o["outcome"]], ratio, interval, o["reason"] or ""])
    lines.append(md_table(["cell", "outcome", "new / old, paired", "95% interval", "why"], rows))
    return "\n".join(lines) + "\n"
