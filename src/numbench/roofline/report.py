"""The roofline in the report: the summary's "Roofline" section and the roofline charts it
links to, one per (host, device, dtype, threads) with measured roofs.

The section: the roofs measured on each host, and per operation the fastest library's share
of its roof at the largest size, and what bounds it (the findings
``numbench.roofline.analyse`` decided, read back from results/findings.parquet). Every value
from the tables enters through ``md_text`` or a table cell (``md_table``), as in the rest of
the summary.

The charts (``roofline_charts``, drawn by ``numbench.report.charts``): log-log, arithmetic
intensity (flop per byte, from each operation's cost model) across, GFLOP/s up. Each
bandwidth roof (L2, L3, DRAM) is a line ``intensity x GB/s`` that bends into the compute roof
at its ridge point (``compute / GB/s``, marked); the roofs' labels are stacked at the left
edge far enough apart not to overlap. Every ok cell is a point, coloured by library and
shaped by operation (``SHAPES``: each operation its own, up to that many). A cell past its
roof is never drawn as a win: it is an open point, and its tooltip gives its note
(``numbench.roofline.analyse``). An operation without a flop count (a sort) has no
intensity: it is left off, and the chart's subtitle names it.

The section names its charts as they are drawn (``roofline_chart_names``), so both live here.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from numbench.cells import SETTING
from numbench.contract.facts import LOW_DRAM_SHARE, RoofFinding
from numbench.formatting import display, format_size, series_labels
from numbench.report.drawing import HEIGHT, WIDTH
from numbench.report.markdown import Markdown, md_link, md_table, md_text
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


# -- the roofline charts ------------------------------------------------------------------
#: points along each roof line (it is straight on log-log axes, bent once at the ridge)
ROOF_LINE_POINTS = 60
#: the intensity axis reaches this far beyond the cells and the ridge points, each side
AXIS_MARGIN = 4.0
ROOF_LABELS = {"l2": "L2", "l3": "L3", "dram": "DRAM"}
GROUP_COLUMNS = list(SETTING)
#: the operations' shapes: Vega's eight named ones, then SVG paths (a star, a hexagon, an X);
#: Vega's default list has eight and repeats, so a ninth operation shared the first's mark
SHAPES = (
    "circle",
    "square",
    "cross",
    "diamond",
    "triangle-up",
    "triangle-down",
    "triangle-right",
    "triangle-left",
    "M0,-1L0.24,-0.33L0.95,-0.31L0.38,0.12L0.59,0.81L0,0.4L-0.59,0.81L-0.38,0.12L-0.95,-0.31"
    "L-0.24,-0.33Z",
    "M0,-1L0.87,-0.5L0.87,0.5L0,1L-0.87,0.5L-0.87,-0.5Z",
    "M-1,-0.7L-0.7,-1L0,-0.3L0.7,-1L1,-0.7L0.3,0L1,0.7L0.7,1L0,0.3L-0.7,1L-1,0.7L-0.3,0Z",
)
#: pixels between two roof labels' baselines (their font is 10 px)
LABEL_GAP_PX = 13
#: the GFLOP/s axis reaches this far beyond the roofs and the cells, each side
Y_MARGIN = 2.0


def roofline_chart_names(bench: pd.DataFrame, roofs: pd.DataFrame) -> dict[tuple, str]:
    """(host, device, dtype, threads) -> chart name, for every group with a measured roof:
    ``roofline_{device}_{dtype}_t{threads}``, with ``_h{k}`` (the host's rank) when the
    results hold several hosts."""
    ok = roofs[(roofs["status"] == "ok") & roofs["value"].notna()]
    groups = sorted({tuple(r) for r in ok[GROUP_COLUMNS].itertuples(index=False)}, key=str)
    hosts = sorted({g[0] for g in groups}, key=str)
    names = {}
    for host, device, dtype, threads in groups:
        name = f"roofline_{device}_{dtype}_t{int(threads)}"
        if len(hosts) > 1:
            name += f"_h{hosts.index(host) + 1}"
        names[(host, device, dtype, int(threads))] = name
    return names


def roof_lines(
    group_roofs: pd.DataFrame, lo: float, hi: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lines, ridges): each bandwidth roof as ``min(compute, x * GB/s)`` over [lo, hi],
    and its ridge point."""
    ok = group_roofs[(group_roofs["status"] == "ok") & group_roofs["value"].notna()]
    compute = ok.loc[ok["roof"] == COMPUTE_ROOF, "value"]
    peak = float(compute.iloc[0]) if not compute.empty else math.inf
    xs = np.geomspace(lo, hi, ROOF_LINE_POINTS)
    lines, ridges = [], []
    for level in BANDWIDTH_ROOFS:
        row = ok[ok["roof"] == level]
        if row.empty:
            continue
        gb_per_s = float(row["value"].iloc[0])
        label = f"{ROOF_LABELS[level]} {gb_per_s:.3g} GB/s"
        ridge = peak / gb_per_s
        points = sorted({*xs, ridge} if lo <= ridge <= hi else set(xs))
        lines += [{"roof": label, "x": x, "y": min(peak, x * gb_per_s)} for x in points]
        if math.isfinite(peak):
            ridges.append({"roof": label, "x": ridge, "y": peak, "text": f"ridge {ridge:.3g}"})
    if math.isfinite(peak) and not lines:
        lines = [{"roof": "compute", "x": x, "y": peak} for x in (lo, hi)]
    return pd.DataFrame(lines), pd.DataFrame(ridges)


def _of_group(frame: pd.DataFrame, key: tuple) -> pd.Series:
    """Rows of ``frame`` of one (host, device, dtype, threads)."""
    host, device, dtype, threads = key
    return (
        (frame["host"] == host)
        & (frame["device"] == device)
        & (frame["dtype"] == dtype)
        & (frame["threads"] == threads)
    )


def placed_cells(bench: pd.DataFrame, key: tuple) -> pd.DataFrame:
    """The group's ok cells with an intensity and a positive GFLOP/s: the points drawn."""
    return bench[
        (bench["status"] == "ok")
        & _of_group(bench, key)
        & bench["arithmetic_intensity"].notna()
        & bench["gflop_per_s"].notna()
        & (bench["gflop_per_s"] > 0)
    ].copy()


def left_off(bench: pd.DataFrame, key: tuple) -> list[str]:
    """The group's operations with ok cells of which none is drawn: no flop count (placed
    by their bytes in the summary) or no cost model at all."""
    ok = bench[(bench["status"] == "ok") & _of_group(bench, key)]
    drawn = set(placed_cells(bench, key)["operation"])
    return sorted(set(ok["operation"]) - drawn)


def label_ys(ys: list[float], y_lo: float, y_hi: float) -> list[float]:
    """Each label's height on the log axis [y_lo, y_hi] (``HEIGHT`` px tall), as near its
    own ``ys`` as it can be while at least ``LABEL_GAP_PX`` below the label above it: two
    roofs of close bandwidth (an L2 and an L3) no longer print over each other."""
    gap = (y_hi / y_lo) ** (LABEL_GAP_PX / HEIGHT)
    order = sorted(range(len(ys)), key=lambda i: -ys[i])
    out = list(ys)
    ceiling = math.inf
    for i in order:
        out[i] = min(ys[i], ceiling)
        ceiling = out[i] / gap
    return out


def roof_layers(
    lines: pd.DataFrame,
    ridge_points: pd.DataFrame,
    compute: pd.DataFrame,
    axes: tuple[alt.X, alt.Scale],
    hi: float,
) -> list:
    """The roofs: each bandwidth roof's line and label, the compute roof's label, the ridges."""
    x, y_scale = axes
    y_title = "GFLOP/s (cost model / median time)"
    log_y = alt.Y("y:Q", scale=y_scale)
    layers = [
        alt.Chart(lines)
        .mark_line(color="#555", strokeDash=[4, 2])
        .encode(
            x=x,
            y=alt.Y("y:Q", scale=y_scale, title=y_title),
            detail="roof:N",
            tooltip=[alt.Tooltip("roof:N", title="roof")],
        )
    ]
    if not lines.empty:
        ends = lines.sort_values("x").groupby("roof", as_index=False).first()
        domain = y_scale.to_dict()["domain"]
        ends["y"] = label_ys(list(ends["y"]), *domain)
        layers.append(
            alt.Chart(ends)
            .mark_text(align="left", dx=4, dy=-6, fontSize=10, color="#333")
            .encode(x=x, y=log_y, text="roof:N")
        )
    if not compute.empty and compute["value"].notna().any():
        peak = float(compute["value"].dropna().iloc[0])
        label = pd.DataFrame([{"x": hi, "y": peak, "text": f"compute {peak:.3g} GFLOP/s"}])
        layers.append(
            alt.Chart(label)
            .mark_text(align="right", dx=-4, dy=-8, fontSize=10, color="#333")
            .encode(x=x, y=log_y, text="text:N")
        )
    if not ridge_points.empty:
        layers.append(
            alt.Chart(ridge_points)
            .mark_point(shape="diamond", size=70, filled=True, color="black")
            .encode(
                x=x,
                y=log_y,
                tooltip=["roof:N", alt.Tooltip("x:Q", title="ridge (flop/byte)", format=".3g")],
            )
        )
    return layers


def cell_layers(cells: pd.DataFrame, axes: tuple[alt.X, alt.Scale]) -> list:
    """Every placed cell: filled below its roof, open past it (never drawn as a win)."""
    if cells.empty:
        return []
    x, y_scale = axes
    operations = sorted(cells["operation"].unique())
    shapes = [SHAPES[i % len(SHAPES)] for i in range(len(operations))]
    cells["series"] = series_labels(cells)
    cells["x"] = cells["arithmetic_intensity"]
    cells["above"] = cells["roof_fraction"].fillna(0) > 1
    cells["share"] = cells["roof_fraction"]
    domain = sorted(cells["series"].unique())
    encode = dict(
        x=x,
        y=alt.Y("gflop_per_s:Q", scale=y_scale),
        color=alt.Color("series:N", title="library", scale=alt.Scale(domain=domain)),
        shape=alt.Shape(
            "operation:N", title="operation", scale=alt.Scale(domain=operations, range=shapes)
        ),
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            alt.Tooltip("operation:N"),
            alt.Tooltip("size:Q"),
            alt.Tooltip("gflop_per_s:Q", title="GFLOP/s", format=".3g"),
            alt.Tooltip("roof:N", title="held against"),
            alt.Tooltip("share:Q", title="share of its roof", format=".0%"),
            alt.Tooltip("roof_note:N", title="note"),
        ],
    )
    below, above = cells[~cells["above"]], cells[cells["above"]]
    layers = []
    if not below.empty:
        layers.append(alt.Chart(below).mark_point(filled=True, size=60).encode(**encode))
    if not above.empty:
        layers.append(
            alt.Chart(above).mark_point(filled=False, size=90, strokeWidth=2).encode(**encode)
        )
    return layers


def roofline_chart(
    bench: pd.DataFrame, roofs: pd.DataFrame, key: tuple
) -> alt.TopLevelMixin | None:
    """The roofline of one (host, device, dtype, threads), or None without a roof."""
    host, device, dtype, threads = key
    mine = roofs[_of_group(roofs, key)]
    cells = placed_cells(bench, key)
    bandwidth = mine[mine["roof"].isin(BANDWIDTH_ROOFS) & (mine["status"] == "ok")]
    compute = mine[(mine["roof"] == COMPUTE_ROOF) & (mine["status"] == "ok")]
    if bandwidth.empty and compute.empty:
        return None
    ridges = [
        float(c) / float(b) for c in compute["value"].dropna() for b in bandwidth["value"].dropna()
    ]
    xs = list(cells["arithmetic_intensity"]) + ridges
    lo = min(xs, default=0.1) / AXIS_MARGIN
    hi = max(xs, default=10.0) * AXIS_MARGIN
    lines, ridge_points = roof_lines(mine, lo, hi)
    x_scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
    x = alt.X("x:Q", scale=x_scale, title="arithmetic intensity (flop per byte, cost model)")
    ys = list(cells["gflop_per_s"]) + (list(lines["y"]) if not lines.empty else [])
    y_domain = [min(ys, default=1.0) / Y_MARGIN, max(ys, default=10.0) * Y_MARGIN]
    axes = (x, alt.Scale(type="log", domain=y_domain, nice=False))
    layers = roof_layers(lines, ridge_points, compute, axes, hi) + cell_layers(cells, axes)
    threads_word = "thread" if int(threads) == 1 else "threads"
    subtitle = [
        "dashed: the roofs measured here (results/roofs.parquet), diamonds: ridge points; "
        "open points: past their roof (see the note), never a win"
    ]
    missing = left_off(bench, key)
    if missing:
        subtitle.append(
            f"left off: {', '.join(missing)} (no flop count, so no intensity; the summary "
            "places an operation with bytes by its GB/s)"
        )
    return alt.layer(*layers).properties(
        title=alt.Title(
            f"roofline: {device}, {dtype}, {int(threads)} {threads_word}, host {host}",
            subtitle=subtitle,
        ),
        width=WIDTH,
        height=HEIGHT,
    )


def roofline_charts(
    bench: pd.DataFrame, roofs: pd.DataFrame | None
) -> dict[str, alt.TopLevelMixin]:
    """Every roofline chart, by name (``roofline_chart_names``)."""
    if roofs is None or roofs.empty or "arithmetic_intensity" not in bench:
        return {}
    charts = {}
    for key, name in roofline_chart_names(bench, roofs).items():
        chart = roofline_chart(bench, roofs, key)
        if chart is not None:
            charts[name] = chart
    return charts
