"""Text from data reaches the HTML pages as text: no live tag, no link, no broken table.

A cell file, a results folder handed to ``compare`` or an offsite archive may come from
another host; its host name, CPU model, versions and error messages are data, never markup.
"""

from __future__ import annotations

import base64
import html
import re

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import MARGIN, REPO, constructed_results, snakemake
from markdown_it import MarkdownIt
from summarise import summarise

from numbench.analyse.findings import write_findings
from numbench.contract import BENCHMARKS_SCHEMA
from numbench.report.markdown import Markdown, md_code, md_table, md_text
from numbench.report.summary import to_html, write_summary

TAG = "<img src=x onerror=alert(1)>"
ESCAPED_TAG = html.escape(TAG, quote=False)  # &lt;img src=x onerror=alert(1)&gt;
LINK = "[click me](https://evil.example/steal)"
AUTOLINK = "<https://evil.example/auto>"
SCRIPT_LINK = "[x](javascript:alert(1))"
#: strings that would be markup if they reached the page raw
HOSTILE = [
    TAG,
    "<script>alert(1)</script>",
    LINK,
    AUTOLINK,
    SCRIPT_LINK,
    "![img](https://evil.example/p.png)",
    "a | b | c",
    "`code` and ``more`` \\` \\\\",
    "*bold* _em_ **strong** __under__ ~~strike~~",
    "&lt;img src=x&gt; &amp; &#60;b&#62;",
    "[ref]: https://evil.example/",
    "line one\nline two\r\n# heading\n- item\n<div>",
    "trailing backslash \\",
    "back\\|slash \\&lt; pipe",
]


def hostile_results(host: str = TAG, cpu_model: str = TAG, error: str = TAG, gpu=None):
    """The constructed results with data text set to ``host``, ``cpu_model`` and a failed
    cell's ``error`` (and the other text columns a cell file carries), and one more cell
    named by ``error`` throughout. ``gpu="unavailable"``: with GPU cells that could not run,
    ``error`` their reason (the GPU notice quotes it)."""
    bench, speedups, crossovers = constructed_results(gpu=gpu)
    bench.loc[bench["device"] == "gpu", "error"] = error
    bench = bench.copy()
    bench["cpu_model"] = cpu_model
    for column in ("platform", "python_version", "library_version", "blas", "threads_note"):
        bench[column] = error
    failed = (bench["library"] == "jax") & (bench["status"] != "ok")
    bench.loc[failed, "status"] = "failed"
    bench.loc[failed, "error"] = error
    for frame in (bench, speedups, crossovers):
        frame["host"] = host
    # a cell whose every name is the text: library, operation, dtype, status
    odd = bench.iloc[[0]].assign(library=error, operation=error, dtype=error, status=error)
    bench = pd.concat([bench, odd], ignore_index=True)
    return bench, speedups, crossovers


def live_tags(page: str) -> list[str]:
    """Tags in ``page`` that the summary's own template and renderer do not make."""
    own = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "ul", "ol"}
    own |= {"li", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "code", "a"}
    own |= {"blockquote", "br", "hr", "pre"}
    names = re.findall(r"<\s*/?\s*([a-zA-Z][a-zA-Z0-9]*)", page)
    return sorted({n for n in names if n.lower() not in own})


def test_a_tag_in_host_cpu_model_and_error_is_text_in_summary_html():
    page = to_html(summarise(*hostile_results(), "numpy", "cpu", MARGIN))
    assert "<img" not in page.lower()
    assert ESCAPED_TAG in page
    assert live_tags(page) == []


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_no_hostile_text_becomes_markup_in_summary_html(text):
    page = to_html(summarise(*hostile_results(text, text, text), "numpy", "cpu", MARGIN))
    assert live_tags(page) == []
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert all(h.startswith("charts/") for h in hrefs), hrefs
    assert "<img" not in page.lower() and "<script" not in page.lower()


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_no_hostile_text_becomes_markup_in_the_gpu_notice(text):
    results = hostile_results(text, text, text, gpu="unavailable")
    page = to_html(summarise(*results, "numpy", "cpu", MARGIN))
    assert "No GPU was found" in page
    assert live_tags(page) == []
    hrefs = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert all(h.startswith("charts/") for h in hrefs), hrefs


def test_the_page_links_only_to_files_beside_it():
    page = to_html(
        "[a](https://evil.example/) ![b](https://evil.example/pixel.png) [c](//evil.example/x) "
        "[d](javascript:alert(1)) [e](data:text/html,x) <https://evil.example/> "
        "[chart](charts/time_fft.html)"
    )
    assert re.findall(r'(?:href|src)="([^"]*)"', page) == ["charts/time_fft.html"]
    assert "<img" not in page


def test_the_summary_html_file_holds_the_tag_as_text(tmp_path):
    """As the rule writes it: from the Parquet tables to results/summary.html."""
    bench, speedups, crossovers = hostile_results()
    paths = {}
    for name, frame in (("benchmarks", bench), ("speedups", speedups), ("crossovers", crossovers)):
        paths[name] = tmp_path / f"{name}.parquet"
        schema = BENCHMARKS_SCHEMA if name == "benchmarks" else None
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
        pq.write_table(table, paths[name])
    md, page = tmp_path / "summary.md", tmp_path / "summary.html"
    findings = tmp_path / "findings.parquet"
    write_findings(
        paths["benchmarks"],
        paths["speedups"],
        paths["crossovers"],
        findings,
        "numpy",
        "cpu",
        MARGIN,
    )
    write_summary(paths["benchmarks"], paths["speedups"], findings, md, tmp_path / "charts", page)
    text = page.read_text()
    assert ESCAPED_TAG in text and "<img" not in text.lower()
    # the Markdown twin keeps the tag inert too, for any renderer that allows raw HTML
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md.read_text())
    assert "<img" not in rendered.lower()


def test_markdown_renders_with_raw_html_off():
    page = to_html("# title\n\n<b>bold</b> and\n\n<div onclick=x>block</div>\n")
    assert "<b>" not in page and "<div" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def rendered_inline(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).renderInline(markdown)


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_md_text_renders_back_as_exactly_its_text(text):
    """Whatever the data holds, the Markdown renders to that text (newlines and control
    characters folded to spaces), even with raw HTML on."""
    shown = " ".join(text.split())
    expected = html.escape(shown, quote=False).replace('"', "&quot;")
    assert rendered_inline(md_text(text)).strip() == expected


def test_md_text_leaves_plain_names_alone():
    for name in ("batched_matmul", "numpy", "torch-compile", "2.13.0+cpu", "Linux-6.1-x86_64"):
        assert md_text(name) == name
    assert md_text("_lead") == "\\_lead" and md_text("a*b") == "a\\*b"
    assert md_text("bell\x07and\x1b[31mred") == "bell and [31mred".replace("[", "\\[")


@pytest.mark.parametrize("text", ["a`b", "``", "`lead", "x ` y `` z", "<img>", "a|b"])
def test_md_code_is_one_code_span_with_the_text(text):
    out = rendered_inline(md_code(text))
    assert out == f"<code>{html.escape(text, quote=False)}</code>"


def test_md_table_keeps_one_cell_per_column_whatever_the_data():
    rows = [[text, "x"] for text in HOSTILE]
    page = (
        MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .render(md_table(["data", "other"], rows))
    )
    body = page.split("<tbody>")[1]
    cells = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    assert len(cells) == len(HOSTILE)
    for row in cells:
        assert row.count("<td>") == 2 and row.rstrip().endswith("<td>x</td>")
    assert "<img" not in page and "<a " not in page


def test_table_values_are_text_unless_marked_markdown():
    table = md_table(["x", "y"], [[TAG, Markdown("**1 ms**")]])
    assert "| \\<img src=x onerror=alert(1)> | **1 ms** |" in table


REPORT_SNAKEFILE = """
import sys
sys.path[:0] = [{src!r}, {tests!r}]

rule summary:
    output:
        report(
            "results/summary.html",
            caption={caption!r},
            category="Summary",
            labels={{"document": "summary"}},
        ),
    run:
        from test_html_escape import MARGIN, hostile_results
        from numbench.report.summary import to_html
        from summarise import summarise
        page = to_html(summarise(*hostile_results(), "numpy", "cpu", MARGIN))
        open(output[0], "w", encoding="utf-8").write(page)
"""


@pytest.mark.e2e
def test_report_html_shows_the_tag_as_text(tmp_path):
    """``snakemake --report`` embeds summary.html whole (a base64 ``data:`` URI in an
    iframe), with the workflow's own caption: the tag stays text there too."""
    caption = REPO / "workflow" / "report" / "summary.rst"
    (tmp_path / "Snakefile").write_text(
        REPORT_SNAKEFILE.format(
            src=str(REPO / "src"), tests=str(REPO / "tests"), caption=str(caption)
        )
    )
    made = snakemake(tmp_path, "--cores", "1", timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    report = snakemake(tmp_path, "--report", "results/report.html", timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    page = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    assert "onerror=alert(1)>" not in page
    embedded = re.findall(r"filename=summary\.html;base64,([A-Za-z0-9+/=]+)", page)
    assert len(embedded) == 1
    summary = base64.b64decode(embedded[0]).decode("utf-8")
    assert ESCAPED_TAG in summary and "<img" not in summary.lower()


def test_report_captions_quote_nothing_from_the_results():
    """A caption is a Jinja template turned into HTML by docutils, which runs ``raw``
    directives: a value put into it (a chart's name comes from an operation's) could carry
    one. So the captions interpolate nothing; the chart's name is its label."""
    for caption in (REPO / "workflow" / "report").glob("*.rst"):
        text = caption.read_text(encoding="utf-8")
        assert "{{" not in text and "{%" not in text, caption.name


def test_a_chart_page_keeps_data_as_script_text(tmp_path):
    """A name holding ``</script>`` must not close the chart's script and open live HTML."""
    import altair as alt
    import pandas as pd

    from numbench.report.drawing import save_chart

    hostile = "</script><img src=x onerror=alert(1)>"
    frame = pd.DataFrame({"size": [1, 2], "median_s": [3.0, 4.0], "library": [hostile, "numpy"]})
    chart = alt.Chart(frame).mark_point().encode(x="size", y="median_s", color="library")
    page = save_chart(chart, tmp_path, "hostile")[0].read_text()
    assert "<img src=x" not in page
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in page


def test_sentences_built_from_data_escape_it():
    from numbench.analyse.dimensions import precision_gaps
    from numbench.report.sections import precision_sentence

    rows = pd.DataFrame(
        [
            {
                "library": "*bold*[x](javascript:alert(1))",
                "operation": "<b>op</b>",
                "size": 1000,
                "threads": 1,
                "ratio": 0.5,
                "verdict": "faster",
                "device": "cpu",
            }
        ]
    )
    text = " ".join(precision_sentence(g) for g in precision_gaps(rows))
    assert "\\*bold\\*" in text and "\\[x\\]" in text and "\\<b>op\\</b>" in text
