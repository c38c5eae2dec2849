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
