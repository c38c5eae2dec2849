"""Codebook edits (issue 15): assignments and counts follow every rename, merge, split and delete."""

from __future__ import annotations

import pytest

from pipelines.thematic import codebook


def _doc() -> dict:
    texts = {"1": "late delivery again", "2": "delivery was late", "3": "cold food", "4": "refund took weeks",
             "5": "cold pizza and late", "6": "refund please"}
    themes = [
        {"id": "t1", "label": "Late delivery", "description": "", "keywords": ["late"], "count": 2, "share": 0,
         "quotes": [{"response_id": "1", "text": texts["1"]}]},
        {"id": "t2", "label": "Cold food", "description": "", "keywords": ["cold"], "count": 2, "share": 0,
         "quotes": [{"response_id": "3", "text": texts["3"]}, {"response_id": "5", "text": texts["5"]}]},
        {"id": "t3", "label": "Refunds", "description": "", "keywords": ["refund"], "count": 2, "share": 0,
         "quotes": [{"response_id": "4", "text": texts["4"]}]},
    ]
    of = {"1": "t1", "2": "t1", "3": "t2", "5": "t2", "4": "t3", "6": "t3"}
    assignments = [{"response_id": r, "bucket": "theme", "themes": [{"theme_id": t, "confidence": 0.9}]}
                   for r, t in of.items()]
    return {"themes": themes, "assignments": assignments}, texts


def test_merge_moves_assignments_and_counts() -> None:
    doc, _ = _doc()
    out = codebook.apply_edits(doc, codebook.EDITS.validate_python(
        [{"op": "merge", "themes": ["t1", "t2"], "label": "Delivery problems"}]))
    ids = {t["id"]: t for t in out["themes"]}
    assert set(ids) == {"t1", "t3"} and ids["t1"]["count"] == 4 and ids["t1"]["label"] == "Delivery problems"
    assert all(a["themes"][0]["theme_id"] in ("t1", "t3") for a in out["assignments"])
    assert out["edits"][0]["op"] == "merge" and doc["themes"][1]["id"] == "t2"  # the input is not changed


def test_split_by_keyword_and_delete_and_rename() -> None:
    doc, texts = _doc()
    edits = codebook.EDITS.validate_python([
        {"op": "split", "theme": "t2", "keyword": "pizza", "label": "Pizza"},
        {"op": "delete", "theme": "t3"},
        {"op": "rename", "theme": "t1", "label": "Lateness"},
    ])
    out = codebook.apply_edits(doc, edits, texts)
    by_label = {t["label"]: t["count"] for t in out["themes"]}
    assert by_label == {"Lateness": 2, "Cold food": 1, "Pizza": 1}
    others = [a for a in out["assignments"] if a["bucket"] == "other"]
    assert sorted(a["response_id"] for a in others) == ["4", "6"]
    assert [e["op"] for e in out["edits"]] == ["split", "delete", "rename"]


def test_an_edit_of_an_unknown_theme_names_the_field() -> None:
    doc, _ = _doc()
    with pytest.raises(codebook.EditError) as err:
        codebook.apply_edits(doc, codebook.EDITS.validate_python([{"op": "delete", "theme": "t9"}]))
    assert err.value.field == "edits[0].theme"


def test_the_codebook_lists_names_descriptions_keywords_and_examples() -> None:
    doc, _ = _doc()
    book = codebook.codebook(doc)
    assert [c["name"] for c in book] == ["Late delivery", "Cold food", "Refunds"]
    assert book[1]["examples"] == ["cold food", "cold pizza and late"]


def test_a_served_codebook_is_always_valid_as_seed_themes() -> None:
    # "A codebook can be sent back as it is" (params.SeedTheme): a hyphenated token longer than 60 characters is
    # a keyword like any other (keywords.TOKEN_RE has no length bound), and an LLM's label or description has no
    # cap; sent back, such an entry was a 422 naming params.seed_themes[i].keywords[j] (or .name, .description).
    from pipelines.thematic.params import ThematicParams

    doc, _ = _doc()
    long = "state-of-the-art-customer-service-experience-with-the-new-mobile-application"
    doc["themes"][0]["keywords"] = [long, *(f"kw{i}" for i in range(30))]
    doc["themes"][1]["label"] = "A label an LLM wrote at length " * 6
    doc["themes"][2]["description"] = "Long. " * 300
    doc["themes"][2]["quotes"] = [{"response_id": str(i), "text": "q" * 3000} for i in range(12)]
    book = codebook.codebook(doc)
    params = ThematicParams.model_validate({"seed_themes": book})
    assert params.seed_themes is not None and [s.id for s in params.seed_themes] == ["t1", "t2", "t3"]
    assert long not in book[0]["keywords"] and book[0]["keywords"][0] == "kw0"


@pytest.mark.parametrize("copy_text", [
    "the déliveries were late",  # a near copy: equal but for an accent (clean.near_key)
    "the deli\u200bveries were late",  # an exact copy once normalised: a zero-width space inside the word
    "the ｄｅｌｉｖｅｒｉｅｓ were late",  # an exact copy once normalised: full-width letters (NFKC)
])
def test_a_split_moves_a_counted_copy_with_its_first_copy(copy_text: str) -> None:
    # A counted copy (schema 1.4, count_duplicates) is its first copy's coding. A split tested each response's own
    # text as submitted, so a copy that differs from its first copy by an accent, a zero-width space or full-width
    # letters stayed behind in the source theme while its first copy moved: counted in another theme than the
    # answer it copies. The same when only the copy's text holds the keyword: neither may move without the other.
    texts = {"1": "the deliveries were late", "2": copy_text, "3": "late again"}
    doc = {
        "themes": [{"id": "t1", "label": "Late", "description": "", "keywords": ["late"], "count": 3, "share": 1.0,
                    "quotes": [{"response_id": "1", "text": texts["1"]}]}],
        "assignments": [
            {"response_id": "1", "bucket": "theme", "themes": [{"theme_id": "t1", "confidence": 0.9}]},
            {"response_id": "2", "bucket": "theme", "themes": [{"theme_id": "t1", "confidence": 0.9}],
             "reason": "near_duplicate", "duplicate_of": "1"},
            {"response_id": "3", "bucket": "theme", "themes": [{"theme_id": "t1", "confidence": 0.8}]},
        ],
    }
    for keyword, moved in (("deliveries", {"1", "2"}), ("déliveries", set())):
        edit = codebook.EDITS.validate_python([{"op": "split", "theme": "t1", "keyword": keyword, "label": "New"}])
        if not moved:
            with pytest.raises(codebook.EditError):  # only the copy's own text has it: nothing moves
                codebook.apply_edits(doc, edit, texts)
            continue
        out = codebook.apply_edits(doc, edit, texts)
        new = next(t["id"] for t in out["themes"] if t["label"] == "New")
        assert {str(a["response_id"]) for a in out["assignments"] if a["themes"][0]["theme_id"] == new} == moved
        assert {t["label"]: t["count"] for t in out["themes"]} == {"New": 2, "Late": 1}
