"""Submission-time checks of the issue-15 params against the input (``validate.prepare``), without storage."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic.validate import prepare, validate_input
from shared.core.errors import NotFound, ValidationFailed

ITEMS = [{"id": i, "text": f"text {i}", "metadata": {"plan": "pro" if i % 2 else "free", "stars": 1 + i % 5}}
         for i in range(10)]
EARLIER = "b" * 28


class Earlier:
    """An EarlierResults that knows one job; asks are recorded so a test can see nothing else was read."""

    def __init__(self, run: dict[str, Any] | None = None) -> None:
        self.asked: list[tuple[str, str]] = []
        self.run = run if run is not None else {"counts": {"usable": 9}}

    def result(self, job_id: str, *, field: str) -> dict[str, Any]:
        self.asked.append((job_id, field))
        if job_id != EARLIER:
            raise NotFound("no such job", field=field)
        return {"themes": [{"id": "t1", "label": "Late", "description": "d", "keywords": ["late"], "count": 4,
                            "quotes": [{"response_id": 1, "text": "late again"}]}],
                "run": self.run, "assignments": []}


def _fields(err: pytest.ExceptionInfo[ValidationFailed]) -> list[str]:
    return [e["field"] for e in err.value.errors]


def test_unknown_keys_and_ratings_name_their_params_field() -> None:
    data = validate_input(ITEMS)
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(breakdown_by=["plan", "regoin", "stars"]), data, Earlier())
    assert _fields(err) == ["params.breakdown_by[1]"] and "keys seen: plan, stars" in err.value.errors[0]["message"]
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="plan"), data, Earlier())
    assert _fields(err) == ["params.sentiment_from"]
    assert prepare(ThematicParams(sentiment_from="stars", breakdown_by=["plan"]), data, Earlier()) == data


def test_compare_to_reads_the_earlier_result_once_and_stores_its_baseline() -> None:
    data = validate_input(ITEMS)
    earlier = Earlier()
    out = prepare(ThematicParams(compare_to=EARLIER), data, earlier)
    assert earlier.asked == [(EARLIER, "params.compare_to")]
    assert out["responses"] == data and out["baseline"]["n"] == 9
    assert out["baseline"]["themes"][0] == {"id": "t1", "label": "Late", "description": "d", "keywords": ["late"],
                                             "count": 4, "texts": ["late again"]}
    with pytest.raises(NotFound) as nf:
        prepare(ThematicParams(compare_to="c" * 28), data, Earlier())
    assert nf.value.extra["field"] == "params.compare_to"
    # A stored input (a retry resubmits it) drops its baseline: prepare computes it afresh.
    assert validate_input({"responses": ITEMS, "baseline": {"forged": True}}) == data
    assert PIPELINE.memory_mb is not None and PIPELINE.memory_mb(None, out) == PIPELINE.memory_mb(None, data)


def test_an_integer_too_large_for_a_float_is_not_a_number_for_score_or_sentiment_from() -> None:
    # JSON allows 10**400 (the body parser accepts integers up to 4,300 digits); float() of it raises
    # OverflowError, which was a 500 at submission instead of the 422 naming the field.
    data = validate_input([{**it, "metadata": {**it["metadata"], "stars": 10**400 if i == 0 else it["metadata"]["stars"]}}
                           for i, it in enumerate(ITEMS)])
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(score={"key": "stars", "scale": "numeric"}), data, Earlier())
    assert _fields(err) == ["params.score.key"] and "not a number" in err.value.errors[0]["message"]
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="stars"), data, Earlier())
    assert _fields(err) == ["params.sentiment_from"]


def test_sentiment_from_takes_a_plain_key_or_a_key_with_a_declared_scale_and_keeps_the_form_given() -> None:
    from pydantic import ValidationError

    from shared.api.validation import field_errors

    plain = ThematicParams(sentiment_from="stars")
    assert plain.sentiment_from is not None and (plain.sentiment_from.key, plain.sentiment_from.scale) == ("stars", None)
    # Stored params (and run.params) keep the form given: a plain key stays a string, as before 1.4.
    assert plain.model_dump(mode="json")["sentiment_from"] == "stars"
    declared = ThematicParams(sentiment_from={"key": "ltr", "scale": "0-10"})
    assert declared.model_dump(mode="json")["sentiment_from"] == {"key": "ltr", "scale": "0-10"}
    assert ThematicParams.model_validate(declared.model_dump(mode="json")) == declared  # a stored job re-reads
    for bad, field in [({"key": "ltr", "scale": "1-6"}, "params.sentiment_from.scale"),
                       ({"key": "ltr", "scale": 10}, "params.sentiment_from.scale"),
                       ({"key": "", "scale": "1-5"}, "params.sentiment_from.key"),
                       ({"scale": "1-5"}, "params.sentiment_from.key"),
                       ({"key": "ltr", "scale": "1-5", "range": 5}, "params.sentiment_from.range"),
                       ("", "params.sentiment_from"), ("x" * 201, "params.sentiment_from")]:
        with pytest.raises(ValidationError) as err:
            ThematicParams(sentiment_from=bad)
        assert [e["field"] for e in field_errors(err.value, "params")] == [field], (bad, err.value)


def test_values_off_a_declared_scale_are_refused_naming_the_scale_or_the_row() -> None:
    data = validate_input(ITEMS)  # stars 1-5
    # 1-5 answers fit a declared 0-10 (and 1-7, 1-10) scale: accepted, though inference would call them stars.
    for scale in ("0-10", "1-7", "1-10", "1-5"):
        assert prepare(ThematicParams(sentiment_from={"key": "stars", "scale": scale}), data, Earlier()) == data
    odd = validate_input([{**it, "metadata": {**it["metadata"], "stars": {2: 0, 5: 9, 7: "great"}.get(i, it["metadata"]
                                                                                             ["stars"])}}
                          for i, it in enumerate(ITEMS)])
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from={"key": "stars", "scale": "1-7"}), odd, Earlier())
    # The text is no number: that row's field. 0 and 9 are numbers outside 1-7: the declaration, naming the rows.
    assert _fields(err) == ["input[7].metadata.stars", "params.sentiment_from.scale"]
    assert '"great"' in err.value.errors[0]["message"]
    assert "2 value(s) outside the declared 1-7 scale (input[2] has 0, input[5] has 9)" in err.value.errors[1]["message"]
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from={"key": "nope", "scale": "1-5"}), data, Earlier())
    assert _fields(err) == ["params.sentiment_from.key"]
    # Booleans are not ratings; an integer too large for a float is not a number either (no 500).
    for value in (True, 10**400):
        bad = validate_input([{**ITEMS[0], "metadata": {"stars": value}}])
        with pytest.raises(ValidationFailed) as err:
            prepare(ThematicParams(sentiment_from={"key": "stars", "scale": "0-10"}), bad, Earlier())
        assert _fields(err) == ["input[0].metadata.stars"]


@pytest.mark.parametrize(("run", "copies"), [
    ({"counts": {"usable": 9}}, False),  # before schema 1.4: copies were unusable
    ({"counts": {"usable": 9, "duplicates": 2}, "params": {"count_duplicates": True}}, True),
    ({"counts": {"usable": 9, "duplicates": 0}, "params": {"count_duplicates": False}}, False),
])
def test_the_baseline_says_whether_the_earlier_wave_counted_copies(run: dict[str, Any], copies: bool) -> None:
    data = validate_input(ITEMS)
    out = prepare(ThematicParams(compare_to=EARLIER), data, Earlier(run))
    assert out["baseline"]["copies"] is copies
    # A wave that leaves copies out cannot be compared with one that counted them: "then" has them, "now" not.
    if copies:
        with pytest.raises(ValidationFailed) as err:
            prepare(ThematicParams(compare_to=EARLIER, count_duplicates=False), data, Earlier(run))
        assert _fields(err) == ["params.count_duplicates"] and "counted copies" in err.value.errors[0]["message"]
    else:
        assert prepare(ThematicParams(compare_to=EARLIER, count_duplicates=False), data, Earlier(run))["baseline"]


def test_fractional_values_are_no_nps_rating_inferred_or_declared() -> None:
    # NPS groups are of the integers 0-10. Inferred, any numbers in 0-10 outside 1-5 were read as NPS: a field of
    # probabilities 0.05-0.95 made every response a detractor (each theme's NPS -100), 6.5 was a passive and 8.5 a
    # promoter. The breakdowns (NPS groups only for integers) and params.score's "nps" (integers only) already
    # refused to read them so.
    def items(values: list[Any]) -> list[dict[str, Any]]:
        return validate_input([{"id": i, "text": f"text {i}", "metadata": {"r": v}} for i, v in enumerate(values)])

    probabilities = items([round(0.05 + i / 10, 2) for i in range(10)])
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="r"), probabilities, Earlier())
    assert _fields(err) == ["params.sentiment_from"] and "declare" in err.value.errors[0]["message"]
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="r"), items([0, 3, 6.5, 8.5, 10]), Earlier())
    assert _fields(err) == ["params.sentiment_from"]
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from={"key": "r", "scale": "0-10"}), items([0, 3, 6.5, 8.5, 10, None]),
                Earlier())
    assert _fields(err) == ["params.sentiment_from.scale"]
    assert "input[2] has 6.5" in err.value.errors[0]["message"] and "integer" in err.value.errors[0]["message"]
    # Integers (7.0 is one, as JSON writes it) and linear scales still read as before: a 1-5 or 1-10 rating may
    # be an average.
    data = items([0, 3, 7.0, 9, 10])
    assert prepare(ThematicParams(sentiment_from="r"), data, Earlier()) == data
    assert prepare(ThematicParams(sentiment_from={"key": "r", "scale": "0-10"}), data, Earlier()) == data
    for values, scale in (([1.5, 3.5, 4.5], None), ([1.5, 6.5, 9.5], "1-10")):
        data = items(values)
        sf: Any = "r" if scale is None else {"key": "r", "scale": scale}
        assert prepare(ThematicParams(sentiment_from=sf), data, Earlier()) == data


def test_a_zero_one_field_is_no_inferred_nps_rating() -> None:
    # A yes/no field as 0/1 ("resolved", "would buy again") lies in 0-10 outside 1-5, so it was read as NPS: 0 and 1
    # are both detractors, every response negative and each theme's NPS -100. The breakdowns already need more than
    # two values to read 0-10 integers as NPS groups; declared, 0-10 is the client's word and stands.
    data = validate_input([{"id": i, "text": f"text {i}", "metadata": {"r": i % 2}} for i in range(10)])
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="r"), data, Earlier())
    assert _fields(err) == ["params.sentiment_from"] and "declare" in err.value.errors[0]["message"]
    assert prepare(ThematicParams(sentiment_from={"key": "r", "scale": "0-10"}), data, Earlier()) == data
    # Three or more values read as 0-10 when one is above 5; 0-5 alone is ambiguous (0-5 stars read as NPS were all
    # detractors: test_rating_midpoint) and a 422 too.
    three = validate_input([{"id": i, "text": f"text {i}", "metadata": {"r": (0, 3, 7)[i % 3]}} for i in range(10)])
    assert prepare(ThematicParams(sentiment_from="r"), three, Earlier()) == three


def test_a_breakdown_key_that_no_response_has_a_value_for_is_refused() -> None:
    # "A typo is a 422, not a table of (missing)" (params.breakdown_by): a key present only with null or "" values
    # (an empty spreadsheet column) passed, and the breakdown was one "(missing)" group; score and sentiment_from
    # already refuse such a key ("no response has a value").
    data = validate_input([{"id": i, "text": f"text {i}", "metadata": {"plan": "pro", "region": None if i % 2 else ""}}
                           for i in range(10)])
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(breakdown_by=["plan", "region"]), data, Earlier())
    assert _fields(err) == ["params.breakdown_by[1]"] and "no response has a value" in err.value.errors[0]["message"]
    assert prepare(ThematicParams(breakdown_by=["plan"]), data, Earlier()) == data
