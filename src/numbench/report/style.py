"""The look shared by every chart: sizes, font, log axes, the library colours."""

from __future__ import annotations

import altair as alt
import pandas as pd

WIDTH, HEIGHT = 460, 300
FONT = "Liberation Sans, Arial, Helvetica, sans-serif"


def no_data(title: str, why: str) -> alt.Chart:
    return (
        alt.Chart(pd.DataFrame({"text": [why]}))
        .mark_text(size=14)
        .encode(text="text:N")
        .properties(title=title, width=WIDTH, height=80)
    )


def log_x(sizes, title: str = "size (n)") -> alt.X:
    """A log size axis fitted to the measured sizes, with a tick at each of them."""
    sizes = sorted({int(s) for s in sizes})
    domain = [sizes[0] / 1.25, sizes[-1] * 1.25] if sizes else None
    return alt.X(
        "size:Q",
        scale=alt.Scale(type="log", domain=domain, nice=False),
        axis=alt.Axis(title=title, values=sizes, format="~s", labelOverlap=True),
    )


def log_y(field: str, title: str, fmt: str = "~g") -> alt.Y:
    return alt.Y(
        field, scale=alt.Scale(type="log"), axis=alt.Axis(title=title, tickCount=6, format=fmt)
    )


def color(domain: list[str]) -> alt.Color:
    return alt.Color(
        "series:N",
        title="library",
        scale=alt.Scale(domain=domain),
        legend=alt.Legend(symbolOpacity=1, symbolType="stroke", symbolStrokeWidth=3),
    )
