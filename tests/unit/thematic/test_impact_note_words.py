"""The one-theme-per-response impact note speaks the views' words (review46u).

The report, the dashboard and ``thematiq impact`` print ``impact.note`` as it is, above a table that marks a theme
whose interval excludes 0 only against a low (or high) theme as "(against X, Y only)" and gives it no * / bold. The
note said such a theme "names them in explained_by and is not marked as sure": a JSON field, and a mark ("sure")
that no view shows. On the drugs.com reviews "Loestrin fe" (-0.03 … -0.00) was such a theme.
"""

from __future__ import annotations

from pipelines.thematic.impact import impact
from pipelines.thematic.render import render_md


def _doc() -> dict[str, object]:
    # Theme c scores far below a and b: one theme per response, so a and b are lifted by c's mirror.
    values = [5] * 30 + [5] * 30 + [1] * 30
    themes_of = [["a"]] * 30 + [["b"]] * 30 + [["c"]] * 30
    themes = [{"id": t, "label": t.upper(), "description": "", "count": 30, "share": 0.33,
               "keywords": [], "quotes": []} for t in "abc"]
    return {"themes": themes, "impact": impact(values, themes_of, themes, key="csat", scale="csat")}


def test_the_note_names_the_mark_the_table_shows() -> None:
    doc = _doc()
    note = str(doc["impact"]["note"])  # type: ignore[index]
    assert "explained_by" not in note and "sure" not in note
    assert "(against those themes only)" in note
    md = render_md(doc)[1].decode()
    assert "explained\\_by" not in md and "explained_by" not in md
