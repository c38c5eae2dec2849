"""The thematic Markdown report, parsed with a CommonMark parser (markdown-it-py): respondents' texts, LLM labels
and codebook names cannot inject HTML, links, images or rows (pipelines/thematic/mdsafe.py; issue 12)."""

from __future__ import annotations

from typing import Any

from pipelines.thematic.render import render_md
from tests.support.markdown_tokens import parser, table_rows, walk

EVIL = [
    "<script>alert(1)</script>", "<iframe src=//evil.example></iframe>", "[x](javascript:alert(1))",
    "![t](https://tracker.example/p.png)", "line\r| forged | row | 1 | 2 |\r\n|---|---|---|---|", "<b>bold</b>",
    "https://evil.example/a www.evil.example me@evil.example", "# heading", "- list", "`code`",
]


def _doc() -> dict[str, Any]:
    themes = [
        {"id": f"t{i}", "label": label, "count": 3, "share": 0.1, "keywords": [label, "kw<i>"],
         "description": f"{label} described {label}", "quotes": [{"text": label}, {"text": "plain quote"}]}
        for i, label in enumerate(EVIL)
    ]
    return {
        "run": {"counts": {"responses": 30, "usable": 30, "other": 0, "unusable": {"near_duplicate": 1}},
                "theme_count": {"explanation": "<img src=x onerror=alert(1)> [why](javascript:x)",
                                "confidence_label": "high", "confidence": 0.9},
                "llm": {"used": True, "model": "<model>"}, "embedding_model": {"name": "[m](http://x)"}},
        "themes": themes,
        "levels": {"broad": "parents"},
        "parents": [{"id": "p0", "label": "<svg onload=x>", "count": 9, "share": 0.3, "children": ["t0", "t1"]},
                    {"id": "p1", "label": "ok\rbroke", "count": 3, "share": 0.1, "children": ["t2"]}],
        "subthemes": [{"parent": "t0", "label": "[sub](javascript:y)", "count": 1, "share": 0.03}],
        "seed_themes": [{"name": name, "count": 1, "share": 0.01} for name in EVIL],
    }


def test_report_has_no_html_link_or_image_from_data_and_one_row_per_theme() -> None:
    doc = _doc()
    ctype, body = render_md(doc)
    assert ctype.startswith("text/markdown")
    text = body.decode()
    assert "\r" not in text
    tokens = parser().parse(text)
    kinds = {t.type for t in walk(tokens)}
    assert not {k for k in kinds if k.startswith("html_")}, kinds
    assert "link_open" not in kinds and "image" not in kinds, kinds
    # Tables: broad themes, themes and the codebook, each with one body row per entry and no extra cells.
    tables = table_rows(tokens)
    assert [len(r) for r in tables] == [len(doc["parents"]), len(doc["themes"]), len(doc["seed_themes"])], tables
    assert all(c == 4 for c in tables[0] + tables[1]) and all(c == 3 for c in tables[2]), tables
    # Headings: the report's own, one per theme, none from data.
    h2 = [t for t in tokens if t.type == "heading_open" and t.tag == "h2"]
    h1 = [t for t in tokens if t.type == "heading_open" and t.tag == "h1"]
    assert len(h1) == 1 and len(h2) == 1 + len(doc["themes"]) + 2, (len(h1), len(h2))  # broad, themes, codebook, not analysed
    # The data are still there, as text.
    visible = "".join(t.content for t in walk(tokens) if t.type == "text").replace("\u200b", "")
    assert "<script>alert(1)</script>" in visible and "[x](javascript:alert(1))" in visible


def _counted(summary: bool) -> dict[str, Any]:
    doc = _doc()
    s = "10 themes in 2 groups; the data also support 17 themes."
    doc["run"]["theme_count"] = {"criterion": "fine", "confidence_label": "medium", "confidence": 0.59,
                                 "alternatives": [17], "explanation": f"{s} Why: a fine level." if summary else "why",
                                 **({"summary": s} if summary else {})}
    return doc


def test_the_report_names_the_other_readings_of_the_count_once() -> None:
    # "Theme count confidence: medium (0.59). Other readings the data support about as well: 17 themes." stood
    # above "Theme count: 10 themes in 2 groups; the data also support 17 themes.": the 17 twice. The summary
    # (schema 1.2) names them; a result without one (schema 1.1) keeps them on the confidence line.
    from thematiq_cli.render import themes_table

    md = render_md(_counted(True))[1].decode()
    assert md.count("17 themes") == 1 and "Theme count confidence: medium" in md
    assert "Other readings" in render_md(_counted(False))[1].decode()
    # The CLI's copy of the line (thematiq result), and the explanation it prints below.
    assert themes_table(_counted(True)).count("17") == 1
    assert "other readings: 17 themes" in themes_table(_counted(False))
