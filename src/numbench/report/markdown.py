"""Markdown, written by the report alone.

Text from data (host names, CPU models, versions, error messages: a cell file, a results
folder or an archive from another host may hold anything) enters Markdown only through
``md_text`` or ``md_code``, so it reads as the same text under any renderer, raw HTML on or
off: no tag, link, image, code span, emphasis or extra table cell can come from it. Markup
numbench writes itself is marked ``Markdown`` where it goes into a table.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

from numbench.formatting import missing

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
