"""results/charts/: Altair charts, each written as .html (JavaScript inlined, opens offline),
.svg and .png.

Charts (``chart_names`` lists them for a set of operations; their names are made only here):

* ``time_{operation}``: median time per call against size, log-log, a 95% CI band per
  library and device.
* ``speedup_{operation}``: speedup over the baseline against size, log-log, with its CI band,
  the 1x line, and each crossover as a diamond on the 1x line with its CI as a bar.
* ``throughput_{operation}``: achieved GFLOP/s and GB/s against size.
* ``speedup_heatmap``: speedup by operation and library at each operation's smallest and
  largest size.
* ``first_call``: first call (tracing, compilation) against steady-state median time.
* ``pipelined``: per-call latency and pipelined time per call against size, per operation
  (asynchronous libraries).
* ``precision``: float32 time / float64 time against size (results/precision.parquet).
* ``scaling``: speedup of the most threads over 1 thread against size (results/scaling.parquet).
* ``roofline_{device}_{dtype}_t{threads}``: every ok cell against the roofs measured on its
  host (results/roofs.parquet; ``numbench.roofline.report``), one per group.
* ``versions-{environment}``: each of the config's environments against the base
  environment (results/versions.parquet).

The per-operation charts are drawn here; the ones drawn once over the grid, and every
chart's look and files, are ``numbench.report.drawing``'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import altair as alt
import pandas as pd

from numbench.contract.conclusions import (
    PRECISION_COLUMNS,
    SCALING_COLUMNS,
    check_baseline,
    in_doubt,
    read_versions,
)
from numbench.formatting import series_label, series_labels
from numbench.report.drawing import (
    HEIGHT,
    WIDTH,
    color,
    first_call_chart,
    heatmap_chart,
    log_x,
    log_y,
    no_data,
    pipelined_chart,
    precision_chart,
    save_chart,
    scaling_chart,
    versions_charts,
)
from numbench.roofline.contract import read_roofs
from numbench.roofline.report import roofline_charts

#: the charts drawn for each operation, named ``{kind}_{operation}``
OPERATION_CHARTS = ("time", "speedup", "throughput")
#: the charts drawn once, over every operation
OVERVIEW_CHARTS = ("speedup_heatmap", "first_call", "pipelined")
#: the charts of the grid's dtype and threads dimensions, drawn once
DIMENSION_CHARTS = ("precision", "scaling")


def operation_chart(kind: str, operation: str) -> str:
    """The name of the ``kind`` chart (one of OPERATION_CHARTS) of ``operation``."""
    return f"{kind}_{operation}"


def chart_names(operations: Iterable[str]) -> list[str]:
    """Every chart's name (its file name without the format), in the order they are drawn."""
    names = [operation_chart(kind, op) for op in sorted(operations) for kind in OPERATION_CHARTS]
    return names + list(OVERVIEW_CHARTS) + list(DIMENSION_CHARTS)


def process_points(d: pd.DataFrame) -> pd.DataFrame:
    """One row per process median of each unstable cell of ``d``."""
    rows = []
    for r in d[d["unstable"].fillna(False).astype(bool)].itertuples():
        for m in json.loads(r.process_medians_s or "[]"):
            rows.append({"series": r.series, "size": r.size, "process_median_s": m})
    return pd.DataFrame(rows)


def time_chart(bench: pd.DataFrame, operation: str) -> alt.TopLevelMixin:
    title = f"{operation}: time per call against size"
    d = bench[(bench["operation"] == operation) & (bench["status"] == "ok")].copy()
    if d.empty:
        return no_data(title, f"no ok cells for {operation}")
    d["series"] = series_labels(d)
    domain = sorted(d["series"].unique())
    base = alt.Chart(d).encode(x=log_x(d["size"]), color=color(domain))
    y = log_y("median_s:Q", "time per call (s; m = 10^-3, µ = 10^-6)", fmt="~s")
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("ci_low_s:Q", scale=alt.Scale(type="log")),
        y2="ci_high_s:Q",
    )
    tooltip = [
        alt.Tooltip("series:N", title="library"),
        alt.Tooltip("size:Q"),
        alt.Tooltip("median_s:Q", title="median s", format=".3e"),
        alt.Tooltip("ci_low_s:Q", title="CI low s", format=".3e"),
        alt.Tooltip("ci_high_s:Q", title="CI high s", format=".3e"),
        alt.Tooltip("iqr_s:Q", title="IQR s", format=".3e"),
        alt.Tooltip("n_samples:Q", title="samples"),
        alt.Tooltip("n_processes:Q", title="processes"),
        alt.Tooltip("process_medians_s:N", title="process medians s"),
    ]
    line = base.mark_line(point=True).encode(y=y, tooltip=tooltip)
    # Unstable cells: each process's median as a hollow point, so the spread shows.
    spread = process_points(d)
    layers = [band, line]
    if not spread.empty:
        layers.append(
            alt.Chart(spread)
            .mark_point(shape="diamond", filled=False, size=60)
            .encode(
                x=log_x(d["size"]),
                y=alt.Y("process_median_s:Q", scale=alt.Scale(type="log")),
                color=color(domain),
                tooltip=[alt.Tooltip("series:N", title="unstable cell"), "process_median_s:Q"],
            )
        )
    return alt.layer(*layers).properties(
        title=alt.Title(
            title,
            subtitle="median of the samples; band: 95% two-level bootstrap CI; "
            "diamonds: per-process medians of unstable cells",
        ),
        width=WIDTH,
        height=HEIGHT,
    )


VERDICT_WORDS = {
    "faster": "faster",
    "slower": "slower",
    "same": "same speed (CI holds 1, or within the margin)",
}


def speedup_frame(speedups: pd.DataFrame, operation: str) -> pd.DataFrame:
    """The operation's speedups with a series label, the verdict in words and ``in_doubt``."""
    d = speedups[(speedups["operation"] == operation) & speedups["speedup"].notna()].copy()
    if d.empty:
        return d
    d["series"] = series_labels(d)
    d["verdict"] = d["verdict"].map(VERDICT_WORDS)
    d["in_doubt"] = in_doubt(d)
    d.loc[d["in_doubt"], "verdict"] += ", in doubt (CI holds the margin)"
    return d


def speedup_layers(d: pd.DataFrame, yscale: alt.Scale, baseline: str, domain: list) -> list:
    """The CI band, the speedup line, the 1x rule and a ring on each verdict in doubt."""
    base = alt.Chart(d).encode(x=log_x(d["size"]), color=color(domain))
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("speedup_ci_low:Q", scale=yscale),
        y2="speedup_ci_high:Q",
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y(
            "speedup:Q",
            scale=yscale,
            axis=alt.Axis(title=f"speedup over {baseline} (×)", tickCount=6),
        ),
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            alt.Tooltip("size:Q"),
            alt.Tooltip("speedup:Q", format=".3g"),
            alt.Tooltip("speedup_ci_low:Q", title="CI low", format=".3g"),
            alt.Tooltip("speedup_ci_high:Q", title="CI high", format=".3g"),
            alt.Tooltip("verdict:N"),
        ],
    )
    one = (
        alt.Chart(pd.DataFrame({"y": [1.0]}))
        .mark_rule(strokeDash=[6, 4], color="black")
        .encode(y="y:Q")
    )
    layers = [band, line, one]
    doubtful = d[d["in_doubt"]]
    if not doubtful.empty:
        layers.append(
            alt.Chart(doubtful)
            .mark_point(shape="circle", size=220, filled=False, stroke="black", strokeWidth=1.5)
            .encode(x=log_x(d["size"]), y=alt.Y("speedup:Q", scale=yscale))
        )
    return layers


def crossover_layers(crossovers: pd.DataFrame, operation: str, domain: list) -> list:
    """Each crossover of the operation as a diamond on the 1x line, its CI as a bar."""
    c = crossovers[
        (crossovers["operation"] == operation) & (crossovers["kind"] == "crosses")
    ].copy()
    if c.empty:
        return []
    c["series"] = series_labels(c)
    c["y"] = 1.0
    cbase = alt.Chart(c).encode(color=color(domain))
    bar = cbase.mark_rule(strokeWidth=3, opacity=0.7).encode(
        x=alt.X("ci_low:Q", scale=alt.Scale(type="log")), x2="ci_high:Q", y="y:Q"
    )
    diamond = cbase.mark_point(shape="diamond", size=160, filled=True, stroke="black").encode(
        x=alt.X("crossover_size:Q", scale=alt.Scale(type="log")),
        y="y:Q",
        tooltip=[
            alt.Tooltip("series:N", title="library"),
            alt.Tooltip("crossover_size:Q", title="crossover n", format=".3~s"),
            alt.Tooltip("ci_low:Q", title="CI low", format=".3~s"),
            alt.Tooltip("ci_high:Q", title="CI high", format=".3~s"),
        ],
    )
    return [bar, diamond]


def speedup_chart(
    speedups: pd.DataFrame, crossovers: pd.DataFrame, operation: str, baseline: str
) -> alt.TopLevelMixin:
    title = f"{operation}: speedup over {baseline}"
    d = speedup_frame(speedups, operation)
    if d.empty:
        return no_data(title, f"no speedups for {operation}")
    domain = sorted(d["series"].unique())
    lo = min(d["speedup_ci_low"].min(), d["speedup"].min(), 1.0)
    hi = max(d["speedup_ci_high"].max(), d["speedup"].max(), 1.0)
    yscale = alt.Scale(type="log", domain=[lo / 1.2, hi * 1.2])
    layers = speedup_layers(d, yscale, baseline, domain)
    layers += crossover_layers(crossovers, operation, domain)
    return alt.layer(*layers).properties(
        title=alt.Title(
            title,
            subtitle="above the dashed 1× line is faster; band: 95% CI; diamond: crossover, "
            "with its CI as a bar; ring: verdict in doubt (its CI holds the margin)",
        ),
        width=WIDTH,
        height=HEIGHT,
    )


def throughput_chart(bench: pd.DataFrame, operation: str) -> alt.TopLevelMixin:
    title = f"{operation}: achieved throughput"
    d = bench[(bench["operation"] == operation) & (bench["status"] == "ok")].copy()
    d["series"] = series_labels(d)
    domain = sorted(d["series"].unique()) if not d.empty else []
    panels = []
    for column, label in (("gflop_per_s", "GFLOP/s"), ("gb_per_s", "GB/s")):
        p = d[d[column].notna() & (d[column] > 0)] if not d.empty else d
        if p.empty:
            continue
        panels.append(
            alt.Chart(p)
            .mark_line(point=True)
            .encode(
                x=log_x(p["size"]),
                y=log_y(f"{column}:Q", label),
                color=color(domain),
                tooltip=[
                    alt.Tooltip("series:N", title="library"),
                    alt.Tooltip("size:Q"),
                    alt.Tooltip(f"{column}:Q", title=label, format=".3g"),
                ],
            )
            .properties(width=WIDTH * 0.75, height=HEIGHT)
        )
    if not panels:
        return no_data(title, f"no throughput for {operation}")
    return alt.hconcat(*panels).properties(
        title=alt.Title(title, subtitle="from the operation's cost model and the median time")
    )


def build_charts(
    bench: pd.DataFrame,
    speedups: pd.DataFrame,
    crossovers: pd.DataFrame,
    baseline_library: str,
    baseline_device: str,
    precision: pd.DataFrame | None = None,
    scaling: pd.DataFrame | None = None,
    roofs: pd.DataFrame | None = None,
    versions: pd.DataFrame | None = None,
) -> dict[str, alt.TopLevelMixin]:
    """Every chart of ``chart_names``, by name, with ``roofs`` the rooflines and with
    ``versions`` the environments' charts; the speedups are over the baseline given."""
    check_baseline(baseline_library, baseline_device, speedups, crossovers)
    baseline = series_label(baseline_library, baseline_device, with_device=True)
    charts: dict[str, alt.TopLevelMixin] = {}
    for op in sorted(bench["operation"].unique()):
        drawn = {
            "time": time_chart(bench, op),
            "speedup": speedup_chart(speedups, crossovers, op, baseline),
            "throughput": throughput_chart(bench, op),
        }
        charts.update({operation_chart(kind, op): drawn[kind] for kind in OPERATION_CHARTS})
    overview = {
        "speedup_heatmap": heatmap_chart(speedups, baseline),
        "first_call": first_call_chart(bench),
        "pipelined": pipelined_chart(bench),
    }
    charts.update({name: overview[name] for name in OVERVIEW_CHARTS})
    dims = {
        "precision": precision_chart(
            pd.DataFrame(columns=PRECISION_COLUMNS) if precision is None else precision
        ),
        "scaling": scaling_chart(
            pd.DataFrame(columns=SCALING_COLUMNS) if scaling is None else scaling
        ),
    }
    charts.update({name: dims[name] for name in DIMENSION_CHARTS})
    charts.update(roofline_charts(bench, roofs))
    charts.update(versions_charts(versions))
    return charts


def write_charts(
    benchmarks: str | os.PathLike,
    speedups: str | os.PathLike,
    crossovers: str | os.PathLike,
    outdir: str | os.PathLike,
    baseline_library: str,
    baseline_device: str,
    precision: str | os.PathLike | None = None,
    scaling: str | os.PathLike | None = None,
    roofs: str | os.PathLike | None = None,
    versions: str | os.PathLike | None = None,
) -> list[Path]:
    bench = pd.read_parquet(benchmarks)
    sp = pd.read_parquet(speedups)
    cr = pd.read_parquet(crossovers)
    prec = None if precision is None else pd.read_parquet(precision)
    scal = None if scaling is None else pd.read_parquet(scaling)
    roof_table = None if roofs is None else read_roofs(roofs).to_pandas()
    vers = None if versions is None else read_versions(versions)
    charts = build_charts(
        bench, sp, cr, baseline_library, baseline_device, prec, scal, roof_table, vers
    )
    written = []
    for name, chart in charts.items():
        written += save_chart(chart, Path(outdir), name)
    return written
