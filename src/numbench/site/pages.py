"""The results site's pages and their charts: every page one string, every value from the
store escaped, every chart's spec inert.

The index: the machines (each host's latest run), the operations (a link to each one's
page), the steps found and the runs, as ``history list`` words them. An operation's page:
the steps found in its cells, then a chart per size, dtype and threads (``group_chart``):
each cell's time run after run, with one panel per machine side by side.

In a panel, each library (and device) is a line of its medians against the run's date, with
each median's 95% interval drawn as a bar; a step the history found (``history changes``) is
a dashed rule at the first run after it, and a run where the library's version changed from
the cell's previous run is a diamond with the versions in its tooltip. Below the times, where
the group's cells have speedups, a second row draws their paired series: each cell's time
over its lockstep baseline's (``1 / speedup``), which the machine's days do not move, so a
change the times hide can show there (and its steps, ``measure: paired``, are drawn on it).

A chart's data goes into its spec's top-level ``datasets`` (named, as plain JSON records:
``json_records``), added after altair made the spec: altair neither validates nor walks the
rows (that was most of a build's time) nor stops at its transformers' 5,000 rows, so a store
of 1,000 runs is drawn whole.

Everything in the store may come from another host (a store on a shared file system, an
imported offsite run): host names, CPU models, versions, operation names are data. Each
reaches a page through ``text`` (``html.escape``, quotes included, control characters
dropped), and each chart's spec is inert JSON (``chart_spec``). Links between pages are
names this module makes (``operation_file``), never names from the store.
"""

from __future__ import annotations

import hashlib
import html
import json
import re

import altair as alt
import pandas as pd

from numbench import __version__
from numbench.formatting import series_label, series_labels
from numbench.history.views import changes_rows, list_rows, quality
from numbench.report.drawing import FONT

#: the folder, inside the site, of the files every page shares
ASSETS = "assets"
#: the Vega, Vega-Lite and vega-embed JavaScript (written once: ``numbench.site.write_bundle``)
BUNDLE = f"{ASSETS}/vega.js"
STYLESHEET = f"{ASSETS}/site.css"
#: the most characters of an operation's name kept in its page's file name
MAX_SLUG = 40

CSS = """body { font-family: Liberation Sans, Arial, Helvetica, sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
.chart { margin: 0.5em 0 2em; overflow-x: auto; }
.warning { color: #8a4b00; }
nav { margin-bottom: 1em; }
"""


def text(value) -> str:
    """A value from the store as HTML text: escaped (quotes too), control characters dropped,
    a missing value as '-'."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    shown = "".join(c if c.isprintable() else " " for c in str(value))
    return html.escape(shown, quote=True)


def operation_file(operation: str) -> str:
    """The page of ``operation``: a file name made of its letters and digits and a hash of
    the whole name (two names that differ only in other characters get two pages)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", str(operation))[:MAX_SLUG].strip("_") or "op"
    digest = hashlib.sha256(str(operation).encode("utf-8")).hexdigest()[:8]
    return f"op-{slug}-{digest}.html"


def table(header: list[str], rows: list[list], links: list[str | None] | None = None) -> str:
    """An HTML table of ``rows``; ``links``: for each row, a page (made here) its first cell
    links to, or None."""
    head = "".join(f"<th>{text(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = [f"<td>{text(v)}</td>" for v in row]
        if links and links[i]:
            cells[0] = f'<td><a href="{html.escape(links[i])}">{text(row[0])}</a></td>'
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str, specs: list[str] | None = None) -> str:
    """A whole page: ``title`` (escaped here), ``body`` (HTML made by this module), and the
    charts' inert specs, embedded into the divs ``chart-0``, ``chart-1``, ... of the body by
    the bundle in ``assets/``, referenced relatively so the site opens from the file system."""
    scripts = ""
    if specs:
        calls = "\n".join(
            f'vegaEmbed("#chart-{i}", {spec}, {{"actions": false}}).catch(console.error);'
            for i, spec in enumerate(specs)
        )
        scripts = f'<script src="{BUNDLE}"></script>\n<script>\n{calls}\n</script>\n'
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{text(title)}</title>\n"
        f'<link rel="stylesheet" href="{STYLESHEET}">\n</head>\n<body>\n'
        f"{body}\n{scripts}</body>\n</html>\n"
    )


def chart_div(i: int) -> str:
    return f'<div class="chart" id="chart-{i}"></div>'


def heading(level: int, value) -> str:
    return f"<h{level}>{text(value)}</h{level}>"


def paragraph(value, css_class: str | None = None) -> str:
    attr = f' class="{css_class}"' if css_class else ""
    return f"<p{attr}>{text(value)}</p>"


MACHINE_HEADER = [
    "machine (host)",
    "CPU",
    "cores",
    "RAM GB",
    "kernel",
    "runs",
    "first run",
    "latest run",
    "latest run's cells",
]


def machine_rows(runs: pd.DataFrame) -> list[list]:
    """A row per host, its fingerprint as its latest run recorded it."""
    rows = []
    for host, on_host in runs.groupby("host", sort=True):
        latest = on_host.iloc[-1]
        rows.append(
            [
                host,
                latest["cpu_model"],
                latest["cpu_count"],
                latest["ram_gb"],
                latest["kernel"],
                len(on_host),
                str(on_host["started_at"].iloc[0])[:16].replace("T", " "),
                f"{str(latest['started_at'])[:16].replace('T', ' ')} ({latest['run_id']})",
                quality(latest),
            ]
        )
    return rows


def operation_rows(cells: pd.DataFrame, found: pd.DataFrame) -> tuple[list[list], list[str]]:
    """A row per operation (its series, machines and steps found) and each one's page."""
    rows, links = [], []
    series = ["library", "device", "size", "dtype", "threads", "host"]
    for operation, on_op in cells.groupby("operation", sort=True):
        steps = int((found["operation"] == operation).sum())
        cells_n = len(on_op[series].drop_duplicates())
        rows.append([operation, cells_n, on_op["host"].nunique(), steps])
        links.append(operation_file(operation))
    return rows, links


def index_page(
    runs: pd.DataFrame, cells: pd.DataFrame, found: pd.DataFrame, skipped: list[str]
) -> str:
    """The index's HTML (``runs`` numbered on their hosts, oldest first; ``cells``: the ok
    cells; ``found``: the steps, as ``numbench.site.site_frames`` gives them)."""
    first = str(runs["started_at"].min())[:10]
    last = str(runs["started_at"].max())[:10]
    hosts = runs["host"].nunique()
    parts = [
        heading(1, "numbench: the history"),
        paragraph(
            f"{len(runs)} run{'s' if len(runs) != 1 else ''} on {hosts} machine"
            f"{'s' if hosts != 1 else ''}, {first} to {last}; built by numbench {__version__}."
        ),
    ]
    for why in skipped:
        parts.append(paragraph(f"skipped: {why}", "warning"))
    parts += [heading(2, "Machines"), table(MACHINE_HEADER, machine_rows(runs))]
    rows, links = operation_rows(cells, found)
    parts.append(heading(2, "Operations"))
    if rows:
        parts.append(table(["operation", "cells", "machines", "steps found"], rows, links))
    else:
        parts.append(paragraph("no ok cell in any run: nothing to chart"))
    parts.append(heading(2, "Changes"))
    if found.empty:
        parts.append(paragraph("no step found in any cell's series"))
    else:
        header, step_rows = changes_rows(found)
        parts.append(table(header, step_rows))
    header, run_rows = list_rows(runs)
    parts += [heading(2, "Runs"), table(header, run_rows)]
    return page("numbench: the history", "\n".join(parts))


def group_title(operation: str, size, dtype, threads) -> str:
    plural = "s" if int(threads) != 1 else ""
    return f"{operation}, size {size}, {dtype}, {threads} thread{plural}"


def operation_page(operation: str, cells: pd.DataFrame, found: pd.DataFrame) -> str:
    """The page's HTML (``cells``: the operation's ok cells with their runs' numbers and dates;
    ``found``: its steps, as ``numbench.site.site_frames`` gives them)."""
    parts = [
        '<nav><a href="index.html">all operations and runs</a></nav>',
        heading(1, operation),
        heading(2, "Steps found"),
    ]
    if found.empty:
        parts.append(paragraph("no step found in this operation's cells"))
    else:
        parts.append(table(*changes_rows(found)))
    specs = []
    for (size, dtype, threads), group in cells.groupby(GROUP, sort=True):
        title = group_title(operation, size, dtype, threads)
        in_group = (
            (found["size"] == size) & (found["dtype"] == dtype) & (found["threads"] == threads)
        )
        chart = group_chart(group, found[in_group])
        parts += [heading(2, title), chart_div(len(specs))]
        specs.append(chart_spec(chart))
    return page(f"numbench: {operation}", "\n".join(parts), specs)


#: a panel's size (one machine's series of one chart)
PANEL_WIDTH, PANEL_HEIGHT = 420, 240
#: a chart's group: the cells drawn together (their libraries and devices as lines)
GROUP = ["size", "dtype", "threads"]
#: the columns of the series drawn (and shown in a point's tooltip)
POINT_COLUMNS = [
    "series",
    "run_number",
    "run_id",
    "run_started_at",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "library_version",
    "unstable",
]


def json_records(frame: pd.DataFrame) -> list[dict]:
    """A frame as plain JSON records (missing values as null, numbers as JSON numbers)."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


def version_changes(cells: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The cells (ordered by ``run_number`` within each series of ``key``) whose library
    version differs from the series' previous cell, with ``versions``: 'numpy 2.4 -> 2.5'."""
    ordered = cells.sort_values([*key, "run_number"], kind="stable")
    before = ordered.groupby(key, sort=False, dropna=False)["library_version"].shift()
    moved = before.notna() & (before != ordered["library_version"])
    out = ordered[moved].copy()
    out["versions"] = [
        f"{lib} {old} -> {new}"
        for lib, old, new in zip(out["library"], before[moved], out["library_version"], strict=True)
    ]
    return out


#: the two rows of a chart: (the y axis's title, its number format, the tooltip's name)
TIME_AXIS = ("time per call (s)", "~s", "median s")
PAIRED_AXIS = ("time over the baseline's, paired", "~g", "over the baseline")


def _y(title: str | None = TIME_AXIS[0], fmt: str = TIME_AXIS[1]) -> alt.Y:
    return alt.Y(
        "median_s:Q",
        scale=alt.Scale(type="log"),
        axis=alt.Axis(title=title, format=fmt, tickCount=5),
    )


def _x() -> alt.X:
    return alt.X("run_started_at:T", axis=alt.Axis(title="run date", labelOverlap=True))


def _colour(domain: list[str]) -> alt.Color:
    return alt.Color("series:N", scale=alt.Scale(domain=domain), legend=alt.Legend(title=None))


def host_panel(
    points: pd.DataFrame,
    steps: pd.DataFrame,
    versions: pd.DataFrame,
    host: str,
    domain: list[str],
    datasets: dict[str, list],
    axis: tuple[str, str, str] = TIME_AXIS,
) -> alt.LayerChart:
    """One machine's panel: lines of medians (or, with ``PAIRED_AXIS``, of the paired series
    in the same columns), interval bars, steps and version changes; its data goes into
    ``datasets`` by name."""
    tag = len(datasets)
    title, fmt, named = axis
    colour = _colour(domain)
    tooltip = [
        alt.Tooltip("series:N", title="library"),
        alt.Tooltip("run_number:Q", title="run on this host"),
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("run_started_at:N", title="started"),
        alt.Tooltip("median_s:Q", title=named, format=".3e"),
        alt.Tooltip("ci_low_s:Q", title="95% low", format=".3e"),
        alt.Tooltip("ci_high_s:Q", title="95% high", format=".3e"),
        alt.Tooltip("library_version:N", title="version"),
    ]
    datasets[f"points-{tag}"] = json_records(points[POINT_COLUMNS])
    data = alt.NamedData(name=f"points-{tag}")
    base = alt.Chart(data).encode(x=_x(), color=colour)
    layers = [
        base.mark_rule(opacity=0.5).encode(
            y=alt.Y("ci_low_s:Q", scale=alt.Scale(type="log")), y2="ci_high_s:Q"
        ),
        base.mark_line(point=True).encode(y=_y(title, fmt), tooltip=tooltip),
    ]
    if not steps.empty:
        shown = steps[["series", "run_started_at", "run_number", "ratio_text", "changed"]]
        datasets[f"steps-{tag}"] = json_records(shown)
        step_data = alt.NamedData(name=f"steps-{tag}")
        layers.append(
            alt.Chart(step_data)
            .mark_rule(strokeDash=[6, 4], strokeWidth=2)
            .encode(
                x=_x(),
                color=colour,
                tooltip=[
                    alt.Tooltip("series:N", title="step in"),
                    alt.Tooltip("run_number:Q", title="from run"),
                    alt.Tooltip("ratio_text:N", title="after / before [95%]"),
                    alt.Tooltip("changed:N", title="what changed"),
                ],
            )
        )
    if not versions.empty:
        datasets[f"versions-{tag}"] = json_records(versions)
        version_data = alt.NamedData(name=f"versions-{tag}")
        layers.append(
            alt.Chart(version_data)
            .mark_point(shape="diamond", size=120, filled=False, strokeWidth=2)
            .encode(
                x=_x(),
                y=_y(title, fmt),
                color=colour,
                tooltip=[alt.Tooltip("versions:N", title="version changed")],
            )
        )
    return alt.layer(*layers).properties(title=host, width=PANEL_WIDTH, height=PANEL_HEIGHT)


def paired_points(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells that have a speedup, their paired series in the time's columns: time over
    the baseline's, ``1 / speedup``, and its interval."""
    if "speedup" not in cells:
        return cells.iloc[0:0]
    speedup = pd.to_numeric(cells["speedup"], errors="coerce")
    low = pd.to_numeric(cells["speedup_ci_high"], errors="coerce")
    high = pd.to_numeric(cells["speedup_ci_low"], errors="coerce")
    good = speedup > 0
    out = cells[good].copy()
    out["median_s"] = 1 / speedup[good]
    out["ci_low_s"], out["ci_high_s"] = 1 / low[good], 1 / high[good]
    return out


def _row(cells, steps, versions_key, domain, datasets, axis) -> list[alt.LayerChart]:
    """A chart's row: one panel per host."""
    versions = version_changes(cells, versions_key)
    panels = []
    for host, points in cells.groupby("host", sort=True):
        ordered = points.sort_values(["series", "run_number"], kind="stable")
        on_host = steps[steps["host"] == host] if not steps.empty else steps
        changed = versions[versions["host"] == host][
            ["series", "run_started_at", "median_s", "versions"]
        ]
        panels.append(host_panel(ordered, on_host, changed, str(host), domain, datasets, axis))
    return panels


def group_chart(cells: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """One group's chart as a Vega-Lite spec (its cells on every host; ``steps``: their steps,
    as ``history changes`` gives them, with ``ratio_text``): the hosts' panels side by side,
    sharing the colours."""
    with_device = cells["device"].nunique() > 1
    cells = cells.assign(series=series_labels(cells, with_device=with_device))
    steps = steps.assign(
        series=[
            series_label(lib, dev, with_device)
            for lib, dev in zip(steps["library"], steps["device"], strict=True)
        ],
    )
    domain = sorted(cells["series"].unique())
    key = ["host", "library", "device"]
    measure = steps["measure"] if "measure" in steps else pd.Series("time", index=steps.index)
    datasets: dict[str, list] = {}
    rows = [_row(cells, steps[measure == "time"], key, domain, datasets, TIME_AXIS)]
    paired = paired_points(cells)
    if not paired.empty:
        rows.append(_row(paired, steps[measure == "paired"], key, domain, datasets, PAIRED_AXIS))
    joined = [panels[0] if len(panels) == 1 else alt.hconcat(*panels) for panels in rows]
    chart = joined[0] if len(joined) == 1 else alt.vconcat(*joined)
    subtitle = "bars: 95% intervals; dashed rules: steps found; diamonds: library version changed"
    # the page's heading names the group: the chart's own title only explains the marks
    explained = alt.Title(subtitle, fontSize=11, fontWeight="normal", anchor="start")
    spec = chart.properties(title=explained).configure(font=FONT).to_dict(validate=False)
    spec["datasets"] = datasets
    return spec


def chart_spec(spec: dict) -> str:
    """A Vega-Lite spec as JSON that is inert inside an HTML ``<script>``: its ``<``, ``>``
    and ``&`` written as JSON's ``\\u003c``-style escapes (as
    ``numbench.report.drawing.chart_page`` does), so a value holding ``</script>`` stays data."""
    spec = json.dumps(spec, separators=(",", ":"))
    return spec.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
