"""Charts: every file is written, and every .html renders offline in headless Chromium.

The browser tests start Chromium, a process of its own, so they are end to end (``e2e``:
``make test`` runs them, ``make test-fast`` leaves them out). Chromium comes from Debian's
``chromium`` package. The tests install nothing: where it is missing, the browser tests are
skipped with the reason (``.ci/run`` installs it on CI's machine).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from altair.utils.html import spec_to_html
from conftest import constructed_results, made_once

from numbench.report.charts import build_charts, chart_names, speedup_chart
from numbench.report.drawing import (
    FONT,
    FORMATS,
    chart_spec,
    heatmap_frame,
    javascript_bundle,
    save_chart,
)

OPERATIONS = ["fft", "sort"]
# A console message as Chromium logs it with --enable-logging=stderr, e.g.
# [1:1:1121/161110.8:INFO:CONSOLE:1] "Uncaught ReferenceError: ...", source: file:///... (1)
# Chromium logs console.error, console.warn and uncaught exceptions alike at INFO, so a chart
# page must log nothing at all: Vega reports its own problems through the console too.
CONSOLE_MESSAGE = re.compile(r":CONSOLE(:\d+|\(\d+\))\]")


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip(
            "chromium is not installed: install Debian's chromium to run the browser checks"
        )
    return exe


def open_in_chromium(exe: str, page: Path, profile: Path) -> tuple[str, str]:
    """Load ``page`` headless with the network cut off; return (rendered DOM, stderr)."""
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        # every host name fails to resolve: a chart that needs the network cannot render
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.stdout, proc.stderr


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE_MESSAGE.search(line)]


def rendered_chart(dom: str) -> bool:
    """A Vega view renders into an <svg> or a <canvas> of class "marks" (vega-embed's menu
    icon is an <svg> too, so a bare <svg> proves nothing)."""
    return bool(re.search(r"<(svg|canvas)\b[^>]*\bclass=\"marks\"", dom))


@pytest.fixture(scope="module")
def charts_dir(tmp_path_factory) -> Path:
    """Every chart of the constructed results in every format, written once a session
    (``made_once``: with the tests in two processes, the second reads the first's)."""

    def make() -> Path:
        folder = tmp_path_factory.mktemp("charts")
        bench, speedups, crossovers = constructed_results()
        for name, chart in build_charts(bench, speedups, crossovers, "numpy", "cpu").items():
            save_chart(chart, folder, name)
        return folder

    return made_once(tmp_path_factory, "charts_dir", make)


def test_every_chart_is_written_in_every_format(charts_dir):
    expected = {f"{n}.{f}" for n in chart_names(OPERATIONS) for f in FORMATS}
    assert {p.name for p in charts_dir.iterdir()} == expected
    for name in chart_names(OPERATIONS):
        assert (charts_dir / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (charts_dir / f"{name}.svg").read_text(encoding="utf-8")[:500]


def test_a_chart_s_three_files_come_from_one_spec_as_altair_saves_them(tmp_path, monkeypatch):
    """save_chart makes the spec with its data once (altair's save and to_html each make it
    again: three quarters of the charts job), beside one outline without data or checks, and
    draws the same files as ``chart.save``; every page inlines one JavaScript bundle, made
    once."""
    import altair as alt
    import vl_convert

    bench, speedups, crossovers = constructed_results()
    chart = build_charts(bench, speedups, crossovers, "numpy", "cpu")["speedup_fft"]
    expected = tmp_path / "altair"
    expected.mkdir()
    configured = chart.configure(font=FONT)
    configured.save(expected / "c.svg")
    configured.save(expected / "c.png", scale_factor=2)
    made, depth = [], [0]
    to_dict = alt.TopLevelMixin.to_dict

    def counted(self, *args, **kwargs):  # a layered chart's layers are made inside it
        made.append((depth[0], kwargs.get("validate", True)))
        depth[0] += 1
        try:
            return to_dict(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(alt.TopLevelMixin, "to_dict", counted)
    laid_out = []  # vl-convert's Vega layouts: one a chart, the PNG rasterised from the SVG
    for fmt in ("svg", "png"):
        real = getattr(vl_convert, f"vegalite_to_{fmt}")
        monkeypatch.setattr(
            vl_convert,
            f"vegalite_to_{fmt}",
            lambda *a, _real=real, _fmt=fmt, **k: laid_out.append(_fmt) or _real(*a, **k),
        )
    html, svg, png = save_chart(chart, tmp_path, "c")
    assert [checked for level, checked in made if level == 0] == [False, True], made
    assert laid_out == ["svg"]
    assert svg.read_bytes() == (expected / "c.svg").read_bytes()
    assert png.read_bytes() == (expected / "c.png").read_bytes()
    # the page is altair's own inlined page of that spec (as to_html makes it), made inert
    # (chart_page); the spec's frames cut to their named columns (test below)
    spec = chart_spec(configured)
    page = spec_to_html(
        spec,
        mode="vega-lite",
        vegalite_version=alt.VEGALITE_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION,
        vega_version=alt.VEGA_VERSION,
        template="inline",
    )
    text = json.dumps(spec)
    assert text in page
    inert = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    assert html.read_text(encoding="utf-8") == page.replace(text, inert)
    # the pages' JavaScript is bundled once a process, not once a page
    save_chart(chart, tmp_path, "again")
    assert javascript_bundle.cache_info().misses == 1
    assert javascript_bundle() in html.read_text(encoding="utf-8")


def test_a_spec_leaves_out_the_columns_it_never_names_unless_a_mark_shows_every_field():
    """A column is kept where its name appears anywhere in the spec (an encoding, a tooltip,
    a transform, an expression; a name like ``x`` that the spec's keys hold is kept too)."""
    import altair as alt

    frame = pd.DataFrame(
        {
            "speed": [1.0, 2.0],
            "width": [3.0, 4.0],
            "per.call": [5.0, 6.0],
            "host": ["p", "q"],
            "unused": [0, 1],
        }
    )
    shown = alt.Chart(frame).mark_point().encode(x="speed:Q", y="per\\.call:Q", tooltip=["host:N"])
    ((rows,),) = [values[:1] for values in chart_spec(shown)["datasets"].values()]
    assert set(rows) == {"speed", "per.call", "host"}
    derived = (
        alt.Chart(frame)
        .transform_filter("datum.width > 3")
        .transform_calculate(twice="datum.speed * 2")
        .mark_point()
        .encode(x="twice:Q")
    )
    ((rows,),) = [values[:1] for values in chart_spec(derived)["datasets"].values()]
    assert set(rows) == {"speed", "width"}
    # a tooltip of every field: every column stays
    every = alt.Chart(frame).mark_point(tooltip=True).encode(x="speed:Q")
    ((rows,),) = [values[:1] for values in chart_spec(every)["datasets"].values()]
    assert set(rows) == set(frame.columns)


def test_the_page_script_is_kept_between_processes_and_a_cache_that_fails_is_passed_by(
    tmp_path, monkeypatch
):
    """``javascript_bundle`` reads the bundle a process before it kept in the cache folder,
    under the versions that made it, instead of bundling it again; where the folder cannot be
    written it bundles it all the same."""
    import vl_convert

    from numbench.report import drawing

    made = []
    real = vl_convert.javascript_bundle

    def bundled(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(vl_convert, "javascript_bundle", bundled)
    monkeypatch.setenv(drawing.CACHE_ENV, str(tmp_path / "cache"))
    drawing.javascript_bundle.cache_clear()
    first = drawing.javascript_bundle()
    kept = list((tmp_path / "cache").glob("vega-embed-vl-convert-*.js"))
    assert len(made) == 1 and len(kept) == 1
    assert vl_convert.__version__ in kept[0].name
    assert kept[0].read_text(encoding="utf-8") == first
    drawing.javascript_bundle.cache_clear()  # as a new process would start
    assert drawing.javascript_bundle() == first and len(made) == 1
    # a cache folder that is a file: nothing can be kept, the bundle is made each process
    (tmp_path / "not a folder").write_text("")
    monkeypatch.setenv(drawing.CACHE_ENV, str(tmp_path / "not a folder"))
    drawing.javascript_bundle.cache_clear()
    assert drawing.javascript_bundle() == first and len(made) == 2
    drawing.javascript_bundle.cache_clear()


def test_the_cache_folder_follows_its_variable_then_xdg_then_home(monkeypatch, tmp_path):
    from numbench.report.drawing import CACHE_ENV, cache_folder

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder({}) == tmp_path / "home" / ".cache" / "numbench"
    assert cache_folder({"XDG_CACHE_HOME": "/x"}) == Path("/x/numbench")
    assert cache_folder({"XDG_CACHE_HOME": "/x", CACHE_ENV: "/kept"}) == Path("/kept")


@pytest.mark.parametrize("name", chart_names(OPERATIONS))
def test_html_has_its_javascript_inlined(charts_dir, name):
    html = (charts_dir / f"{name}.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=", html), "a script is loaded from elsewhere"
    assert len(html) > 100_000  # Vega, Vega-Lite and vega-embed are in the page


def test_speedup_chart_marks_the_crossover(charts_dir):
    svg = (charts_dir / "speedup_fft.svg").read_text(encoding="utf-8")
    # the constructed torch curve crosses 1 (a diamond); the sort chart has no crossing
    assert "diamond" in (charts_dir / "speedup_fft.html").read_text(encoding="utf-8")
    assert svg.count("<path") > (charts_dir / "speedup_sort.svg").read_text().count("<path")


def _rings(chart) -> list[list[dict]]:
    """The rows drawn by each hollow circle layer of a speedup chart's spec."""
    spec = chart.to_dict()
    return [
        spec["datasets"][layer["data"]["name"]]
        for layer in spec["layer"]
        if isinstance(layer.get("mark"), dict)
        and layer["mark"].get("shape") == "circle"
        and layer["mark"].get("filled") is False
    ]


def test_verdicts_in_doubt_are_ringed_and_labelled():
    _, speedups, crossovers = constructed_results()
    assert not _rings(speedup_chart(speedups, crossovers, "fft", "NumPy"))
    assert not heatmap_frame(speedups)["label"].str.endswith("?").any()
    doubt = speedups.copy()
    at = (doubt["library"] == "torch") & (doubt["operation"] == "fft") & (doubt["size"] == 100_000)
    doubt.loc[at, "settled"] = False
    [ring] = _rings(speedup_chart(doubt, crossovers, "fft", "NumPy"))
    assert [(row["library"], row["size"]) for row in ring] == [("torch", 100_000)]
    labels = heatmap_frame(doubt).set_index(["library", "operation", "size"])["label"]
    assert labels.loc[("torch", "fft", 100_000)].endswith(" ?")
    assert sum(label.endswith(" ?") for label in labels) == 1
    # speedups from before the column: nothing is marked
    old = speedups.drop(columns="settled")
    assert not _rings(speedup_chart(old, crossovers, "fft", "NumPy"))
    assert not heatmap_frame(old)["label"].str.endswith("?").any()


@pytest.mark.e2e
@pytest.mark.parametrize("name", chart_names(OPERATIONS))
def test_chart_renders_in_chromium_without_console_messages(chromium, charts_dir, tmp_path, name):
    dom, stderr = open_in_chromium(chromium, charts_dir / f"{name}.html", tmp_path / "profile")
    assert rendered_chart(dom), f"no svg or canvas in the rendered page; stderr:\n{stderr[-2000:]}"
    assert console_messages(stderr) == []


@pytest.mark.e2e
def test_the_browser_check_catches_a_broken_page(chromium, tmp_path):
    """The checks above can fail: a page that throws and renders nothing is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><div id='vis'></div><script>"
        "console.error('chart failed'); vegaEmbed('#vis', {});"
        "</script></body></html>",
        encoding="utf-8",
    )
    dom, stderr = open_in_chromium(chromium, page, tmp_path / "profile")
    assert not rendered_chart(dom)
    errors = console_messages(stderr)
    assert any("chart failed" in e for e in errors), stderr[-2000:]
    assert any("vegaEmbed is not defined" in e for e in errors), stderr[-2000:]


def test_charts_are_drawn_under_their_registered_names_for_the_baseline_given():
    """The speedup charts name the baseline passed in, even when there are no speedups."""
    bench, speedups, crossovers = constructed_results()
    charts = build_charts(bench, speedups.iloc[0:0], crossovers.iloc[0:0], "torch", "gpu")
    assert list(charts) == chart_names(OPERATIONS)
    assert charts["speedup_fft"].to_dict()["title"] == "fft: speedup over torch (gpu)"
    heatmap = charts["speedup_heatmap"].to_dict()["title"]
    assert heatmap.startswith("speedup over torch (gpu) at each operation's")
