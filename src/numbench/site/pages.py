"""The results site's pages: every page one string, every value from the store escaped.

The index: the machines (each host's latest run), the operations (a link to each one's
page), the steps found and the runs, as ``history list`` words them. An operation's page:
the steps found in its cells, then a chart per size, dtype and threads, each with the
machines side by side (``numbench.site.charts``).

Everything in the store may come from another host (a store on a shared file system, an
imported offsite run): host names, CPU models, versions, operation names are data. Each
reaches a page through ``text`` (``html.escape``, quotes included, control characters
dropped), and each chart's spec is inert JSON (``numbench.site.charts.chart_spec``). Links
between pages are names this module makes (``operation_file``), never names from the store.
"""

from __future__ import annotations

import hashlib
import html
import re

import pandas as pd

from numbench import __version__
from numbench.history.views import changes_rows, list_rows, quality
from numbench.site.charts import GROUP, chart_spec, group_chart

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
