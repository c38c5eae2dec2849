"""Params that did nothing, silently, now work or are a 422 naming the field (stats44, review43).

* ``compare_mode: "discover"`` without ``compare_to`` was accepted and did nothing: 422 ``params.compare_mode``.
* ``multi_label`` with ``compare_to`` was accepted and not applied (a compared wave is coded one theme per answer,
  as the earlier wave was counted): 422 ``params.multi_label``.
* ``params.score`` read a spreadsheet's "7" as a number, ``sentiment_from`` refused it: both read it now, by one rule
  (``insight.number``), so a CSV's rating column (the CLI sends its cells as strings) works for both.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.thematic import ThematicParams, insight, sentiment
from pipelines.thematic.validate import prepare, validate_input
from shared.core.errors import ValidationFailed

from .test_prepare import EARLIER, ITEMS, Earlier


def _fields(err: pytest.ExceptionInfo[ValidationFailed]) -> list[str]:
    return [e["field"] for e in err.value.errors]


def test_compare_mode_discover_without_compare_to_is_a_422_and_the_default_is_not() -> None:
    data = validate_input(ITEMS)
    earlier = Earlier()
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(compare_mode="discover"), data, earlier)
    assert _fields(err) == ["params.compare_mode"] and "needs compare_to" in err.value.errors[0]["message"]
    # "inherit" is the default, in every stored params (run.params): sent back without compare_to it stays fine.
    assert prepare(ThematicParams(compare_mode="inherit"), data, earlier) == data
    assert prepare(ThematicParams.model_validate(ThematicParams().model_dump(mode="json")), data, earlier) == data
    assert prepare(ThematicParams(compare_to=EARLIER, compare_mode="discover"), data, earlier)["baseline"]


@pytest.mark.parametrize("mode", ["inherit", "discover"])
def test_multi_label_with_compare_to_is_a_422_before_the_earlier_job_is_read(mode: str) -> None:
    data = validate_input(ITEMS)
    earlier = Earlier()
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(compare_to=EARLIER, compare_mode=mode, multi_label=True), data, earlier)  # type: ignore[arg-type]
    assert _fields(err) == ["params.multi_label"] and "one theme per answer" in err.value.errors[0]["message"]
    assert earlier.asked == []  # nothing read, nothing stored
    assert prepare(ThematicParams(multi_label=True), data, earlier) == data  # alone it is fine
    # A stored job's params are re-read by the worker (shared.runtime.child): the model itself does not refuse them.
    ThematicParams.model_validate({"compare_to": EARLIER, "multi_label": True})


def _items(values: list[Any]) -> list[dict[str, Any]]:
    return validate_input([{"id": i, "text": f"text {i}", "metadata": {"r": v}} for i, v in enumerate(values)])


def test_sentiment_from_reads_a_spreadsheets_number_strings_as_params_score_does() -> None:
    stars = _items(["1", "2", " 3 ", "4", "5", None, ""])
    assert prepare(ThematicParams(sentiment_from="r", score={"key": "r", "scale": "csat"}), stars, Earlier()) == stars
    assert sentiment.rating_scale([it["metadata"]["r"] for it in stars]) == sentiment.RatingScale(
        "stars", 1.0, 5.0, "1-5")
    ltr = _items(["0", "3", "7", "9", "10"])
    assert prepare(ThematicParams(sentiment_from={"key": "r", "scale": "0-10"}, score={"key": "r", "scale": "nps"}),
                   ltr, Earlier()) == ltr
    scale = sentiment.rating_scale([it["metadata"]["r"] for it in ltr])
    assert not isinstance(scale, str) and scale.kind == "score10"
    # Read as the numbers: "7" a passive (neutral, 0), "9" a promoter; "2" a 2-star (negative, score (2-3)/2).
    assert sentiment.from_rating("7", scale) == sentiment.Scored("neutral", 0.0)
    assert sentiment.from_rating(" 9 ", scale) == sentiment.Scored("positive", 1.0)
    assert sentiment.from_rating("2", sentiment.RatingScale("stars", 1.0, 5.0, "1-5")) == sentiment.Scored(
        "negative", -0.5)


def test_what_is_no_number_is_refused_by_both_alike() -> None:
    # The rule of params.score (insight.number): "1_0" (Python's 10), "Infinity", "nan", True are no numbers.
    for bad in ("1_0", "Infinity", "nan", True, "seven"):
        data = _items([1, 2, 3, bad])
        with pytest.raises(ValidationFailed) as err:
            prepare(ThematicParams(sentiment_from="r"), data, Earlier())
        assert _fields(err) == ["params.sentiment_from"], bad
        with pytest.raises(ValidationFailed) as err:
            prepare(ThematicParams(score={"key": "r", "scale": "numeric"}), data, Earlier())
        assert _fields(err) == ["params.score.key"], bad
        with pytest.raises(ValidationFailed) as err:
            prepare(ThematicParams(sentiment_from={"key": "r", "scale": "1-5"}), data, Earlier())
        assert _fields(err) == ["input[3].metadata.r"], bad
    assert insight.number("7") == 7.0 and insight.number(7) == 7.0 and insight.number("1_0") is None
