"""Recoding a wave against the earlier one's codebook (``params.compare_to``, ``baseline.carry_over``).

The carried-over document is pinned byte for byte (as ``json.dumps`` stores it) on a hand-built result that has
every case the recoding distinguishes: an earlier theme fed by one discovered theme, one fed only from "other",
a discovered theme kept as new (fresh id, its secondary reference following it), a response recoded to other,
a code naming no earlier theme, an earlier theme no response is coded to (gone), and an unusable response left
as it was; with and without the earlier instrument's counts, families and confidences. The references in
``data/carry_over_*.json`` were written by the dict-rewriting ``carry_over`` before it worked on the model, so
this test holds the refactor to the same output. Regenerated once since (2026-12-04), when a response began to count in
each of its themes (t6, a new theme with a secondary reference following it, counts 3, was 2), and again
(2026-12-06) when ``run.counts.themed``/``other`` began to follow the recoding (themed 7 -> 6, other 1 -> 2: they
kept this run's own clustering's counts, which no assignment agreed with), and again (2026-12-08) when an earlier
theme's keywords, key phrases and missing description began to come from its own members in this wave
(``own_words``; they were the discovered theme's most of its members came from, or the earlier wave's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from pipelines.thematic import baseline, waves
from pipelines.thematic.result import ThematicResult

DATA = Path(__file__).parent / "data"


def _theme(tid: str, label: str, count: int, quotes: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": tid, "label": label, "description": f"about {label}", "keywords": [label, "word"], "count": count,
            "share": round(count / 8, 4), "quotes": [{"response_id": q, "text": f"text {q}"} for q in quotes],
            "parent": None, "labelled_by": "keywords", "merged_from": [], "key_phrases": [label], "subthemes": [],
            **extra}


def _assignment(rid: str | int, theme: str | None, *more: str, **extra: Any) -> dict[str, Any]:
    refs = [{"theme_id": t, "confidence": round(0.8 - 0.1 * n, 4)} for n, t in enumerate([theme, *more]) if t is not None]
    out: dict[str, Any] = {"response_id": rid, "bucket": "theme" if refs else "other", "themes": refs}
    if refs:
        out["broad"], out["fine"] = refs[0]["theme_id"], None
    return {**out, **extra}


_FEEL = {"positive": 1, "neutral": 0, "negative": 0, "mean": 0.5}


def _result() -> ThematicResult:
    """This wave as its run built it: discovered themes d1 (4), d2 (2), d3 (1), one other, one unusable."""
    assignments = [
        _assignment("r1", "t1"), _assignment("r2", "t1"), _assignment("r3", "t1"),
        _assignment("r4", "t1", "t2"),  # a secondary theme (multi_label): follows t2 where t2 goes
        _assignment("r5", "t2"), _assignment(6, "t2"),  # an int id stays an int
        _assignment("r7", "t3"),
        _assignment("r8", None, sentiment={"label": "negative", "score": -0.5}),  # other: no broad / fine keys
        {"response_id": "r9", "bucket": "unusable", "themes": [], "reason": "empty"},
    ]
    doc = {
        "schema_version": "1.2",
        "themes": [_theme("t1", "delivery", 4, ["r1", "r2", "r4"], sentiment=_FEEL), _theme("t2", "refund", 2, ["r5", 6],
                   sentiment=_FEEL), _theme("t3", "app", 1, ["r7"])],
        "parents": [],
        "subthemes": [{"id": "t1.1", "parent": "t1", "label": "late", "description": "", "keywords": ["late"],
                       "count": 2, "share": 0.25}],
        "levels": {"broad": "themes", "fine": "subthemes", "broad_count": 3, "fine_count": 1},
        "assignments": assignments,
        "run": {
            "pipeline": "thematic", "pipeline_version": "1.2.0", "embedding_model": {"name": "words"},
            "params": {"compare_to": "job-then"}, "timings_seconds": {"clean": 0.1},
            "counts": {"responses": 9, "usable": 8, "themed": 7, "other": 1, "unusable": {"empty": 1},
                       "pii_redacted": {}},
            "theme_count": {"criterion": "fixed", "explanation": "fixed", "scores": [], "k": 3},
            "llm": {"mode": "off", "used": False, "model": None, "calls": 0, "cached_calls": 0, "prompt_tokens": 0,
                    "completion_tokens": 0, "cost_usd": 0.0},
            "resumed_stages": [],
        },
        "sentiment": {"source": "lexicon", "scored": 8},
    }
    return ThematicResult.model_validate(doc)


def _code(theme_id: str, x: list[float], count: int) -> dict[str, Any]:
    v = np.array(x, dtype=np.float32)
    return {"theme_id": theme_id, "centroid": waves.pack(v / np.linalg.norm(v)), "radius": 0.5, "count": count}


BASELINE: dict[str, Any] = {
    "job_id": "job-then",
    "n": 10,
    "themes": [
        {"id": "t1", "label": "Delivery times", "description": "late and early couriers", "keywords": ["late"],
         "count": 4, "texts": ["late again"]},
        {"id": "t2", "label": "Courier manners", "description": "", "keywords": ["rude"], "count": 3, "texts": []},
        {"id": "t5", "label": "Packaging", "description": "boxes", "keywords": ["box", "tape"], "count": 2,
         "texts": []},
        {"id": "t3", "label": "Prices", "description": "cost", "keywords": ["price"], "count": 1, "texts": []},
    ],
    # Delivery times and courier manners are near: one family; the others are alone.
    "instrument": {"encoder": "words@x", "floor": 0.3, "n": 10,
                   "codes": [_code("t1", [1, 0, 0], 4), _code("t2", [0.99, 0.14, 0], 3), _code("t5", [0, 1, 0], 2),
                             _code("t3", [0, 0, 1], 1)]},
}

#: Response id -> earlier theme ("" other, None: stays in its discovered theme, which is new).
CODED: dict[str, str | None] = {"r1": "t1", "r2": "t1", "r3": "t9",  # t9: no earlier theme (a guard): other
                                "r4": "t2", "r5": None, "6": None, "r7": "", "r8": "t5"}
QUOTES = {rid: f"quote {rid}" for rid in ("r1", "r2", "r3", "r4", "r5", "6", "r7", "r8")}


def _own_words(groups: list[list[str]]) -> list[baseline.Words]:
    """A stand-in for ``document.own_words`` that says which members (and which other groups) it was given."""
    others = " | ".join(" ".join(g) for g in groups)
    return [baseline.Words([f"said by {' '.join(g)}"], [f"against {others}"], f"about {' '.join(g)}") for g in groups]


def _carry(result: ThematicResult, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The carried-over document (as stored) and its comparison's earlier-wave part."""
    carried, comparison = baseline.carry_over(result, CODED, BASELINE, QUOTES, own_words=_own_words, **kw)
    return carried.document(), comparison


CASES = {
    "inherit": {"then_counts": {"t1": 5, "t2": 2, "t5": 2, "t3": 0}, "confidence": {"r1": 0.91234, "r8": 0.41}},
    "discover": {},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_carried_over_document_is_the_pinned_one(case: str) -> None:
    doc, comparison = _carry(_result(), **CASES[case])
    got = json.dumps({"document": doc, "comparison": comparison}, ensure_ascii=False, indent=1)
    assert got == (DATA / f"carry_over_{case}.json").read_text(encoding="utf-8")


def test_earlier_themes_keep_their_ids_and_names_new_ones_get_fresh_ids_and_unused_ones_are_gone() -> None:
    doc, comparison = _carry(_result(), **CASES["inherit"])
    themes = {t["id"]: t for t in doc["themes"]}
    assert set(themes) == {"t1", "t2", "t5", "t6"}  # t3 (Prices) got nobody: gone; d2 kept as new t6
    assert themes["t1"]["label"] == "Delivery times" and themes["t6"]["label"] == "refund"
    assert themes["t2"]["description"] == "about r4"  # no earlier description: this wave's, of its members
    by_id = {str(a["response_id"]): a for a in doc["assignments"]}
    assert by_id["r4"]["themes"] == [{"theme_id": "t2", "confidence": 0.8}, {"theme_id": "t6", "confidence": 0.7}]
    assert by_id["r3"]["bucket"] == by_id["r7"]["bucket"] == "other" and by_id["r9"]["bucket"] == "unusable"
    assert by_id["r1"]["themes"][0]["confidence"] == 0.9123
    assert doc["parents"] == doc["subthemes"] == [] and doc["levels"]["fine"] == "themes"
    assert [t["count"] for t in doc["themes"]] == sorted((t["count"] for t in doc["themes"]), reverse=True)
    assert comparison["then"]["t1"] == {"label": "Delivery times", "count": 5, "family": "t1"}
    assert "family" not in comparison["then"]["t5"]


def test_a_wrong_value_from_the_earlier_codebook_fails_where_its_theme_is_built() -> None:
    """The recoding builds each theme on the model, so a bad earlier theme is a ``Theme`` error on its field;
    a document rewritten as a dict and validated at the end would fail later, as a place in the whole result."""
    bad = {**BASELINE, "themes": [{**BASELINE["themes"][0], "label": None}, *BASELINE["themes"][1:]]}
    with pytest.raises(ValidationError) as err:
        baseline.carry_over(_result(), CODED, bad, QUOTES, own_words=_own_words)
    assert err.value.title == "Theme"
    assert [e["loc"] for e in err.value.errors()] == [("label",)]


def test_the_recoding_leaves_the_result_it_was_given_as_it_was() -> None:
    """The parts are copies (``with_``): pydantic models are mutable, and an in-place recoding would change the
    result the caller still holds."""
    result = _result()
    before = json.dumps(result.document())
    baseline.carry_over(result, CODED, BASELINE, QUOTES, own_words=_own_words, **CASES["inherit"])
    assert json.dumps(result.document()) == before


def test_a_compared_job_states_the_codebook_count_not_its_own_clusterings() -> None:
    """The themes of a compared job are the earlier codebook's (and new ones): before, run.theme_count kept this
    wave's own reading, and the Markdown, CLI and dashboard said "2 themes; the data also support 5, confidence
    low" above a table of 4 themes."""
    own = {"criterion": "silhouette", "explanation": "2 themes; the data also support 5 themes. Confidence low. Why: curve",
           "summary": "2 themes; the data also support 5 themes. Confidence low.", "scores": [], "k": 2,
           "k_chosen": 2, "confidence": 0.1, "confidence_label": "low", "alternatives": [5]}
    result = _result()
    result = result.with_(run=result.run.with_(theme_count=own))
    doc, _ = _carry(result, **CASES["inherit"])
    tc = doc["run"]["theme_count"]
    assert tc["k"] == len(doc["themes"]) == 4
    assert tc["summary"] == "4 themes: the compared job's codebook and 1 new (compare_to job-then), so both waves are " \
                            "counted on one instrument."
    assert tc["criterion"] == "fixed" and tc["confidence_label"] is None and tc["alternatives"] == []
    assert tc["explanation"].endswith("this wave's own clustering (not shown) read: " + own["summary"])


def test_an_earlier_theme_says_what_its_own_members_say_here_and_a_new_one_keeps_its_words() -> None:
    """Keywords and key phrases of an earlier theme are this wave's, of its own members, scored against every
    theme of the recoded wave: before, t1 showed the keywords of the discovered theme most of its members came
    from (words its members may not hold), t5 (coded only from this run's other) the earlier wave's."""
    doc, _ = _carry(_result(), **CASES["inherit"])
    themes = {t["id"]: t for t in doc["themes"]}
    groups = "r5 6 | r1 r2 | r4 | r8"  # t6 (new), t1, t2, t5: every theme of the wave, largest first
    assert {tid: (t["keywords"], t["key_phrases"]) for tid, t in themes.items() if tid != "t6"} == {
        "t1": (["said by r1 r2"], [f"against {groups}"]), "t2": (["said by r4"], [f"against {groups}"]),
        "t5": (["said by r8"], [f"against {groups}"])}
    assert themes["t6"]["keywords"] == ["refund", "word"] and themes["t6"]["key_phrases"] == ["refund"]
    assert themes["t1"]["description"] == "late and early couriers"  # the earlier codebook's, where it has one
