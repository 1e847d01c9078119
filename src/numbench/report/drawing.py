"""What every chart shares, the summary's, the roofline's and the results site's: its look
(sizes, font, log axes, the library colours) and its files; and the charts drawn once over
the whole grid, beside the per-operation ones of ``numbench.report.charts``, which names and
writes them all.

A chart is written as ``name``.html (JavaScript inlined, opens offline), .svg and .png, all
three drawn from one Vega-Lite spec, made once (``chart_spec``): altair makes the spec again
in every ``save`` and ``to_html`` (a schema check and a conversion of the data each time) and
bundles the page's JavaScript again for every page, so both are made here once instead. The
look and the files sit below the charts that use them, so that ``numbench.report.charts``
can draw the roofline's charts (``numbench.roofline.report``) while those take their look
from here.

The charts drawn once over the grid:

* ``speedup_heatmap`` and ``first_call``: the speedup at each operation's smallest and largest
  size, and first-call costs against steady-state time.
* ``pipelined``: per-call latency against pipelined time per call, against size, one facet per
  operation, for the libraries whose calls are asynchronous (timed both ways).
* ``precision`` and ``scaling``: the grid's dtype and threads dimensions
  (results/precision.parquet and results/scaling.parquet), a ratio against size per library,
  one facet per operation.
* ``versions-{environment}`` (results/versions.parquet): one per environment, its time over
  the base environment's against size, one panel per operation, a colour per library. A name
  that is not an environment's (the table came from elsewhere) is replaced by a stable one
  made of its hash, so a name from data never becomes a path of its own making.

Each draws one table over every operation; each says ``no_data`` where its table has
nothing to draw.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import zlib
from pathlib import Path

import altair as alt
import pandas as pd
import vl_convert
from altair.utils._importers import vl_version_for_vl_convert
from altair.utils.data import to_values
from altair.utils.html import INLINE_HTML_TEMPLATE
from altair.utils.mimebundle import spec_to_mimebundle

from numbench.cells import ENVIRONMENT_PATTERN
from numbench.contract import pipelined_cells, write_text_atomic
from numbench.contract.conclusions import in_doubt
from numbench.formatting import series_labels

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
    """The chart's Vega-Lite spec, its data inlined, as ``chart.save`` makes it, with each
    frame cut to the columns the spec names.

    Made once a chart and handed to each of its formats: altair makes it again on every
    ``save`` and ``to_html`` (checking it against the schema and converting the data each
    time), which was three quarters of the charts job. The frames the charts draw from hold
    every column of their table, and altair converts each column of a frame it inlines, used
    or not: the spec is first outlined without data, and a column whose name it never
    mentions is left out (``_named_columns``); none is where a mark shows every field
    (``EVERY_FIELD``)."""
    with alt.data_transformers.enable("numbench-outline"):
        outline = json.dumps(chart.to_dict(validate=False))
    alt.data_transformers.register(
        "numbench-cut", functools.partial(_named_columns, outline=outline)
    )
    with alt.data_transformers.enable("numbench-cut"):
        return chart.to_dict()


def _named_columns(data, outline: str):
    """``data`` inlined as altair's default transformer inlines it (no row limit), a frame
    cut to the columns ``outline`` (a spec's JSON) names: as written, or with the dots and
    brackets escaped as Vega-Lite writes a field name that holds them."""
    if isinstance(data, pd.DataFrame) and not any(all_ in outline for all_ in EVERY_FIELD):

        def named(column) -> bool:
            name = str(column)
            escaped = re.sub(r"([.\[\]])", r"\\\1", name)
            return any(json.dumps(n)[1:-1] in outline for n in (name, escaped))

        data = data[[c for c in data.columns if named(c)]]
    return to_values(data)


#: how a spec's JSON says that a mark shows every field of its data (its tooltip)
EVERY_FIELD = ('"tooltip": true', '"content": "data"')
alt.data_transformers.register("numbench-outline", lambda data: {"values": []})


#: the folder ``javascript_bundle`` keeps its bundle in between processes, where set; else
#: ``$XDG_CACHE_HOME/numbench``, else ``~/.cache/numbench``
CACHE_ENV = "NUMBENCH_CACHE_DIR"


def cache_folder(environ=os.environ) -> Path:
    """Where numbench keeps what any run may reuse and none depends on (``CACHE_ENV``)."""
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV])
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "numbench"


@functools.cache
def javascript_bundle() -> str:
    """vega-embed with Vega and Vega-Lite as one script, inlined in every chart page: bundled
    once a process (vl-convert bundles it afresh on every call, as altair asks for each page),
    and kept in ``cache_folder`` under the versions of vl-convert and Vega-Lite that made it,
    so that a later charts job reads it instead of bundling it again (seconds each time). A
    cache that cannot be read or written is passed by: the bundle is made here."""
    vl_version = vl_version_for_vl_convert()
    kept = cache_folder() / f"vega-embed-vl-convert-{vl_convert.__version__}-{vl_version}.js"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if text := kept.read_text(encoding="utf-8"):
            return text
    bundle = vl_convert.javascript_bundle(vl_version=vl_version)
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(bundle, kept)
    return bundle


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
    one spec (``chart_spec``), drawn by vl-convert as ``chart.save`` draws them. The PNG is
    the SVG rasterised (``vl_convert.svg_to_png``), which is how vl-convert draws a PNG from a
    spec, without laying the chart out a second time."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = chart_spec(chart.configure(font=FONT))
    svg = spec_to_mimebundle(spec, format="svg", **_DRAW)["image/svg+xml"]
    paths = []
    for fmt in FORMATS:
        path = folder / f"{name}.{fmt}"
        if fmt == "html":
            write_text_atomic(chart_page(spec), path)
        elif fmt == "png":
            path.write_bytes(vl_convert.svg_to_png(svg, scale=2))
        else:
            path.write_text(svg, encoding="utf-8")
        paths.append(path)
    return paths


#: how ``chart.save`` asks vl-convert to draw a Vega-Lite spec
_DRAW = {"mode": "vega-lite", "vegalite_version": alt.VEGALITE_VERSION}


# -- the charts drawn once over the grid ----------------------------------------------------


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
