"""Markdown, written by the report alone: the escaping every value from data goes through,
and the summary's tables, written from the frames (the environment, time and speedup per
operation, the crossovers, and every cell).

Text from data (host names, CPU models, versions, error messages: a cell file, a results
folder or an archive from another host may hold anything) enters Markdown only through
``md_text`` or ``md_code``, so it reads as the same text under any renderer, raw HTML on or
off: no tag, link, image, code span, emphasis or extra table cell can come from it. Markup
numbench writes itself is marked ``Markdown`` where it goes into a table: in the summary's
tables every value from the frames is data (``md_table`` escapes it as text), and the few
cells that carry numbench's own markup (the fastest time in bold) are built as ``Markdown``.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

import pandas as pd

from numbench.cells import SORT_BY_SIZE
from numbench.contract.conclusions import in_doubt
from numbench.contract.facts import Crossover
from numbench.formatting import (
    display,
    format_ci,
    format_seconds,
    format_size,
    format_speedup,
    missing,
    series_labels,
)

#: ASCII punctuation a backslash escapes in CommonMark; a backslash before any other character
#: is a literal backslash
_MD_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: characters that open Markdown syntax wherever they stand: code spans, emphasis, links and
#: images, raw HTML and autolinks, table cells, strikethrough, headings' closing marks
_MD_ALWAYS_ESCAPED = frozenset("`*[]<|~#")
#: an entity or character reference (``&lt;``, ``&#60;``), which a renderer would decode
_MD_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")


class Markdown(str):
    """Markdown numbench wrote itself (``**bold**``, a link to a chart), whose parts from data
    went through ``md_text`` already: ``md_table`` puts it in as it is."""


def _one_line(value) -> str:
    """``value`` as text on one line: control characters and line breaks are spaces, runs
    of white space one space (a line break in a table cell or a list item would end it)."""
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in str(value))
    return " ".join(text.split())


def md_text(value) -> str:
    """``value`` as literal text in Markdown: the characters that open Markdown syntax are
    backslash-escaped, and a ``_`` or ``&`` only where it could open something (not inside
    a word, not outside an entity), so names like ``batched_matmul`` read as they are in the
    ``.md``. Safe in a table cell, a list item, a heading and a sentence; not inside a code
    span (``md_code``). None and NaN are empty."""
    if missing(value):
        return ""
    text = _MD_ENTITY.sub("\x00", _one_line(value))  # a placeholder: \x00 is folded above
    out = []
    for i, c in enumerate(text):
        before = text[i - 1] if i > 0 else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if c == "\x00":
            out.append("\\&")
        elif c in _MD_ALWAYS_ESCAPED:
            out.append("\\" + c)
        elif c == "_" and not (before.isalnum() and after.isalnum()):
            out.append("\\_")
        elif c == "\\" and (after in _MD_PUNCTUATION or after == "\x00" or i + 1 == len(text)):
            out.append("\\\\")
        else:
            out.append(c)
    return "".join(out)


def md_code(value) -> str:
    """``value`` as one inline code span: a fence of backticks longer than any run inside it
    (CommonMark's rule), padded where the text starts or ends with a backtick. Not for a
    table cell, where a pipe would still end the cell: there, use ``md_text``."""
    text = "" if missing(value) else _one_line(value)
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A Markdown table; ``align`` has one letter per column, 'r' for right-aligned. Every
    header and cell is text (``md_text``) unless it is ``Markdown``."""
    align = align or "l" * len(header)
    marks = ["---:" if a == "r" else "---" for a in align]

    def cell(value) -> str:
        return _one_line(value) if isinstance(value, Markdown) else md_text(value)

    lines = ["| " + " | ".join(cell(v) for v in header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def md_link(text: str, target: str) -> str:
    """A Markdown link to a file beside the summary: the text escaped, the target
    percent-encoded (a chart's name holds the operation's, which comes from the tables), so
    that neither can end the link or make another one."""
    return f"[{md_text(text)}]({quote(target, safe='/')})"


def _unique(values) -> str:
    vals = sorted({str(v) for v in values if not missing(v) and str(v) != ""})
    return ", ".join(vals) if vals else "–"


def short_blas(text) -> str:
    """The BLAS name without a build-configuration dump (PyTorch reports its whole config)."""
    if missing(text):
        return ""
    text = str(text).strip()
    return text if len(text) <= 60 else text.split(",")[0].strip() + " (…)"


def environment_table(bench: pd.DataFrame) -> str:
    rows = [
        ["Host", _unique(bench["host"])],
        ["CPU model", _unique(bench["cpu_model"])],
    ]
    if "cpu_count" in bench:
        rows.append(["Cores (logical)", _unique(bench["cpu_count"].dropna().astype(int))])
    if "ram_gb" in bench:
        rows.append(["RAM", _unique(f"{v:.1f} GB" for v in bench["ram_gb"].dropna())])
    gpu = bench[bench["device"] == "gpu"]
    if gpu.empty:
        gpu_text = "not asked for (device: cpu)"
    elif (gpu["status"] == "unavailable").all():
        gpu_text = "none found (every GPU cell unavailable)"
    else:
        gpu_text = _unique(gpu.loc[gpu["status"] != "unavailable", "device_name"])
    rows += [
        ["GPU", gpu_text],
        ["OS", _unique(bench["platform"])],
        ["Python", _unique(bench["python_version"])],
        ["dtype", _unique(bench["dtype"])],
        ["Threads per cell", _unique(bench["threads"].dropna().astype(int))],
    ]
    for lib, g in bench.groupby("library", sort=True):
        version = _unique(g["library_version"])
        blas = _unique(short_blas(b) for b in g["blas"])
        rows.append([display(lib), version + (f"; BLAS: {blas}" if blas != "–" else "")])
    return md_table(["", "value"], rows)


def _time_table(d: pd.DataFrame, sizes) -> str:
    series = sorted(d["series"].unique())
    rows = []
    for size in sizes:
        at = d[d["size"] == size].set_index("series")
        ok = at[at["status"] == "ok"]
        best = ok["median_s"].idxmin() if not ok.empty else None
        row = [format_size(size)]
        for s in series:
            if s not in at.index:
                row.append("")
            elif at.loc[s, "status"] != "ok":
                row.append(at.loc[s, "status"])
            else:
                t = format_seconds(at.loc[s, "median_s"])
                row.append(Markdown(f"**{md_text(t)}**") if s == best else t)
        rows.append(row)
    return md_table(["n"] + series, rows, "r" * (len(series) + 1))


def _speedup_table(sp: pd.DataFrame, sizes) -> str:
    series = sorted(sp["series"].unique())
    rows = []
    for size in sizes:
        at = sp[sp["size"] == size].set_index("series")
        row = [format_size(size)]
        for s in series:
            if s not in at.index or missing(at.loc[s, "speedup"]):
                row.append("")
                continue
            r = at.loc[s]
            text = f"{format_speedup(r.speedup)} {format_ci(r.speedup_ci_low, r.speedup_ci_high)}"
            text += " ns" if r.verdict == "same" else ""
            row.append(text + (" ?" if r.in_doubt else ""))
        rows.append(row)
    return md_table(["n"] + series, rows, "r" * (len(series) + 1))


def operation_tables(bench: pd.DataFrame, speedups: pd.DataFrame, op: str) -> str:
    """Median time per size and series, and the speedups over the baseline."""
    multi = bench["device"].nunique() > 1
    d = bench[bench["operation"] == op].copy()
    # series_labels names the dtype and the threads too where the grid has several
    d["series"] = series_labels(d, with_device=multi)
    sizes = sorted(d["size"].unique())
    out = [
        "Median time per call (fastest in bold; a status where a cell was not measured):",
        "",
        _time_table(d, sizes),
    ]
    sp = speedups[speedups["operation"] == op].copy()
    if not sp.empty:
        sp["series"] = series_labels(sp, with_device=multi)
        sp["in_doubt"] = in_doubt(sp)
        out += [
            "",
            "Speedup over the baseline, 95% CI in brackets (ns: the same speed, the CI "
            "contains 1 or the speedup is within the margin; ?: in doubt, the CI holds the "
            "margin or 1 / margin, see Warnings):",
            "",
            _speedup_table(sp, sizes),
        ]
    return "\n".join(out)


def crossover_table(crossovers: tuple[Crossover, ...]) -> str:
    if not crossovers:
        return "No speedups, so no crossovers."
    rows = []
    order = sorted(crossovers, key=lambda c: (c.operation, c.library, c.device, c.dtype, c.host))
    for c in order:
        crossing = c.kind == "crosses"
        rows.append(
            [
                c.operation,
                c.library,
                c.device,
                c.kind + (" ?" if c.settled is False else ""),
                format_size(c.crossover_size, approx=True) if crossing else "",
                f"{format_size(c.ci_low, approx=True, mark=False)} to "
                f"{format_size(c.ci_high, approx=True, mark=False)}"
                if crossing
                else "",
                f"{format_size(c.below_size)} to {format_size(c.above_size)}" if crossing else "",
            ]
        )
    table = md_table(
        ["operation", "library", "device", "kind", "crossover n", "CI", "between sizes"],
        rows,
        "lllllrr",
    )
    if any(c.settled is False for c in crossovers):
        table += (
            "\n\n?: the kind rests on a verdict in doubt (its interval holds the margin; "
            "see Warnings), so a second run may give another kind."
        )
    return table


def every_cell_table(df: pd.DataFrame) -> str:
    rows = []
    for r in df.sort_values(list(SORT_BY_SIZE)).itertuples(index=False):
        rel = "" if missing(r.rel_error) else f"{r.rel_error:.1e}"
        rows.append(
            [
                r.library,
                r.device,
                r.operation,
                f"{r.size}",
                r.dtype,
                "" if missing(r.threads) else f"{int(r.threads)}",
                r.status,
                format_seconds(r.median_s),
                format_seconds(r.iqr_s),
                format_seconds(r.first_call_s),
                rel,
                " ".join(
                    str(n)
                    for n in (r.error, getattr(r, "threads_note", None))
                    if not missing(n) and n
                ),
            ]
        )
    header = ["library", "device", "operation", "size", "dtype", "threads", "status", "median"]
    header += ["IQR", "first call", "rel. error", "note"]
    return md_table(header, rows, "lllllllrrrrl")
