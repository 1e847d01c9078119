"""The summary's "Roofline" section: the roofs measured on each host, and per operation the
fastest library's share of its roof at the largest size, and what bounds it (the findings
``numbench.roofline.analyse`` decided, read back from results/findings.parquet).

Every value from the tables enters through ``md_text`` or a table cell (``md_table``), as
in the rest of the summary.
"""

from __future__ import annotations

import pandas as pd

from numbench.cells import SETTING
from numbench.contract.facts import LOW_DRAM_SHARE, RoofFinding
from numbench.formatting import display, format_size
from numbench.report.markdown import Markdown, md_table, md_text
from numbench.report.sentences import md_link
from numbench.roofline.charts import roofline_chart_names
from numbench.roofline.contract import (
    BANDWIDTH_ROOFS,
    COMPUTE_ROOF,
    COST_MODEL_ERROR,
    PLACED_BY_BYTES,
    ROOF_MEASURED_LOW,
    ROOF_NOISE_FACTOR,
    STREAMS_LIKE_COPY,
)

ROOF_NAMES = {"l2": "L2", "l3": "L3", "dram": "DRAM", "compute": "compute"}


def _value(rows: pd.DataFrame, roof: str) -> str:
    """The roof's value: the best of its measurements, the best copy beside a bandwidth
    roof's triad, and their spread (best over worst) where it was measured more than once."""
    rows = rows[rows["roof"] == roof]
    if rows.empty:
        return "not measured"
    ok = rows[(rows["status"] == "ok") & rows["value"].notna()]
    if ok.empty:
        return str(rows.iloc[0]["status"])
    row = ok.loc[ok["value"].idxmax()]
    text = f"{row['value']:.3g}"
    if roof == COMPUTE_ROOF and isinstance(row["library"], str):
        text += f" ({display(row['library'])})"
    copies = ok["copy_value"].dropna() if "copy_value" in ok else pd.Series(dtype=float)
    if not copies.empty:
        text += f" (copy {copies.max():.3g})"
    if len(ok) > 1 and ok["value"].min() > 0:
        text += f", {len(ok)} measurements spread {row['value'] / ok['value'].min():.2f}x"
        rounds = _rounds(ok)
        if rounds:
            text += f" ({rounds})"
    return text


def _rounds(ok: pd.DataFrame) -> str:
    """When in the run each measurement was taken and what it read (``start 38.1, end
    41.2``), where the table says (its ``round`` column)."""
    if "round" not in ok or ok["round"].isna().all():
        return ""
    said = [
        f"{md_text(r)} {v:.3g}" if isinstance(r, str) else f"{v:.3g}"
        for r, v in zip(ok["round"], ok["value"], strict=True)
    ]
    return ", ".join(said)


def roofs_table(roofs: pd.DataFrame) -> str:
    """One row per (host, device, dtype, threads): each roof's value."""
    rows = []
    for (host, device, dtype, threads), group in roofs.groupby(list(SETTING), sort=True):
        compute = group[group["roof"] == COMPUTE_ROOF]
        peak = compute["theoretical_value"].dropna() if not compute.empty else pd.Series()
        rows.append(
            [host, device, dtype, str(int(threads))]
            + [_value(group, roof) for roof in BANDWIDTH_ROOFS]
            + [_value(group, COMPUTE_ROOF), f"{peak.iloc[0]:.3g}" if not peak.empty else ""]
        )
    header = ["host", "device", "dtype", "threads", "L2 GB/s", "L3 GB/s", "DRAM GB/s"]
    return md_table(header + ["compute GFLOP/s", "theoretical GFLOP/s"], rows, "llllrrrrr")


def roof_notes(roofs: pd.DataFrame) -> list[str]:
    """What the roofs say about themselves: a roof that could not be measured, a plateau
    that does not show, a measured peak past the theoretical one."""
    lines = []
    for r in roofs.sort_values(list(SETTING)).itertuples():
        said = r.note if isinstance(r.note, str) else None
        if r.status != "ok":
            said = f"{r.status}: {r.error}" if isinstance(r.error, str) else r.status
        if said:
            where = f"{r.host}, {r.device}, {r.dtype}, {int(r.threads)} thread(s)"
            lines.append(
                f"- {ROOF_NAMES.get(r.roof, r.roof)} roof ({md_text(where)}): {md_text(said)}"
            )
    return lines


def _share(finding: RoofFinding) -> str:
    text = f"{finding.roof_fraction:.0%}"
    if finding.roof_fraction > 1:
        text += " (past its roof: not a win)"
    return text


def _rate(finding: RoofFinding) -> str:
    if finding.gflop_per_s is not None:
        return f"{finding.gflop_per_s:.3g}"
    gb = f"{finding.gb_per_s:.3g} GB/s" if finding.gb_per_s is not None else "no rate"
    return f"none ({gb})"


def note_text(finding: RoofFinding) -> str:
    """The finding's note, with the roof's spread where the roof was measured low, and its
    share of the copy where it streams like one."""
    note = finding.roof_note or ""
    if STREAMS_LIKE_COPY in note and finding.copy_share is not None:
        return (
            f"{note}: past the {ROOF_NAMES.get(finding.roof, finding.roof)} roof (a triad's) "
            f"but at {finding.copy_share:.0%} of the copy measured beside it, so its stores "
            "likely go past the cache as a large copy's do; neither the roof nor the cost "
            "model is wrong"
        )
    if ROOF_MEASURED_LOW not in note:
        return note
    spread = (
        f"its measurements spread {finding.roof_spread:.2f}x"
        if finding.roof_spread is not None
        else "measured once, so its spread is not known"
    )
    return (
        f"{note}: the flop count is exact, so the cell shows the machine can do "
        f"{finding.roof_fraction:.0%} of the roof ({spread})"
    )


def findings_table(findings: list[RoofFinding]) -> str:
    header = ["operation", "size", "fastest", "GFLOP/s", "held against", "share", "bound by"]
    header += ["note"]
    rows = [
        [
            f.operation,
            format_size(f.size),
            display(f.library),
            _rate(f),
            ROOF_NAMES.get(f.roof, f.roof),
            _share(f),
            f.bound or "not known (no flop count)",
            note_text(f),
        ]
        for f in findings
    ]
    return md_table(header, rows, "lrlrllll")


def first_touch_lines(findings: list[RoofFinding]) -> list[str]:
    """Where the time of a memory-bound cell far below the DRAM roof goes, measured."""
    lines = []
    for f in findings:
        touch = f.first_touch
        if touch is None:
            continue
        faults = (
            f", {touch.faults_per_mib:.0f} page faults per MiB"
            if touch.faults_per_mib is not None
            else ""
        )
        share = (
            f"about {touch.seconds * 1e3:.3g} ms of its {f.median_s * 1e3:.3g} ms per call "
            f"({touch.share_of_time:.0%})"
            if touch.seconds < f.median_s
            else f"{touch.seconds * 1e3:.3g} ms, as long as its whole call "
            f"({f.median_s * 1e3:.3g} ms): fresh memory alone explains its time"
        )
        without = (
            f"; without it the cell would reach {touch.fraction_without:.0%} of the roof"
            if touch.fraction_without < 10
            else ""
        )
        lines.append(
            f"- {md_text(f.operation)} at n = {format_size(f.size)} "
            f"({md_text(display(f.library))}, {f.roof_fraction:.0%} of the DRAM roof): its "
            f"output ({touch.output_bytes / 1e6:.0f} MB) is fresh memory on every call (glibc "
            "maps a block this large afresh for each). On this host the roofs rule measured "
            f"first touching fresh memory at {touch.s_per_gb * 1e3:.0f} ms per GB{faults} (a "
            f"copy into a fresh array against one into a reused array): {share}{without}."
        )
    return lines


def roofline_section(
    bench: pd.DataFrame,
    roofs: pd.DataFrame | None,
    charts_dir: str,
    findings: tuple[RoofFinding, ...] | list[RoofFinding] = (),
) -> list[str]:
    """The section's lines (none without a roofs table); ``findings``: ``Findings.roofline``."""
    if roofs is None:
        return []
    lines = [
        "## Roofline",
        "",
        "Each ok cell against the roofs measured on its host (`results/roofs.parquet`): its "
        "arithmetic intensity (the cost model's flops per fewest bytes), the roof it is held "
        "against (the cache its working set fits in, by the caches' sizes, or the compute "
        "roof) and its share of what that roof allows. Bandwidths count bytes as STREAM "
        "does (no write-allocate), as the cost models do; each CPU one is a triad's, with the "
        "copy measured beside it in brackets (a GPU's DRAM roof is a device-to-device copy) (a large copy may store past the cache, and reach "
        "more than any cell that writes through it). A roof "
        "measured more than once "
        "(before the cells and again after them: `roofs_at_end`) counts at its best, and "
        "its spread across the run (best over worst) is given beside it.",
        "",
        roofs_table(roofs),
        "",
    ]
    notes = roof_notes(roofs)
    if notes:
        lines += [*notes, ""]
    names = roofline_chart_names(bench, roofs) if "arithmetic_intensity" in bench else {}
    if names:
        links = [md_link(name, f"{charts_dir}/{name}.html") for name in sorted(names.values())]
        lines += ["Charts: " + ", ".join(links) + ".", ""]
    if not findings:
        return lines + ["No cell has a place on a roofline (no cost model, or no roofs).", ""]
    for (host, device, dtype, threads), group in _by_dims(findings):
        lines += [
            f"### {md_text(device)}, {md_text(dtype)}, {threads} thread(s) on {md_text(host)}",
            "",
            "The fastest library of each operation at its largest size:",
            "",
            findings_table(group),
            "",
        ]
        touch = first_touch_lines(group)
        if touch:
            lines += [
                f"Memory-bound cells below {LOW_DRAM_SHARE:.0%} of the DRAM roof, and where "
                "their time goes:",
                "",
                *touch,
                "",
            ]
    lines += [Markdown(_notes_line()), ""]
    return lines


def _notes_line() -> str:
    return (
        "Notes: *cache-resident*: the working set fits (or, called again and again, partly "
        "stays in) a cache, and the cell is held against that cache's roof; *within noise*: "
        f"past its roof by at most {ROOF_NOISE_FACTOR:g}x; *{ROOF_MEASURED_LOW}*: further "
        "past the compute roof than noise explains, by an operation whose flop count is exact "
        "(a matrix product's): the roof, not the cell, is wrong (measured at a disturbed "
        f"moment); *{COST_MODEL_ERROR}*: further past its roof than noise explains where the "
        "cost model can be wrong, and past a bandwidth roof's copy too (it counts work the "
        f"library does not do, or the roof is wrong); *{STREAMS_LIKE_COPY}*: further past a bandwidth roof (a triad's) than "
        "noise explains, but within what the copy measured beside it reaches: the cell "
        "stores past the cache as a large copy does; "
        f"*{PLACED_BY_BYTES}*: the operation's work is not floating-point arithmetic "
        "(a sort compares), so its share is its GB/s against the bandwidth roof of its "
        "working set, it has no intensity to say what bounds it, and the charts leave it off."
    )


def _by_dims(findings: list[RoofFinding]):
    groups: dict[tuple, list[RoofFinding]] = {}
    for f in findings:
        groups.setdefault((f.host, f.device, f.dtype, f.threads), []).append(f)
    return sorted(groups.items(), key=lambda item: str(item[0]))
