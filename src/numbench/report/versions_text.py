"""The summary's "Versions" section (results/versions.parquet): each environment's library
versions against the base environment's, how many of its cells changed, and which.

Written only where the summary is given the versions table (a config with
``environments``). Every value from the table enters through ``md_text`` or a table cell
(``md_table``), as in the rest of the summary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from numbench.contract.versions import BROKEN, NOT_COMPARABLE
from numbench.formatting import format_ci, format_size, format_speedup
from numbench.report.charts_versions import versions_chart_name
from numbench.report.markdown import md_table, md_text
from numbench.report.sentences import md_link
from numbench.stats import FASTER, SAME, SLOWER

#: the changes listed in an environment's table, in this order
CHANGED = (SLOWER, FASTER, BROKEN)
#: an error quoted under the table is cut to this many characters
ERROR_SHOWN = 200

INTRO = (
    "Each cell of an environment ran in lockstep rounds beside the same library in the base "
    "environment, on the same host, so both versions were measured side by side. The ratio "
    "is the environment's median time over the base environment's (above 1: the environment "
    "is slower), with its 95% two-level bootstrap interval, drawing the same rounds on both "
    "sides and never narrower than the environment's typical round-to-round spread allows "
    "(`ci_floor`). A change counts when its interval excludes 1 and the ratio passes the "
    "margin of {margin:g}x: *slower* at {margin:g}x the base's time or more, *faster* at "
    "1/{margin:g} of it or less. A cell that measured in the base environment and not in the "
    "environment is *broken*."
)


def _versions(values) -> str:
    found = sorted({str(v) for v in values if isinstance(v, str) and v})
    return ", ".join(found) if found else "?"


def versions_line(env: pd.DataFrame) -> str:
    """'numpy 2.4.6 -> 2.3.5; torch ...': each library's base version, then the environment's."""
    parts = []
    for library, rows in env.groupby("library", sort=True):
        base, own = _versions(rows["base_version"]), _versions(rows["version"])
        same = " (the same version)" if base == own and base != "?" else ""
        parts.append(f"{md_text(library)} {md_text(base)} -> {md_text(own)}{same}")
    return "; ".join(parts)


def counts_line(env: pd.DataFrame) -> str:
    """'6 cells: 2 slower, 1 faster, 2 the same, 1 broken.'"""
    counts = env["change"].value_counts()
    words = [(SLOWER, "slower"), (FASTER, "faster"), (SAME, "the same"), (BROKEN, "broken")]
    said = [f"{int(counts.get(change, 0))} {word}" for change, word in words]
    if counts.get(NOT_COMPARABLE, 0):
        unknown = int(((env["change"] == NOT_COMPARABLE) & env["base_status"].isna()).sum())
        why = "the base environment's processes did not measure"
        if unknown:
            why += f", or (for {unknown}) the cell ended before they ran"
        said.append(f"{int(counts[NOT_COMPARABLE])} not comparable ({why})")
    n = len(env)
    return f"{n} cell{'' if n == 1 else 's'}: " + ", ".join(said) + "."


def changed_rows(env: pd.DataFrame, changes=CHANGED) -> pd.DataFrame:
    """The slower, faster and broken cells, in that order, each largest change first."""
    d = env[env["change"].isin(changes)].copy()
    d["_group"] = d["change"].map({c: i for i, c in enumerate(changes)})
    d["_size"] = -np.abs(np.log(d["ratio"].astype(float)))
    d["_size"] = d["_size"].fillna(0.0)
    return d.sort_values(
        ["_group", "_size", "operation", "library", "device", "size"], kind="stable"
    )


def changed_table(d: pd.DataFrame) -> str:
    rows = []
    for r in d.itertuples(index=False):
        if r.change == BROKEN:
            change = f"{r.change} ({r.status})"
        else:
            change = str(r.change) + ("" if r.settled else " ?")
        rows.append(
            [
                r.library,
                r.device,
                r.operation,
                format_size(r.size),
                r.dtype,
                str(int(r.threads)),
                change,
                format_speedup(r.ratio) if r.change != BROKEN else "",
                format_ci(r.ratio_ci_low, r.ratio_ci_high),
            ]
        )
    header = ["library", "device", "operation", "n", "dtype", "threads", "change"]
    return md_table(header + ["env / base time", "95% CI"], rows, "lllrlrlrr")


def errors_said(env: pd.DataFrame) -> list[str]:
    """One line per broken or not comparable cell with an error: what its process said."""
    lines = []
    said = env["change"].isin([BROKEN, NOT_COMPARABLE]) & env["error"].notna()
    for r in changed_rows(env[said], [BROKEN, NOT_COMPARABLE]).itertuples(index=False):
        error = str(r.error)
        error = error if len(error) <= ERROR_SHOWN else error[:ERROR_SHOWN] + "…"
        where = f"{r.library} {r.device} {r.operation} {format_size(r.size)}"
        lines.append(f"- {md_text(where)}: {md_text(error)}")
    return lines


def environment_part(env: pd.DataFrame, name: str, charts_dir: str) -> list[str]:
    parts = [f"### {md_text(name)}", "", f"{versions_line(env)}. {counts_line(env)}", ""]
    changed = changed_rows(env)
    if changed.empty:
        parts += [
            "Nothing changed: no cell of this environment is slower or faster beyond the "
            "margin, and none broke.",
            "",
        ]
    else:
        parts += [changed_table(changed), ""]
        if (~changed["settled"].astype(bool) & (changed["change"] != BROKEN)).any():
            parts += [
                "?: in doubt; its interval holds the margin or 1 / margin, so a rerun may "
                "give another verdict.",
                "",
            ]
    errors = errors_said(env)
    if errors:
        parts += ["What the cells that did not measure said:", "", *errors, ""]
    chart = versions_chart_name(name)
    parts += [f"Chart: {md_link(chart, f'{charts_dir}/{chart}.html')}.", ""]
    return parts


def versions_section(
    versions: pd.DataFrame | None, margin: float, charts_dir: str = "charts"
) -> list[str]:
    """The section's lines; none without the versions table. The margin stated is the
    table's own (the one its changes were judged with), else ``margin``."""
    if versions is None:
        return []
    if len(versions) and versions["margin"].notna().any():
        margin = float(versions["margin"].dropna().iloc[0])
    parts = ["## Versions", "", INTRO.format(margin=margin), ""]
    if versions.empty:
        return parts + ["No cell of an environment was measured.", ""]
    for name in sorted(versions["environment"].dropna().unique(), key=str):
        parts += environment_part(versions[versions["environment"] == name], name, charts_dir)
    return parts
