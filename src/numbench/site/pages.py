"""The results site's HTML: every page one string, every value from the store escaped.

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

#: the folder, inside the site, of the files every page shares
ASSETS = "assets"
#: the Vega, Vega-Lite and vega-embed JavaScript (written once: ``numbench.site.bundle``)
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
