"""The Markdown report's sentiment, breakdown and comparison tables stay inert when labels, metadata keys and
metadata values are hostile (issue 15; the rules are pipelines/thematic/mdsafe.py)."""

from __future__ import annotations

from typing import Any

from pipelines.thematic.render import render_md
from tests.support.markdown_tokens import parser, table_rows, walk

EVIL = ["<script>alert(1)</script>", "[x](javascript:alert(1))", "![t](https://tracker.example/p.png)",
        "a | b | c", "line\r\n|---|---|", "https://evil.example"]


def _cell(tid: str, significant: bool) -> dict[str, Any]:
    return {"theme_id": tid, "count": 3, "share": 0.3, "lift": 3.0, "p": 0.001, "q": 0.01, "significant": significant}


def _doc() -> dict[str, Any]:
    themes = [{"id": f"t{i}", "label": label, "count": 3, "share": 0.1, "keywords": [], "description": "", "quotes": [],
               "sentiment": {"positive": 1, "neutral": 1, "negative": 1, "mean": -0.25}} for i, label in enumerate(EVIL)]
    groups = [{"value": v, "n": 30, "themes": [_cell(t["id"], i == 0) for t in themes]} for i, v in enumerate(EVIL)]
    rows = [{"theme_id": t["id"], "label": t["label"], "share_then": 0.1, "share_now": 0.3, "change": 0.2, "p": 0.01,
             "q": 0.02, "significant": True, "count_then": 1, "count_now": 3, "status": "kept"} for t in themes]
    return {
        "run": {"counts": {"responses": 30, "usable": 30, "other": 0, "unusable": {}}, "llm": {},
                "embedding_model": {"name": "m"}},
        "themes": themes,
        "sentiment": {"source": "metadata", "field": EVIL[0]},
        "breakdowns": [{"field": EVIL[1], "kind": "categorical", "groups": groups}],
        "comparison": {"job_id": "a" * 28, "n_then": 10, "n_now": 30, "then": {}, "themes": rows, "new": [], "gone": []},
    }


def test_insight_tables_have_one_row_per_theme_and_nothing_active_from_data() -> None:
    doc = _doc()
    text = render_md(doc)[1].decode()
    tokens = parser().parse(text)
    kinds = {t.type for t in walk(tokens)}
    assert not {k for k in kinds if k.startswith("html_")} and "link_open" not in kinds and "image" not in kinds
    tables = table_rows(tokens)
    n = len(doc["themes"])
    # themes, sentiment, the breakdown (one column per group) and the comparison: a row per theme each.
    assert [len(t) for t in tables] == [n, n, n, n], tables
    assert set(tables[2]) == {1 + len(EVIL)} and set(tables[1]) == {5} and set(tables[3]) == {5}
    visible = "".join(t.content for t in walk(tokens) if t.type == "text").replace("\u200b", "")
    assert "<script>alert(1)</script>" in visible and "30%" in visible
    # Significant cells are bold: the first group's column and every comparison row, plus the two legends.
    assert sum(1 for t in walk(tokens) if t.type == "strong_open") == n + n + 2


def test_a_change_in_share_is_stated_in_percentage_points() -> None:
    # 10% then, 30% now: "+20.0 pts", never "+20.0%" (which reads as a relative change; it is +200 %).
    text = render_md(_doc())[1].decode()
    assert "+20.0 pts" in text and "+20.0%" not in text
    assert "Then 10 usable responses, now 30" in text  # the shares' denominators, not the responses submitted


def test_a_themes_nps_has_the_impact_tables_rounding() -> None:
    # One theme, one number: the sentiment table printed NPS -95 where the impact table printed -95.2.
    doc = _doc()
    doc["sentiment"] = {"source": "metadata", "field": "nps", "scale": "score10"}
    for t in doc["themes"]:
        t["sentiment"] = {"positive": 1, "neutral": 0, "negative": 41, "mean": -0.9524, "nps": -95.2381}
    doc["impact"] = {"key": "nps", "scale": "nps", "overall": -63.1, "n": 401, "themes": [
        {"theme_id": "t0", "label": "a", "n": 42, "score": -95.2381, "impact": -3.6, "ci_low": -5.3, "ci_high": -2.0}]}
    text = render_md(doc)[1].decode()
    assert text.count("| -95.2 |") == len(doc["themes"]) + 1 and "| -95 |" not in text


def test_the_impact_legend_says_its_intervals_are_not_corrected_for_the_number_of_themes() -> None:
    # The breakdowns and the waves control false discoveries (BH); the impact intervals are per theme. With scores
    # independent of themes (20 themes, 400 responses) 77 % of runs had at least one theme bold, unexplained.
    doc = _doc()
    doc["impact"] = {"key": "nps", "scale": "nps", "overall": -63.1, "n": 401, "themes": [
        {"theme_id": f"t{i}", "label": "a", "n": 42, "score": -95.2, "impact": -3.6, "ci_low": -5.3, "ci_high": -2.0}
        for i in range(3)]}
    text = render_md(doc)[1].decode()
    assert "not corrected for the 3 themes" in text


def test_the_sentiment_section_names_the_ratings_scale_and_whether_it_was_declared() -> None:
    doc = _doc()
    for t in doc["themes"]:
        t["sentiment"] = {"positive": 0, "neutral": 0, "negative": 3, "mean": -1.0, "nps": -100.0}
    doc["sentiment"] = {"source": "metadata", "field": "ltr", "scale": "score10", "rating_range": "0-10",
                        "scale_from": "declared"}
    assert "by the rating field ltr (0–10, as NPS groups, declared)" in render_md(doc)[1].decode()
    doc["sentiment"] = {"source": "metadata", "field": "ltr", "scale": "stars", "rating_range": "1-5",
                        "scale_from": "inferred"}
    assert "by the rating field ltr (1–5 stars, inferred from the values)" in render_md(doc)[1].decode()
    doc["sentiment"] = {"source": "metadata", "field": "ltr", "scale": "stars"}  # a 1.3 result: no scale_from
    assert "by the rating field ltr (1–5 stars) (source" in render_md(doc)[1].decode()


def test_a_small_group_is_marked_and_the_single_label_note_is_printed() -> None:
    # Schema 1.5 (stats44): a group of a handful of answers is not tested; the report says "small n" at its column and
    # in the legend. With one theme per response the impact table carries the result's note.
    doc = _doc()
    doc["breakdowns"][0]["testing"] = {"procedure": "bh", "weights": None, "alpha": 0.05, "reference": "BH",
                                       "exact_below": 5.0, "min_n": 10}
    doc["breakdowns"][0]["groups"][1].update(n=3, small_n=True)
    doc["impact"] = {"key": "nps", "scale": "nps", "overall": -63.1, "n": 401, "single_label": True,
                     "note": "One theme per response: relative to the other themes together.", "themes": [
                         {"theme_id": "t0", "label": "Fees", "n": 42, "score": -95.2, "impact": -3.6, "ci_low": -5.3,
                          "ci_high": -2.0},
                         {"theme_id": "t1", "label": "Food", "n": 60, "score": -40.0, "impact": 1.2, "ci_low": 0.2,
                          "ci_high": 2.2, "explained_by": ["t0"]}]}
    text = render_md(doc)[1].decode()
    # Fees is sure (bold); Food's interval excludes 0 only against Fees: not bold, and the report says so.
    assert "| **-3.6** |" in text and "| +1.2 *(against Fees only)* |" in text
    assert text.count(", small n)") == 1 and "*small n*: the group or the rest has fewer than 10 responses" in text
    assert "*Note*: One theme per response: relative to the other themes together." in text
    plain = _doc()
    assert "small n" not in render_md(plain)[1].decode()


def test_a_breakdown_table_lists_every_theme_not_the_first_30() -> None:
    # review44: the report's breakdown tables stopped after 30 themes without a word (39 themes: 9 of them in no
    # segment table, while the dashboard, the CLI and the xlsx list every one).
    themes = [{"id": f"t{i}", "label": f"Theme {i}", "count": 3, "share": 0.01, "keywords": [], "description": "",
               "quotes": []} for i in range(1, 40)]
    groups = [{"value": v, "n": 30, "themes": [_cell(t["id"], False) for t in themes]} for v in ("free", "pro")]
    doc = {"run": {"counts": {"responses": 400, "usable": 400, "other": 0, "unusable": {}}, "llm": {},
                   "embedding_model": {"name": "m"}},
           "themes": themes, "breakdowns": [{"field": "plan", "kind": "categorical", "groups": groups}]}
    text = render_md(doc)[1].decode()
    table = text.split("## By plan", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Theme |")]
    assert [r.split(" | ", 1)[0].removeprefix("| ") for r in rows] == [t["label"] for t in doc["themes"]]


def test_the_count_in_words_says_what_codebook_edits_left() -> None:
    # review44: after a merge the report said "**Theme count:** 8 themes, with 16 sub-themes under them." above a
    # table of 6 themes; the summary is the analysis's count, and what the edits left is said beside it.
    from pipelines.thematic.edit import edit_result
    from tests.support.synthetic_result import synthetic_job

    items, doc = synthetic_job(200, themes=8, seed=2, impact=False)
    summary = "8 themes, with 16 sub-themes under them."
    doc["run"]["theme_count"] = {"criterion": "fixed", "scores": [], "summary": summary,
                                 "explanation": f"{summary} Why: num_themes fixes the count"}
    renamed = edit_result(doc, {"edits": [{"op": "rename", "theme": "t1", "label": "Renamed"}]}, items)
    assert f"**Theme count:** {summary}\n" in render_md(renamed)[1].decode()
    merged = edit_result(renamed, {"edits": [{"op": "merge", "themes": ["t1", "t2", "t3"]}]}, items)
    fine = merged["levels"]["fine_count"]
    assert len(merged["themes"]) == 6 and fine > 6
    assert (f"**Theme count:** {summary} After 1 codebook edit (merge, split or delete): 6 themes, with {fine} "
            "sub-themes under them.\n") in render_md(merged)[1].decode()
