"""A codebook edit on a compared wave (``compare_to``) keeps the comparison's tests like for like (review43)."""

from __future__ import annotations

import copy
from typing import Any

from pipelines.thematic import codebook, derive
from pipelines.thematic.edit import edit_result
from pipelines.thematic.render import render_md
from pipelines.thematic.result import ThematicResult
from tests.support.synthetic_result import synthetic_job


def _unchanged_wave(n: int = 600) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A result compared with an earlier wave whose every theme had the same count: nothing changed."""
    items, doc = synthetic_job(n, themes=4, seed=5, impact=False)
    codebook._recount(doc)  # the synthetic counts are of primary themes only; an edit counts every theme
    usable = sum(1 for a in doc["assignments"] if a["bucket"] != "unusable")
    then = {t["id"]: {"label": t["label"], "count": t["count"]} for t in doc["themes"]}
    then["t1"]["family"] = then["t2"]["family"] = "f1"
    doc["comparison"] = {**derive.compare("e" * 28, then, usable, doc), "mode": "inherit", "instrument": "centroids"}
    ThematicResult.model_validate(doc)
    assert not any(r["significant"] for r in doc["comparison"]["themes"])
    return items, doc


def _rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["theme_id"]: r for r in doc["comparison"]["themes"]}


def test_a_split_theme_is_not_tested_against_the_count_it_had_before_the_split() -> None:
    # The earlier wave's count of a theme covered what a split now calls two themes: tested against it, the source
    # "fell" (60 -> 24 answers of an unchanged wave, q 0.0001, significant) and the split-off was new, untested.
    items, doc = _unchanged_wave()
    edited = edit_result(doc, {"edits": [{"op": "split", "theme": "t1", "keyword": "late", "label": "Late"}]}, items)
    rows = _rows(edited)
    new = next(t for t, r in rows.items() if r["status"] == "new")
    assert rows["t1"]["count_now"] + rows[new]["count_now"] == rows["t1"]["count_then"]
    assert rows["t1"]["change"] is None and rows["t1"]["p"] is None and not rows["t1"]["significant"], rows["t1"]
    assert edited["comparison"]["then"]["t1"]["split_into"] == [new]
    assert not any(r["significant"] for r in rows.values())
    # The family of the split theme is tested with the split-off pooled back in: unchanged, as it is.
    family = next(g for g in edited["comparison"]["groups"] if g["family"] == "f1")
    before = next(g for g in doc["comparison"]["groups"] if g["family"] == "f1")
    assert (family["count_then"], family["count_now"], family["p"]) == (before["count_then"], before["count_now"],
                                                                       before["p"])
    assert "split: not tested" in render_md(edited)[1].decode()
    # Merged back, the theme is whole again and tested as before.
    merged = edit_result(edited, {"edits": [{"op": "merge", "themes": ["t1", new]}]}, items)
    assert _rows(merged)["t1"]["p"] == _rows(doc)["t1"]["p"] and not merged["comparison"]["then"]["t1"].get("split_into")


def test_a_split_off_merged_into_another_earlier_theme_leaves_both_untested() -> None:
    items, doc = _unchanged_wave()
    edited = edit_result(doc, {"edits": [{"op": "split", "theme": "t1", "keyword": "late", "label": "Late"}]}, items)
    new = next(t for t, r in _rows(edited).items() if r["status"] == "new")
    moved = edit_result(copy.deepcopy(edited), {"edits": [{"op": "merge", "themes": ["t3", new]}]}, items)
    rows = _rows(moved)
    # t3 now holds answers the earlier wave counted under t1: neither is measured like for like.
    assert rows["t1"]["p"] is None and rows["t3"]["p"] is None
    assert moved["comparison"]["then"]["t1"]["split_into"] == ["t3"]
    assert rows["t4"]["p"] is not None


def test_a_deleted_theme_leaves_both_waves_not_a_significant_fall_in_this_one() -> None:
    # A delete says the theme is no theme: the instrument codes its answers to no theme in this wave and the next
    # (docs/thematic.md, "exact, in both waves"). The comparison kept its earlier count, so an unchanged wave showed
    # it "gone", -25.8 pts, q 0, significant, and its family falling as significantly: the edit's change, not the
    # answers'. As a merged-away theme, it leaves "then" too.
    items, doc = _unchanged_wave()
    edited = edit_result(doc, {"edits": [{"op": "delete", "theme": "t2"}]}, items)
    rows = _rows(edited)
    assert "t2" not in rows and "t2" not in edited["comparison"]["then"] and edited["comparison"]["gone"] == []
    assert not any(r["significant"] for r in rows.values()) and not any(
        g["significant"] for g in edited["comparison"]["groups"])
    assert edited["comparison"]["n_then"] == doc["comparison"]["n_then"]


def test_a_split_never_reuses_the_id_of_a_deleted_theme() -> None:
    # _next_id skipped the ids the document still names; a deleted theme's id was free again, so a split after a
    # delete could call its new theme t2, the id the edit log (and a reader's notes) give the deleted one.
    items, doc = _unchanged_wave()
    keep = {"t1"}
    for a in doc["assignments"]:
        a["themes"] = [r for r in a.get("themes") or [] if r["theme_id"] in keep or r["theme_id"] == "t2"]
        if not a["themes"] and a["bucket"] == "theme":
            a["bucket"] = "other"
    doc["themes"] = [t for t in doc["themes"] if t["id"] in ("t1", "t2")]
    doc.pop("comparison")
    for a in doc["assignments"]:
        a.pop("broad", None), a.pop("fine", None)
    doc.pop("subthemes", None), doc.pop("levels", None)
    for t in doc["themes"]:
        t.pop("subthemes", None)
    codebook._recount(doc)
    out = codebook.apply_edits(doc, codebook.EDITS.validate_python([
        {"op": "delete", "theme": "t2"}, {"op": "split", "theme": "t1", "keyword": "late", "label": "Late"}]),
        {str(it["id"]): it["text"] for it in items})
    assert {t["id"] for t in out["themes"]} == {"t1", "t3"}
