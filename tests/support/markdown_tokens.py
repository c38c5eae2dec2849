"""Parse rendered Markdown as a CommonMark reader would (markdown-it-py, tables on), for the inertness tests."""

from __future__ import annotations

from typing import Any

import pytest

markdown_it = pytest.importorskip("markdown_it")


def parser() -> Any:
    return markdown_it.MarkdownIt("commonmark").enable("table")


def walk(tokens: list[Any]) -> list[Any]:
    """Every token, the inline children included, in document order."""
    out = []
    for t in tokens:
        out.append(t)
        if t.children:
            out.extend(walk(t.children))
    return out


def table_rows(tokens: list[Any]) -> list[list[int]]:
    """Per table, the number of cells of each body row: one list per table, one entry per row."""
    tables: list[list[int]] = []
    in_body, cells = False, 0
    for t in tokens:
        if t.type == "table_open":
            tables.append([])
        elif t.type == "tbody_open":
            in_body = True
        elif t.type == "tbody_close":
            in_body = False
        elif t.type == "tr_open":
            cells = 0
        elif t.type in ("td_open", "th_open"):
            cells += 1
        elif t.type == "tr_close" and in_body:
            tables[-1].append(cells)
    return tables
