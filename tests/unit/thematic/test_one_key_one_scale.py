"""One metadata key, one scale (consist46, issue 23): ``sentiment_from`` and ``score`` naming the same key.

Before, each read the key on its own scale: ``score`` {"key": "r", "scale": "1-5"} with ``sentiment_from``
{"key": "r", "scale": "0-10"} read r as stars for the score's mean and as NPS groups for the sentiment (a 5 the
best and a detractor), and the breakdown by r took the sentiment's groups; and a plain ``sentiment_from`` key
ignored the range the score declared for it (a 1-10 rating inferred as NPS, its 5s detractors).
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic import derive, stages
from pipelines.thematic.params import ThematicParams
from pipelines.thematic.validate import prepare, validate_input
from shared.core.errors import ValidationFailed
from tests.support.thematic_data import feedback

from .stage_support import state


class _NoEarlier:
    def result(self, job_id: str, *, field: str) -> dict[str, Any]:
        raise AssertionError("no compare_to here")


def _items(values: list[int]) -> list[dict[str, Any]]:
    return validate_input([{"id": i, "text": f"text {i}", "metadata": {"r": v}} for i, v in enumerate(values)])


def _refused(params: dict[str, Any], values: list[int]) -> list[dict[str, str]]:
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams.model_validate(params), _items(values), _NoEarlier())
    return err.value.errors


STARS = [1, 2, 3, 4, 5] * 2


@pytest.mark.parametrize(("sentiment", "score"), [
    ("0-10", "1-5"), ("1-5", "1-10"), ("1-5", "nps"), ("0-10", "csat"), ("1-7", "1-5"), ("0-5", "1-5")])
def test_two_declarations_of_one_key_that_differ_are_a_422_naming_the_sentiments_scale(sentiment: str,
                                                                                      score: str) -> None:
    errors = _refused({"sentiment_from": {"key": "r", "scale": sentiment}, "score": {"key": "r", "scale": score}},
                      STARS)
    conflict = [e for e in errors if "params.score.scale" in e["message"]]
    assert [e["field"] for e in conflict] == ["params.sentiment_from.scale"], errors
    assert f"'{sentiment}'" in conflict[0]["message"] and f"'{score}'" in conflict[0]["message"]


@pytest.mark.parametrize(("sentiment", "score"), [
    ("1-5", "1-5"), ("1-5", "csat"), ("0-10", "nps"), ("0-10", "numeric"), ("1-7", "numeric"), ("0-5", "0-5")])
def test_declarations_that_agree_or_a_numeric_score_are_accepted(sentiment: str, score: str) -> None:
    values = [0, 2, 3, 5, 4, 1] if sentiment in ("0-5", "0-10") and score != "numeric" and score != "nps" else STARS
    if score == "nps":
        values = [0, 3, 6, 7, 8, 9, 10]
    p = ThematicParams.model_validate({"sentiment_from": {"key": "r", "scale": sentiment},
                                       "score": {"key": "r", "scale": score}})
    prepare(p, _items(values), _NoEarlier())
    assert p.sentiment_scale() == sentiment


def test_different_keys_never_conflict_and_a_plain_key_reads_the_scores_range() -> None:
    p = ThematicParams.model_validate({"sentiment_from": {"key": "r", "scale": "0-10"},
                                       "score": {"key": "s", "scale": "1-5"}})
    assert p.sentiment_scale() == "0-10"
    for score, reads in (("1-10", "1-10"), ("nps", "0-10"), ("csat", "1-5"), ("0-5", "0-5"), ("numeric", None)):
        q = ThematicParams.model_validate({"sentiment_from": "r", "score": {"key": "r", "scale": score}})
        assert q.sentiment_scale() == reads, score
    assert ThematicParams.model_validate({"sentiment_from": "r"}).sentiment_scale() is None


def test_a_plain_key_with_a_0_to_5_score_is_accepted_where_alone_it_is_refused() -> None:
    five = [0, 1, 2, 3, 4, 5] * 2
    # Alone, 0-5 integers are ambiguous (a 0-5 rating or a 0-10 question answered 0-5): a 422 asking to declare.
    assert [e["field"] for e in _refused({"sentiment_from": "r"}, five)] == ["params.sentiment_from"]
    # The score declares the key 0-5: the sentiment reads it so, nothing is ambiguous.
    prepare(ThematicParams.model_validate({"sentiment_from": "r", "score": {"key": "r", "scale": "0-5"}}),
            _items(five), _NoEarlier())
    # A value off the score's range is the score's 422 (one error, naming params.score.scale).
    errors = _refused({"sentiment_from": "r", "score": {"key": "r", "scale": "0-5"}}, [*five, 7])
    assert [e["field"] for e in errors] == ["params.score.scale"], errors


def test_a_1_to_10_score_makes_the_sentiment_and_the_breakdown_read_the_key_as_1_to_10() -> None:
    items, _ = feedback(per_theme=8, seed=1)
    for n, it in enumerate(items):
        it["metadata"] = {**(it.get("metadata") or {}), "r": 1 + n % 10}
    ctx, s = state(items, sentiment_from="r", score={"key": "r", "scale": "1-10"}, breakdown_by=["r"],
                     min_group_size=1)
    for stage in stages.STAGES:
        stage(ctx, s)
    assert s.result is not None
    doc = s.result.model_dump(mode="json")
    # Inferred, 1-10 integers were NPS groups: a 5 a detractor (negative), a 7 a passive (neutral).
    assert doc["sentiment"]["rating_range"] == "1-10" and doc["sentiment"]["scale_from"] == "declared"
    by_r = {it["id"]: it["metadata"]["r"] for it in items}
    got = {by_r[a["response_id"]]: a["sentiment"]["label"] for a in doc["assignments"] if a.get("sentiment")}
    assert got == {1: "negative", 2: "negative", 3: "negative", 4: "negative", 5: "neutral", 6: "neutral",
                   7: "positive", 8: "positive", 9: "positive", 10: "positive"}
    # The breakdown groups r on the declared 1-10 range (a group per value), as the score and the sentiment read it.
    assert derive.declared_scales(doc, doc["run"]["params"]["score"]) == {"r": "1-10"}
    assert [g["value"] for g in doc["breakdowns"][0]["groups"]] == [str(v) for v in range(1, 11)]
