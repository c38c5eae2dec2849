"""The Markdown neutraliser, checked by parsing its output with a CommonMark parser (markdown-it-py): no HTML,
link, image or other markup token comes from data, the visible text is the data's own, and a table keeps one row
per value whatever the values hold."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest

from pipelines.thematic.mdsafe import text
from tests.support.markdown_tokens import parser, walk

HOSTILE = [
    "<script>alert(1)</script>",
    "<iframe src=https://evil.example/></iframe>",
    "<img src=x onerror=alert(1)>",
    "[click me](javascript:alert(1))",
    "[ref][1]\n\n[1]: https://evil.example",
    "![pixel](https://tracker.example/p.png)",
    "<https://evil.example/autolink>",
    "<mailto:a@evil.example>",
    "see https://evil.example/path?q=1 now",
    "www.evil.example and http://x.y",
    "write to ceo@evil.example",
    "javascript:alert(document.cookie)",
    "line one\r| injected | row |\r\n|---|---|",
    "cell | with | pipes",
    "# a heading\n## another",
    "> quoted\n> more",
    "- item\n* item\n+ item\n1. item",
    "Title\n=====",
    "    indented code",
    "```\nfenced\n```",
    "`code` **bold** _em_ ~~strike~~",
    "&lt;script&gt; &amp; &#x3C;",
    "back\\slash \\<not html>",
    "nul\x00 bell\x07 del\x7f c1\x85 ls\u2028 ps\u2029 tab\t end",
    "bidi \u202eevil\u202c and \u2066isolate\u2069",
    "<!-- comment --> <?php ?> <![CDATA[x]]>",
    "",
    "plain words, nothing odd.",
    "日本語のテキスト 🙂 émoji",
]


FORBIDDEN = {"html_inline", "html_block", "link_open", "image", "code_inline", "code_block", "fence",
             "em_open", "strong_open", "s_open", "hr", "bullet_list_open", "ordered_list_open",
             "blockquote_open", "table_open"}


def _expected_visible(value: str) -> str:
    """What a reader must see: the value with control characters spaced out, bidi controls dropped, spaces
    collapsed."""
    chars = []
    for ch in value:
        if ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c":
            continue
        chars.append(" " if unicodedata.category(ch) in ("Cc", "Zs") or ch in "\u2028\u2029\u0085" else ch)
    return " ".join("".join(chars).split())


def _inline_text(tokens: list[Any]) -> str:
    return "".join(t.content for t in walk(tokens) if t.type == "text").replace("\u200b", "")


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("context", ["paragraph", "heading", "list", "quote"])
def test_data_renders_as_its_own_text_and_nothing_else(value: str, context: str) -> None:
    safe = text(value)
    assert "\n" not in safe and "\r" not in safe
    doc = {"paragraph": "{}", "heading": "## {} (3, 10.0%)", "list": "- {}: 3", "quote": "> {}"}[context]
    tokens = parser().parse(doc.format(safe))
    types = {t.type for t in walk(tokens)}
    allowed_structure = {"paragraph": set(), "heading": {"heading_open"}, "list": {"bullet_list_open"},
                         "quote": {"blockquote_open"}}[context]
    assert not (types & FORBIDDEN) - allowed_structure, (value, safe, types)
    assert sum(t.type.endswith("_open") and t.type != "paragraph_open" for t in tokens) <= 2, (value, tokens)
    visible = _inline_text(tokens)
    suffix = {"paragraph": "", "heading": " (3, 10.0%)", "list": ": 3", "quote": ""}[context]
    assert visible.strip() == (_expected_visible(value) + suffix).strip(), (value, safe, visible)
    # Nothing a linkifying renderer (GitHub's autolink extension) would turn into a link.
    raw_text = "".join(t.content for t in walk(tokens) if t.type == "text")
    assert not re.search(r"(?i)[a-z][a-z0-9+.-]*://|\bwww\.|[A-Za-z0-9._%+-]@[A-Za-z0-9-]+\.", raw_text), raw_text


def test_a_table_of_hostile_values_keeps_one_row_per_value_and_four_cells() -> None:
    lines = ["| Theme | Responses | Share | Keywords |", "|---|---:|---:|---|"]
    for i, value in enumerate(HOSTILE):
        lines.append(f"| {text(value)} | {i} | 1.0% | {text(value[::-1])} |")
    tokens = parser().parse("\n".join(lines) + "\n")
    types = {t.type for t in walk(tokens)}
    assert not (types & FORBIDDEN) - {"table_open"}, types
    body = [t for t in tokens if t.type == "tr_open"]
    assert len(body) == len(HOSTILE) + 1, "a value ended its row or started another"  # + the header row
    cells: list[list[str]] = []
    row: list[str] = []
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline":
            row.append(_inline_text([t]))
        elif t.type == "tr_close":
            cells.append(row)
    assert all(len(r) == 4 for r in cells)
    for value, r in zip(HOSTILE, cells[1:], strict=True):
        assert r[0] == _expected_visible(value), (value, r)


def test_text_is_idempotent_in_what_it_shows() -> None:
    # Escaping twice shows the escaped text literally: callers must escape once, at the edge.
    assert text("a*b") == "a\\*b"
    assert text(None) == ""
    assert text(42) == "42"
