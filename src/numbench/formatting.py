"""How values and series are written: times, sizes, speedups, library names, Markdown tables.

Shared by the summary and the charts, so a library, a device or a size reads the same in both.
"""

from __future__ import annotations

import math
import re
import unicodedata

import pandas as pd

DISPLAY_NAMES = {
    "numpy": "NumPy",
    "jax": "JAX",
    "torch": "PyTorch",
    "tensorflow": "TensorFlow",
    "numba": "Numba",
    "cupy": "CuPy",
    "jax-eager": "JAX (eager)",
    "torch-compile": "PyTorch (torch.compile)",
    "tensorflow-eager": "TensorFlow (eager)",
}


def missing(value) -> bool:
    """None, NaN or pandas' NA: a value the tables left empty."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def format_seconds(s: float | None) -> str:
    if missing(s):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_size(n: float | int | None, approx: bool = False, mark: bool = True) -> str:
    """'10^4' for powers of ten from 1000 up, '1,024' otherwise; an interpolated size is
    rounded to two significant digits, '≈ 2,300' (without the '≈' when ``mark`` is false)."""
    if missing(n):
        return "–"
    if approx:
        digits = max(0, int(math.floor(math.log10(n))) - 1)
        rounded = round(n / 10**digits) * 10**digits
        return f"≈ {rounded:,.0f}" if mark else f"{rounded:,.0f}"
    n = int(n)
    k = math.log10(n) if n > 0 else 0
    if n >= 1000 and k.is_integer():
        return f"10^{int(k)}"
    return f"{n:,}"


def format_sizes(sizes) -> str:
    """'10, 100, 10^3': sizes in increasing order."""
    return ", ".join(format_size(s) for s in sorted(sizes))


def format_speedup(s: float | None) -> str:
    if missing(s):
        return "–"
    return f"{s:.3g}×"


def format_ci(lo: float | None, hi: float | None) -> str:
    if missing(lo) or missing(hi):
        return ""
    return f"({lo:.3g} to {hi:.3g})"


def slowdown(s: float) -> str:
    """', i.e. 12× slower' for speedups well below 1, where '0.083×' is hard to read."""
    return f", i.e. {1 / s:.3g}× slower" if 0 < s < 0.5 else ""


# -- names --------------------------------------------------------------------------------------
def display(library: str) -> str:
    """The library's name in prose: 'PyTorch' for 'torch'."""
    return DISPLAY_NAMES.get(library, library)


def who(library: str, device: str, multi_device: bool) -> str:
    """A library in a sentence: 'PyTorch', or 'PyTorch on gpu' when devices must be told apart."""
    name = display(library)
    return f"{name} on {device}" if multi_device else name


def series_label(library: str, device: str, with_device: bool) -> str:
    """A library in a table header, a chart legend or a list: 'torch', or 'torch (gpu)'."""
    return f"{library} ({device})" if with_device else str(library)


def series_labels(df: pd.DataFrame, with_device: bool | None = None) -> pd.Series:
    """``series_label`` of every row of ``df``; by default the device is named when ``df``
    holds more than one. Where ``df`` holds several dtypes or thread counts, each label
    names its own too ('jax (float32, 2 threads)'), so a chart or a table never draws two
    of them as one series."""
    if with_device is None:
        with_device = df["device"].nunique() > 1
    labels = [series_label(lib, dev, with_device) for lib, dev in zip(df["library"], df["device"])]
    extra: list[list[str]] = [[] for _ in labels]
    if "dtype" in df and df["dtype"].nunique() > 1:
        for parts, dtype in zip(extra, df["dtype"], strict=True):
            parts.append(str(dtype))
    if "threads" in df and df["threads"].nunique() > 1:
        for parts, n in zip(extra, df["threads"], strict=True):
            parts.append(f"{int(n)} thread" + ("" if int(n) == 1 else "s"))
    labels = [
        label
        if not parts
        else f"{label[:-1]}, {', '.join(parts)})"
        if label.endswith(")")
        else f"{label} ({', '.join(parts)})"
        for label, parts in zip(labels, extra, strict=True)
    ]
    return pd.Series(labels, index=df.index, dtype=str)


# -- Markdown -----------------------------------------------------------------------------------
# Text from data (host names, CPU models, versions, error messages: a cell file, a results
# folder or an archive from another host may hold anything) enters Markdown only through
# ``md_text`` or ``md_code``, so it reads as the same text under any renderer, raw HTML on or
# off: no tag, link, image, code span, emphasis or extra table cell can come from it. Markup
# numbench writes itself is marked ``Markdown`` where it goes into a table.

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
