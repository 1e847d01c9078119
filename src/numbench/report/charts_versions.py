"""The versions charts (results/versions.parquet): one per environment, its time over the
base environment's against size, one panel per operation, a colour per library.

Named ``versions-{environment}``; a name that is not an environment's (the table came from
elsewhere) is replaced by a stable one made of its hash, so a name from data never becomes
a path of its own making."""

from __future__ import annotations

import re
import zlib

import altair as alt
import pandas as pd

from numbench.cells import ENVIRONMENT_PATTERN
from numbench.formatting import series_labels
from numbench.report.style import HEIGHT, WIDTH, color, log_x, no_data

PREFIX = "versions-"


def versions_chart_name(environment: str) -> str:
    """The file name (without its format) of ``environment``'s versions chart."""
    text = str(environment)
    if re.fullmatch(ENVIRONMENT_PATTERN, text):
        return f"{PREFIX}{text}"
    return f"{PREFIX}env-{zlib.crc32(text.encode()):08x}"


def _rule(y: float, dash: list[int], colour: str, scale: alt.Scale) -> alt.Chart:
    frame = pd.DataFrame({"y": [y]})
    rule = alt.Chart(frame).mark_rule(strokeDash=dash, color=colour)
    return rule.encode(y=alt.Y("y:Q", scale=scale))


def versions_chart(versions: pd.DataFrame, environment: str) -> alt.TopLevelMixin:
    """``environment``'s ratios (environment / base time) with their 95% intervals."""
    title = f"{environment}: time in the environment / time in the base environment"
    d = versions[(versions["environment"] == environment) & versions["ratio"].notna()].copy()
    if d.empty:
        return no_data(title, "no cell of this environment was compared with the base")
    margin = float(d["margin"].iloc[0])
    d["series"] = series_labels(d)
    d["versions"] = d["base_version"].fillna("?") + " -> " + d["version"].fillna("?")
    series = sorted(d["series"].unique())
    lo = min(d["ratio_ci_low"].min(), d["ratio"].min(), 1 / margin)
    hi = max(d["ratio_ci_high"].max(), d["ratio"].max(), margin)
    yscale = alt.Scale(type="log", domain=[lo / 1.05, hi * 1.05], nice=False)
    base = alt.Chart().encode(x=log_x(d["size"]), color=color(series))
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("ratio_ci_low:Q", scale=yscale), y2="ratio_ci_high:Q"
    )
    bars = base.mark_rule().encode(y=alt.Y("ratio_ci_low:Q", scale=yscale), y2="ratio_ci_high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y(
            "ratio:Q",
            scale=yscale,
            axis=alt.Axis(title="environment / base time (above 1: slower)", tickCount=6),
        ),
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            alt.Tooltip("versions:N", title="base -> environment"),
            "operation:N",
            alt.Tooltip("size:Q"),
            alt.Tooltip("ratio:Q", format=".3g"),
            alt.Tooltip("ratio_ci_low:Q", title="CI low", format=".3g"),
            alt.Tooltip("ratio_ci_high:Q", title="CI high", format=".3g"),
            alt.Tooltip("change:N"),
        ],
    )
    rules = [
        _rule(1.0, [6, 4], "black", yscale),
        _rule(margin, [2, 3], "gray", yscale),
        _rule(1 / margin, [2, 3], "gray", yscale),
    ]
    return (
        alt.layer(band, bars, line, *rules, data=d)
        .properties(width=WIDTH // 2, height=HEIGHT // 2)
        .facet(facet=alt.Facet("operation:N", title=None), columns=3)
        .properties(
            title=alt.Title(
                title,
                subtitle=f"above the dashed 1 line the environment is slower; dotted: the "
                f"margin ({margin:g}x and 1/{margin:g}); band and bars: 95% CI",
            )
        )
        .resolve_scale(x="independent")
    )


def versions_charts(versions: pd.DataFrame | None) -> dict[str, alt.TopLevelMixin]:
    """Every environment's versions chart, by name (``versions_chart_name``)."""
    if versions is None or versions.empty:
        return {}
    return {
        versions_chart_name(env): versions_chart(versions, env)
        for env in sorted(versions["environment"].dropna().unique(), key=str)
    }
