"""What every chart shares, the summary's, the roofline's and the results site's: its look
(sizes, font, log axes, the library colours) and its files.

A chart is written as ``name``.html (JavaScript inlined, opens offline), .svg and .png, all
three drawn from one Vega-Lite spec, made once (``chart_spec``): altair makes the spec again
in every ``save`` and ``to_html`` (a schema check and a conversion of the data each time) and
bundles the page's JavaScript again for every page, so both are made here once instead. The
look and the files are one concern, kept below the charts that use them, so that
``numbench.report.charts`` can draw the roofline's charts (``numbench.roofline.report``)
while those take their look from here.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import altair as alt
import pandas as pd
import vl_convert
from altair.utils._importers import vl_version_for_vl_convert
from altair.utils.html import INLINE_HTML_TEMPLATE
from altair.utils.mimebundle import spec_to_mimebundle

from numbench.contract import write_text_atomic

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


FORMATS = ("html", "svg", "png")


def chart_spec(chart: alt.TopLevelMixin) -> dict:
    """The chart's Vega-Lite spec, its data inlined, as ``chart.save`` makes it.

    Made once a chart and handed to each of its formats: altair makes it again on every
    ``save`` and ``to_html`` (checking it against the schema and converting the data each
    time), which was three quarters of the charts job."""
    with alt.data_transformers.enable("default"), alt.data_transformers.disable_max_rows():
        return chart.to_dict()


@functools.cache
def javascript_bundle() -> str:
    """vega-embed with Vega and Vega-Lite as one script, inlined in every chart page: bundled
    once a process (vl-convert bundles it afresh on every call, as altair asks for each page)."""
    return vl_convert.javascript_bundle(vl_version=vl_version_for_vl_convert())


def chart_page(spec: dict) -> str:
    """The chart (its ``chart_spec``) as a standalone page (JavaScript inlined), with its spec
    inert as script text.

    Altair writes the spec, data included, into a ``<script>`` as plain JSON, so a value
    holding ``</script>`` (a library, host or operation name from a cell file) would close
    the script and open live HTML. In the page the spec's ``<``, ``>`` and ``&`` are written
    as JSON's ``\\u003c``-style escapes instead: the same JSON to the script, no markup to
    the browser."""
    text = json.dumps(spec)
    page = INLINE_HTML_TEMPLATE.render(  # as altair's to_html(inline=True) renders it
        spec=text,
        embed_options=json.dumps({"mode": "vega-lite"}),
        mode="vega-lite",
        vega_version=alt.VEGA_VERSION,
        vegalite_version=alt.VEGALITE_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION,
        base_url="https://cdn.jsdelivr.net/npm",
        output_div="vis",
        fullhtml=True,
        requirejs=False,
        vegaembed_script=javascript_bundle(),
    )
    if text not in page:
        raise RuntimeError("the chart's spec is not where altair puts it: cannot make it inert")
    inert = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return page.replace(text, inert)


def save_chart(chart: alt.TopLevelMixin, folder: Path, name: str) -> list[Path]:
    """Write ``name``.html (inlined JavaScript), .svg and .png into ``folder``, all three from
    one spec (``chart_spec``), drawn by vl-convert as ``chart.save`` draws them."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = chart_spec(chart.configure(font=FONT))
    paths = []
    for fmt in FORMATS:
        path = folder / f"{name}.{fmt}"
        if fmt == "html":
            write_text_atomic(chart_page(spec), path)
        elif fmt == "png":
            bundle, _ = spec_to_mimebundle(spec, format="png", **_DRAW, scale_factor=2)
            path.write_bytes(bundle["image/png"])
        else:
            bundle = spec_to_mimebundle(spec, format="svg", **_DRAW)
            path.write_text(bundle["image/svg+xml"], encoding="utf-8")
        paths.append(path)
    return paths


#: how ``chart.save`` asks vl-convert to draw a Vega-Lite spec
_DRAW = {"mode": "vega-lite", "vegalite_version": alt.VEGALITE_VERSION}
