"""The ``pipelined`` chart: per-call latency against pipelined time per call, against size,
one facet per operation, for the libraries whose calls are asynchronous (timed both ways)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from numbench.contract import pipelined_cells
from numbench.formatting import series_labels
from numbench.report.style import HEIGHT, WIDTH, color, log_x, log_y, no_data

LATENCY_LABEL = "latency (each call waited for)"
PIPELINED_LABEL = "pipelined (calls queued, one wait)"


def pipelined_frame(bench: pd.DataFrame) -> pd.DataFrame:
    """Two rows per asynchronous ok cell: its latency and its pipelined time per call."""
    d = pipelined_cells(bench).copy()
    if d.empty:
        return d
    d["series"] = series_labels(d)
    keep = ["series", "operation", "size", "pipelined_speedup"]
    latency = d[keep].assign(
        mode=LATENCY_LABEL, seconds=d["median_s"], ci_low=d["ci_low_s"], ci_high=d["ci_high_s"]
    )
    pipelined = d[keep].assign(
        mode=PIPELINED_LABEL,
        seconds=d["pipelined_median_s"],
        ci_low=d["pipelined_ci_low_s"],
        ci_high=d["pipelined_ci_high_s"],
    )
    out = pd.concat([latency, pipelined], ignore_index=True)
    return out[out["seconds"] > 0]


def pipelined_chart(bench: pd.DataFrame) -> alt.TopLevelMixin:
    title = "latency against pipelined throughput: time per call"
    d = pipelined_frame(bench)
    if d.empty:
        return no_data(title, "no asynchronous library was measured (one figure per cell)")
    domain = sorted(d["series"].unique())
    dash = alt.StrokeDash(
        "mode:N",
        title=None,
        scale=alt.Scale(domain=[LATENCY_LABEL, PIPELINED_LABEL], range=[[1, 0], [5, 3]]),
    )
    base = alt.Chart().encode(x=log_x(d["size"]), color=color(domain))
    band = base.mark_area(opacity=0.12).encode(
        y=alt.Y("ci_low:Q", scale=alt.Scale(type="log")), y2="ci_high:Q", detail="mode:N"
    )
    line = base.mark_line(point=True).encode(
        y=log_y("seconds:Q", "time per call (s)", fmt="~s"),
        strokeDash=dash,
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            "operation:N",
            "size:Q",
            "mode:N",
            alt.Tooltip("seconds:Q", title="s per call", format=".3e"),
            alt.Tooltip("pipelined_speedup:Q", title="latency / pipelined", format=".3g"),
        ],
    )
    return (
        alt.layer(band, line, data=d)
        .properties(width=WIDTH // 2, height=HEIGHT // 2)
        .facet(facet=alt.Facet("operation:N", title=None), columns=3)
        .properties(
            title=alt.Title(
                title,
                subtitle="solid: each call waited for; dashed: calls queued back to back "
                "(asynchronous libraries only; a synchronous library's two are one)",
            )
        )
        .resolve_scale(x="independent", y="independent")
    )
