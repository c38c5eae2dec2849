"""With ``sentiment_from`` a rating, a response's label and score are on one scale on every rating scale: the score's
sign is the label (neutral exactly when the score is 0), and the scale's midpoint is neutral with score 0 (issue 23:
2.5 stars was neutral at -0.25, so a theme of them read "0 positive, 0 negative, mean -0.25")."""

from __future__ import annotations

import pytest

from pipelines.thematic import sentiment as S

SIGN = {"negative": -1, "neutral": 0, "positive": 1}


@pytest.mark.parametrize("scale", [*S.DECLARED.values(), S.RatingScale("stars", 1.0, 5.0, "1-5")],
                         ids=lambda s: f"{s.range}-{'declared' if s.declared else 'inferred'}")
def test_every_rating_on_every_scale_has_its_labels_sign(scale: S.RatingScale) -> None:
    steps = int((scale.high - scale.low) * 20)
    values = [scale.low + i / 20 for i in range(steps + 1)]
    if scale.kind == "score10":
        values = [v for v in values if v.is_integer()]  # NPS groups are of the integers (others are a 422)
    for v in values:
        got = S.from_rating(v, scale)
        assert got is not None
        sign = (got.score > 0) - (got.score < 0)
        assert sign == SIGN[got.label], (scale.range, v, got)
    mid = (scale.low + scale.high) / 2
    if scale.kind != "score10":  # 5 on 0-10 is a detractor (NPS), not the midpoint of a linear scale
        assert S.from_rating(mid, scale) == S.Scored("neutral", 0.0)
        # The neutral band is symmetric about the midpoint, so a rating and its mirror have opposite scores.
        for v in values:
            a, b = S.from_rating(v, scale), S.from_rating(scale.low + scale.high - v, scale)
            assert a is not None and b is not None and a.score == pytest.approx(-b.score) and SIGN[a.label] == -SIGN[b.label]


def test_half_stars_at_the_midpoint_band_are_neutral_and_mean_zero() -> None:
    stars = S.declared_scale("1-5")
    got = S.distribution([S.from_rating(v, stars) for v in (2.5, 3, 3.5, 2.5)])
    assert got == {"positive": 0, "neutral": 4, "negative": 0, "mean": 0.0}
    # Outside the band the score is still the rating's place on [-1, 1].
    assert [S.from_rating(v, stars) for v in (1, 2, 4, 4.5, 5)] == [
        S.Scored("negative", -1.0), S.Scored("negative", -0.5), S.Scored("positive", 0.5), S.Scored("positive", 0.75),
        S.Scored("positive", 1.0)]
    ten = S.declared_scale("1-10")
    assert [S.from_rating(v, ten) for v in (5, 6)] == [S.Scored("neutral", 0.0)] * 2


def test_a_zero_to_five_rating_is_not_read_as_nps_unless_declared() -> None:
    # 0-5 stars were inferred as a 0-10 score: every answer, the best (5) too, a detractor (negative, NPS -100).
    got = S.rating_scale([0, 1, 2, 3, 4, 5])
    assert isinstance(got, str) and "0 to 5" in got and '"scale": "0-10"' in got
    assert S.rating_scale([0, 3, 5, 6]) == S.RatingScale("score10", 0.0, 10.0, "0-10")  # a 6: a 0-10 score
    assert S.rating_scale([1, 3, 5]) == S.RatingScale("stars", 1.0, 5.0, "1-5")
    assert S.from_rating(5, S.declared_scale("0-10")) == S.Scored("negative", -1.0)  # declared: as asked


def test_a_zero_to_five_rating_is_a_422_naming_sentiment_from_at_submission() -> None:
    from pipelines.thematic import ThematicParams
    from pipelines.thematic.validate import prepare, validate_input
    from shared.core.errors import ValidationFailed
    from tests.unit.thematic.test_prepare import Earlier

    items = [{"id": i, "text": f"answer {i}", "metadata": {"stars": i % 6}} for i in range(30)]
    data = validate_input(items)
    with pytest.raises(ValidationFailed) as err:
        prepare(ThematicParams(sentiment_from="stars"), data, Earlier())
    assert [e["field"] for e in err.value.errors] == ["params.sentiment_from"]
    assert prepare(ThematicParams(sentiment_from={"key": "stars", "scale": "0-10"}), data, Earlier()) == data


def test_the_report_says_what_scale_the_sentiment_mean_is_on() -> None:
    # A theme of 1-5 star ratings read "Mean +0.01": no mean of stars, and nothing said it runs from -1 to +1.
    from pipelines.thematic.render import render_md

    theme = {"id": "t1", "label": "Fees", "description": "", "keywords": [], "count": 4, "share": 1.0, "quotes": [],
             "labelled_by": "keywords", "sentiment": {"positive": 0, "neutral": 4, "negative": 0, "mean": 0.0}}
    doc = {"schema_version": "1.6", "themes": [theme], "assignments": [], "run": {"counts": {"usable": 4}},
           "sentiment": {"source": "metadata", "field": "stars", "scale": "stars", "rating_range": "1-5",
                         "scale_from": "declared"}}
    md = render_md(doc)[1].decode()
    assert "Mean: of the responses' scores, from -1 (negative) to +1 (positive), 0 neutral." in md
    doc["sentiment"]["scale"] = "score10"
    assert "NPS: % promoters (9-10) minus % detractors (0-6)." in render_md(doc)[1].decode()
