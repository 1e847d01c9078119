"""One operation's page: the steps found in its cells, then a chart per size, dtype and
threads, each with the machines side by side (``numbench.site.charts``)."""

from __future__ import annotations

import pandas as pd

from numbench.history.views import changes_rows
from numbench.site import pages
from numbench.site.charts import GROUP, chart_spec, group_chart


def group_title(operation: str, size, dtype, threads) -> str:
    plural = "s" if int(threads) != 1 else ""
    return f"{operation}, size {size}, {dtype}, {threads} thread{plural}"


def operation_page(operation: str, cells: pd.DataFrame, found: pd.DataFrame) -> str:
    """The page's HTML (``cells``: the operation's ok cells with their runs' numbers and dates;
    ``found``: its steps, as ``numbench.site.site_frames`` gives them)."""
    parts = [
        '<nav><a href="index.html">all operations and runs</a></nav>',
        pages.heading(1, operation),
        pages.heading(2, "Steps found"),
    ]
    if found.empty:
        parts.append(pages.paragraph("no step found in this operation's cells"))
    else:
        parts.append(pages.table(*changes_rows(found)))
    specs = []
    for (size, dtype, threads), group in cells.groupby(GROUP, sort=True):
        title = group_title(operation, size, dtype, threads)
        in_group = (
            (found["size"] == size) & (found["dtype"] == dtype) & (found["threads"] == threads)
        )
        chart = group_chart(group, found[in_group])
        parts += [pages.heading(2, title), pages.chart_div(len(specs))]
        specs.append(chart_spec(chart))
    return pages.page(f"numbench: {operation}", "\n".join(parts), specs)
