"""The charts of the grid's dtype and threads dimensions (results/precision.parquet and
results/scaling.parquet): a ratio against size per library, one facet per operation."""

from __future__ import annotations

import altair as alt
import pandas as pd

from numbench.formatting import series_labels
from numbench.report.style import HEIGHT, WIDTH, color, log_x, log_y, no_data


def _ratio_chart(d: pd.DataFrame, field: str, title: str, axis: str, extra: list[str]):
    d = d[d[field].notna() & (d[field] > 0)].copy()
    d["series"] = series_labels(d)
    series = sorted(d["series"].unique())
    base = alt.Chart(d).encode(x=log_x(d["size"]), color=color(series))
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("ci_low:Q", scale=alt.Scale(type="log")), y2="ci_high:Q"
    )
    line = base.mark_line(point=True).encode(
        y=log_y(f"{field}:Q", axis),
        tooltip=[alt.Tooltip("series:N", title="library"), "operation:N", "size:Q"]
        + [alt.Tooltip(c) for c in extra]
        + [alt.Tooltip(f"{field}:Q", format=".3g")],
    )
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(y="y:Q")
    return (
        alt.layer(band, line, one, data=d)
        .properties(width=WIDTH // 2, height=HEIGHT // 2)
        .facet(facet=alt.Facet("operation:N", title=None), columns=3)
        .properties(title=title)
        .resolve_scale(x="independent")
    )


def precision_chart(prec: pd.DataFrame) -> alt.TopLevelMixin:
    title = "float32 time / float64 time (below 1: float32 is faster)"
    if prec.empty or not prec["ratio"].notna().any():
        return no_data(title, "only one dtype was measured")
    return _ratio_chart(prec, "ratio", title, "float32 / float64 time", ["threads:Q"])


def scaling_chart(scal: pd.DataFrame) -> alt.TopLevelMixin:
    title = "speedup of the most threads over 1 thread (above 1: more threads are faster)"
    if scal.empty or not scal["speedup"].notna().any():
        return no_data(title, "only one thread count was measured")
    return _ratio_chart(scal, "speedup", title, "speedup over 1 thread", ["dtype:N", "threads:Q"])
