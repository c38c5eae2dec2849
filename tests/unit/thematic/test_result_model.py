"""The result is built as its typed model, part by part, and stored as the bytes a dict would have given.

A stage that writes a part of the wrong type fails in that stage (the part is validated where it is built),
not at the end of the run; the model writes the fields its builder gave, in the order given.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from pipelines.thematic import sentiment as sentiments
from pipelines.thematic import stages
from pipelines.thematic.result import Choice, Quote, ThematicResult, Theme
from tests.support.thematic_data import feedback

from .stage_support import state


def _items() -> list[dict[str, Any]]:
    items, _ = feedback(per_theme=8, seed=1)
    return items


def test_an_insight_stage_writing_a_wrong_type_fails_in_that_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sentiment section naming its model by a number: refused by the insight stage itself (before, a dict
    carried it on through the render stage, and only the check of the finished document found it)."""
    ctx, s = state(_items())
    for stage in stages.STAGES[:5]:
        stage(ctx, s)
    monkeypatch.setattr(sentiments, "LEXICON_MODEL", 42)
    with pytest.raises(ValidationError, match="model"):
        stages.insight_stage(ctx, s)
    assert s.sentiment is None and s.result is None


def test_a_part_is_written_with_the_fields_it_was_given_in_the_order_given() -> None:
    theme = Theme.model_validate({"label": "Late parcels", "id": "t1", "description": "", "keywords": ["late"],
                                  "count": 2, "share": 0.5, "quotes": [{"text": "late", "response_id": 7}],
                                  "labelled_by": "keywords"})
    doc = theme.document()
    assert list(doc) == ["label", "id", "description", "keywords", "count", "share", "quotes", "labelled_by"]
    assert list(doc["quotes"][0]) == ["text", "response_id"]
    # A field at its default that was not given stays out (as in a document written before it existed).
    assert "parent" not in doc and "sentiment" not in doc
    # A change keeps a given field in its place; a new one comes last, as a dict's update puts it.
    changed = theme.with_(count=3, sentiment={"positive": 1, "neutral": 0, "negative": 0, "mean": 0.5}).document()
    assert list(changed) == [*doc, "sentiment"] and changed["count"] == 3


def test_a_change_is_validated_too() -> None:
    theme = Theme(id="t1", label="x", description="", keywords=[], count=1, share=1.0,
                  quotes=[Quote(response_id=1, text="x")], labelled_by="keywords")
    with pytest.raises(ValidationError, match="labelled_by"):
        theme.with_(labelled_by="magic")


def test_a_counts_curve_keeps_its_counts_integers() -> None:
    """``run.theme_count.scores[].k`` is an integer in the stored bytes (a float-typed curve wrote ``3.0``)."""
    choice = Choice.model_validate({"criterion": "silhouette", "explanation": "",
                                    "scores": [{"k": 3, "silhouette": 0.21}, {"k": 4, "silhouette": 0.19}]})
    assert json.dumps(choice.document()["scores"]) == '[{"k": 3, "silhouette": 0.21}, {"k": 4, "silhouette": 0.19}]'


def test_a_runs_document_is_what_its_model_writes_byte_for_byte() -> None:
    ctx, s = state(_items(), sentiment_from=None, breakdown_by=None)
    doc = stages.run_stages(ctx, s)
    assert isinstance(s.result, ThematicResult)
    again = ThematicResult.model_validate(json.loads(json.dumps(doc))).document()
    assert json.dumps(again, separators=(",", ":")) == json.dumps(doc, separators=(",", ":"))


def test_schema_1_4_breakdown_cells_name_their_test_and_a_1_3_breakdown_is_still_valid() -> None:
    from pipelines.thematic.result import SCHEMA_VERSION, Breakdown

    cell = {"theme_id": "t1", "count": 2, "share": 0.4, "lift": None, "p": 0.000478, "q": 0.001, "significant": True}
    older = {"field": "plan", "kind": "categorical", "groups": [{"value": "pro", "n": 5, "themes": [cell]}]}
    assert Breakdown.model_validate(older).document() == older  # 1.3: no test, no testing; written as it was
    testing = {"procedure": "bh", "weights": None, "alpha": 0.05, "reference": "BH 1995", "exact_below": 5.0}
    now = {**older, "groups": [{"value": "pro", "n": 5, "themes": [{**cell, "test": "fisher"}]}], "testing": testing}
    assert Breakdown.model_validate(now).document() == now
    with pytest.raises(ValidationError, match="test"):
        Breakdown.model_validate({**now, "groups": [{"value": "pro", "n": 5, "themes": [{**cell, "test": "t"}]}]})
    assert SCHEMA_VERSION == "1.7"
    # A stored 1.3 result (an earlier wave, compare_to) is still read.
    assert {"1.3", "1.4", "1.5", "1.6", "1.7"} <= set(get_args(ThematicResult.model_fields["schema_version"].annotation))
