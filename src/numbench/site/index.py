"""The site's index page: the machines (each host's latest run), the operations (a link to
each one's page), the steps found and the runs, as ``history list`` words them."""

from __future__ import annotations

import pandas as pd

from numbench import __version__
from numbench.history.views import changes_rows, list_rows, quality
from numbench.site import pages

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
        links.append(pages.operation_file(operation))
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
        pages.heading(1, "numbench: the history"),
        pages.paragraph(
            f"{len(runs)} run{'s' if len(runs) != 1 else ''} on {hosts} machine"
            f"{'s' if hosts != 1 else ''}, {first} to {last}; built by numbench {__version__}."
        ),
    ]
    for why in skipped:
        parts.append(pages.paragraph(f"skipped: {why}", "warning"))
    parts += [pages.heading(2, "Machines"), pages.table(MACHINE_HEADER, machine_rows(runs))]
    rows, links = operation_rows(cells, found)
    parts.append(pages.heading(2, "Operations"))
    if rows:
        parts.append(pages.table(["operation", "cells", "machines", "steps found"], rows, links))
    else:
        parts.append(pages.paragraph("no ok cell in any run: nothing to chart"))
    parts.append(pages.heading(2, "Changes"))
    if found.empty:
        parts.append(pages.paragraph("no step found in any cell's series"))
    else:
        header, step_rows = changes_rows(found)
        parts.append(pages.table(header, step_rows))
    header, run_rows = list_rows(runs)
    parts += [pages.heading(2, "Runs"), pages.table(header, run_rows)]
    return pages.page("numbench: the history", "\n".join(parts))
