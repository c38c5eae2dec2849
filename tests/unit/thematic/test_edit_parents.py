"""A themes edit in a result whose broad level is parents (more than 12 themes) leaves no empty parent and no
response under a parent it left (audit41): deleting every child of a parent kept the parent, with no children, so
``levels.broad_count`` (review41's recount) still counted it and the dashboard showed an empty broad theme; and the
deleted themes' responses, now ``other``, kept ``broad`` = that parent, so the exports listed them under it."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic.edit import edit_result
from tests.support.synthetic_result import synthetic_job


def _with_parents() -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    items, doc = synthetic_job(40, seed=4, impact=False)
    ids = [t["id"] for t in doc["themes"]]
    half = len(ids) // 2
    parent = {i: ("p1" if k < half else "p2") for k, i in enumerate(ids)}
    doc["parents"] = [{"id": p, "label": p.upper(), "keywords": [], "count": 0,
                       "children": [i for i in ids if parent[i] == p]} for p in ("p1", "p2")]
    doc["subthemes"] = []
    for t in doc["themes"]:
        t["subthemes"] = []
    doc["levels"] = {"broad": "parents", "fine": "themes", "broad_count": 2, "fine_count": len(ids)}
    for a in doc["assignments"]:
        tid = a["themes"][0]["theme_id"] if a.get("themes") else None
        a["fine"], a["broad"] = tid, parent.get(tid) if tid else None
    return items, doc, ids


def test_deleting_every_child_of_a_parent_drops_the_parent() -> None:
    items, doc, _ids = _with_parents()
    gone = doc["parents"][1]["children"]
    out = edit_result(doc, {"edits": [{"op": "delete", "theme": i} for i in gone]}, items)
    assert [p["id"] for p in out["parents"]] == ["p1"]
    assert out["levels"]["broad_count"] == 1
    assert not [a for a in out["assignments"] if a.get("broad") == "p2"]


def test_a_response_left_with_no_theme_has_no_broad_theme() -> None:
    items, doc, ids = _with_parents()
    out = edit_result(doc, {"edits": [{"op": "delete", "theme": ids[0]}]}, items)
    assert [p["id"] for p in out["parents"]] == ["p1", "p2"]
    for a in out["assignments"]:
        if not a["themes"]:
            assert a.get("broad") is None and a.get("fine") is None, a
    # The others keep theirs.
    assert any(a.get("broad") == "p1" for a in out["assignments"])


def _levels_follow_the_structure(doc: dict[str, Any]) -> None:
    # Every themed response's levels are its primary theme's (a sub-theme may be unknown after an edit: None), and
    # every parent's and sub-theme's count is the number of themed responses at it, as document.py counts them.
    lv = doc["levels"]
    parent_of = {c: p["id"] for p in doc["parents"] for c in p["children"]}
    for a in doc["assignments"]:
        if not a["themes"]:
            assert a.get("broad") is None and a.get("fine") is None, a
            continue
        primary = a["themes"][0]["theme_id"]
        assert a.get("broad") == (parent_of[primary] if lv["broad"] == "parents" else primary), a
        if lv["fine"] == "themes":
            assert a.get("fine") == primary, a
        else:
            assert a.get("fine") is None or a["fine"].partition(".")[0] == primary, a
    for level in (*doc["parents"], *doc["subthemes"]):
        n = sum(1 for a in doc["assignments"] if a["themes"] and level["id"] in (a.get("broad"), a.get("fine")))
        assert level["count"] == n, level["id"]
    assert {t["id"] for t in doc["themes"]} == set(parent_of) or lv["broad"] != "parents"


def _keyword(doc: dict[str, Any], items: list[dict[str, Any]], theme: str) -> str:
    texts = {i["id"]: i["text"] for i in items}
    words = [w.strip(".").lower() for a in doc["assignments"] if a["themes"] and a["themes"][0]["theme_id"] == theme
             for w in texts[a["response_id"]].split()]
    return max(set(words), key=words.count)


@pytest.mark.parametrize("mode", ["parents", "subthemes"])
@pytest.mark.parametrize("edit", ["delete", "merge", "split"])
def test_an_edit_keeps_levels_and_their_counts_true(mode: str, edit: str) -> None:
    if mode == "parents":
        items, doc, ids = _with_parents()
        for p in doc["parents"]:
            p["count"] = sum(1 for a in doc["assignments"] if a["themes"] and a.get("broad") == p["id"])
    else:
        items, doc = synthetic_job(40, seed=4, impact=False)
        ids = [t["id"] for t in doc["themes"]]
        for st in doc["subthemes"]:
            st["count"] = sum(1 for a in doc["assignments"] if a["themes"] and a.get("fine") == st["id"])
    _levels_follow_the_structure(doc)
    edits = {"delete": [{"op": "delete", "theme": ids[0]}],
             "merge": [{"op": "merge", "themes": [ids[1], ids[-1]]}],
             "split": [{"op": "split", "theme": ids[0], "keyword": _keyword(doc, items, ids[0]), "label": "Split"}]}
    out = edit_result(doc, {"edits": edits[edit]}, items)
    _levels_follow_the_structure(out)
