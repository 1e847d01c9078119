"""The charts drawn once over every operation: the speedup heatmap and first-call costs."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from numbench.contract.speedups import in_doubt
from numbench.formatting import series_labels
from numbench.report.style import color, log_y, no_data


def heatmap_frame(speedups: pd.DataFrame) -> pd.DataFrame:
    d = speedups[speedups["speedup"].notna()].copy()
    if d.empty:
        return d
    d["series"] = series_labels(d)
    parts = []
    for op, g in d.groupby("operation"):
        for end, size in (("smallest size", g["size"].min()), ("largest size", g["size"].max())):
            part = g[g["size"] == size].copy()
            part["end"] = end
            part["row"] = f"{op} (n = {size:,})"
            parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["label"] = [
        f"{s:.2g}×" + (" ns" if v == "same" else "") + (" ?" if doubt else "")
        for s, v, doubt in zip(out["speedup"], out["verdict"], in_doubt(out), strict=True)
    ]
    return out


def heatmap_chart(speedups: pd.DataFrame, baseline: str) -> alt.TopLevelMixin:
    title = f"speedup over {baseline} at each operation's smallest and largest size"
    d = heatmap_frame(speedups)
    if d.empty:
        return no_data(title, "no speedups")
    m = max(abs(math.log10(v)) for v in d["speedup"] if v > 0) or 1.0
    speedup_color = alt.Color(
        "speedup:Q",
        title="speedup (×)",
        scale=alt.Scale(type="log", scheme="redblue", domain=[10**-m, 10**m], domainMid=1),
    )
    base = alt.Chart(d).encode(
        x=alt.X("series:N", title="library"),
        y=alt.Y("row:N", title=None),
    )
    rect = base.mark_rect().encode(
        color=speedup_color,
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            alt.Tooltip("operation:N"),
            alt.Tooltip("size:Q"),
            alt.Tooltip("speedup:Q", format=".3g"),
            alt.Tooltip("speedup_ci_low:Q", title="CI low", format=".3g"),
            alt.Tooltip("speedup_ci_high:Q", title="CI high", format=".3g"),
        ],
    )
    text = base.mark_text(fontSize=11).encode(
        text="label:N",
        color=alt.condition(
            f"abs(log(datum.speedup) / LN10) > {0.6 * m}", alt.value("white"), alt.value("black")
        ),
    )
    return (
        alt.layer(rect, text, data=d)
        .properties(width=70 * d["series"].nunique(), height=28 * d["operation"].nunique())
        .facet(column=alt.Column("end:N", title=None, sort=["smallest size", "largest size"]))
        .resolve_scale(y="independent")
        .properties(
            title=alt.Title(
                title,
                subtitle="blue: faster than the baseline, red: slower; ns: the same speed; "
                "?: in doubt, the CI holds the margin",
            )
        )
    )


def first_call_frame(bench: pd.DataFrame) -> pd.DataFrame:
    d = bench[(bench["status"] == "ok") & bench["first_call_s"].notna()].copy()
    if d.empty:
        return d
    d["series"] = series_labels(d)
    steady = d.assign(measure="steady state (median)", seconds=d["median_s"])
    first = d.assign(measure="first call (includes compile)", seconds=d["first_call_s"])
    out = pd.concat([first, steady], ignore_index=True)
    return out[out["seconds"] > 0]


def first_call_chart(bench: pd.DataFrame) -> alt.TopLevelMixin:
    title = "first call against steady-state time"
    d = first_call_frame(bench)
    if d.empty:
        return no_data(title, "no ok cells")
    domain = sorted(d["series"].unique())
    return (
        alt.Chart(d)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "size:Q",
                scale=alt.Scale(type="log", nice=False, padding=14),
                axis=alt.Axis(title="size (n)", format="~s", labelOverlap=True),
            ),
            y=log_y("seconds:Q", "time (s; m = 10^-3, µ = 10^-6)", fmt="~s"),
            color=color(domain),
            strokeDash=alt.StrokeDash(
                "measure:N",
                sort=["first call (includes compile)", "steady state (median)"],
                legend=None,
            ),
            tooltip=[
                alt.Tooltip("series:N", title="library"),
                alt.Tooltip("operation:N"),
                alt.Tooltip("size:Q"),
                alt.Tooltip("measure:N"),
                alt.Tooltip("seconds:Q", format=".3e"),
            ],
        )
        .properties(width=220, height=200)
        .facet(facet=alt.Facet("operation:N", title=None), columns=3)
        .resolve_scale(y="independent", x="independent")
        .properties(
            title=alt.Title(
                title,
                subtitle="solid: first call (includes tracing and compilation); "
                "dashed: steady-state median",
            )
        )
    )
