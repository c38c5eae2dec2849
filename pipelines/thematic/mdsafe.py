r"""Neutralise text from data before it goes into the Markdown report.

Everything the report prints that did not come from this code — response texts (quotes), LLM labels and
descriptions, keywords, codebook names, the theme-count explanation — can hold Markdown or HTML: ``<script>``,
``<iframe>``, ``[click](javascript:...)``, ``![](https://tracker/pixel)``, a carriage return that ends a table row,
a ``#`` that starts a heading. :func:`text` turns any such string into Markdown that renders as exactly those
characters, as plain inline text, wherever the report puts it (a paragraph, a heading, a list item, a blockquote
or a table cell):

* control characters (C0, C1, DEL), line and paragraph separators become a space; bidirectional overrides and
  isolates (the "Trojan Source" characters) are dropped; runs of whitespace collapse to one space, so a value can
  never end its line, its table row or its blockquote, nor become an indented code block;
* the punctuation that can open or delimit markup is backslash-escaped (``\ ` * _ [ ] < > ! & | # ~``), and
  so is a leading ``-``, ``+``, ``=`` or list number, so nothing can open HTML, a link, an image, an autolink,
  an entity, emphasis, a code span, a heading, a list, a quote, a thematic break or a table cell boundary;
* bare URLs, ``www.`` hosts and e-mail addresses get a zero-width space (``&#8203;``) after the scheme's colon,
  after ``www`` and before ``@``, so renderers with GitHub's autolink extension do not turn them into live links.
  The text reads the same; only copying it picks up the invisible character.

``tests/unit/thematic/test_mdsafe.py`` parses the output with a CommonMark parser (markdown-it-py) and checks that no
HTML, link or image token comes from data.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["text"]

#: The characters that can start or delimit Markdown/HTML anywhere in a line: HTML, autolinks and entities
#: (< > &), links, images and reference definitions ([ ] !), emphasis and strikethrough (* _ ~), code spans (`),
#: table cells (|), headings and their closing sequence (#), escapes themselves (\). Other punctuation stays
#: as it is, so the raw report stays readable ("late, again" is not "late\, again").
_PUNCT: Final = frozenset("\\`*_[]<>!&|#~")
#: What starts a block at the beginning of a line: a list (- + or 1. 1)), a setext underline or thematic break.
_LEADING: Final = re.compile(r"^(?:[-+=]|[0-9]{1,9}(?=[.)]))")
#: Bidi embeddings, overrides and isolates: invisible, and they reorder what a reader sees.
_BIDI: Final = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
#: A private-use character marks where a zero-width space goes; it is replaced after escaping.
_MARK: Final = "\ue000"
_ZWSP: Final = "&#8203;"
_SCHEME: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,31}):(?=//)")
_WWW: Final = re.compile(r"(?i)\b(www)(?=\.)")
_EMAIL: Final = re.compile(r"(?<=[A-Za-z0-9._%+-])@(?=[A-Za-z0-9-]+\.)")
_SCHEME_ONLY: Final = re.compile(r"(?i)\b(javascript|vbscript|data|mailto|xmpp|file):(?!\ue000)")


def _plain(value: object) -> str:
    s = "" if value is None else str(value)
    out = []
    for ch in s:
        if ch in _BIDI or ch == _MARK:
            continue
        cat = unicodedata.category(ch)
        if cat == "Cc" or ch in ("\u2028", "\u2029", "\u0085"):
            out.append(" ")
        elif cat in ("Zs",):
            out.append(" ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def _defang(s: str) -> str:
    s = _SCHEME.sub(lambda m: m.group(1) + ":" + _MARK, s)
    s = _SCHEME_ONLY.sub(lambda m: m.group(1) + ":" + _MARK, s)
    s = _WWW.sub(lambda m: m.group(1) + _MARK, s)
    return _EMAIL.sub(_MARK + "@", s)


def text(value: object) -> str:
    """``value`` as Markdown inline text that renders as its characters and nothing else (see the module doc)."""
    s = _defang(_plain(value))
    escaped = "".join("\\" + ch if ch in _PUNCT else ch for ch in s)
    m = _LEADING.match(escaped)
    if m:
        # "- x" becomes "\- x"; "1. x" becomes "1\. x": the character after the digits is the marker.
        end = m.end()
        escaped = ("\\" + escaped) if not m.group(0).isdigit() else escaped[:end] + "\\" + escaped[end:]
    return escaped.replace(_MARK, _ZWSP)
