"""A 0-5 (or 1-5) rating declared explicitly (researcher46, schema 1.7): ``params.sentiment_from.scale`` takes
"0-5", and ``params.score.scale`` takes the rating ranges "0-5", "1-5", "1-7", "1-10".

Before, an inferred 0-5 field was a 422 with nothing to declare instead (0-5 was none of the scales), and a score
had only nps / csat / numeric: a 0-5 score could be sent only as "numeric", with no check of its range.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipelines.thematic import derive, impact, render
from pipelines.thematic import sentiment as S
from pipelines.thematic.params import ThematicParams
from pipelines.thematic.result import Impact, SentimentInfo


def test_a_declared_0_to_5_rating_reads_0_1_negative_2_3_neutral_4_5_positive_on_one_scale() -> None:
    scale = S.declared_scale("0-5")
    got = {r: S.from_rating(r, scale) for r in (0, 1, 1.5, 2, 2.5, 3, 3.9, 4, 5)}
    # By hand: midpoint 2.5, half-range 2.5; the neutral band is (1, 4), open, and scores 0 inside it.
    assert got == {0: S.Scored("negative", -1.0), 1: S.Scored("negative", pytest.approx(-0.6)),
                   1.5: S.Scored("neutral", 0.0), 2: S.Scored("neutral", 0.0), 2.5: S.Scored("neutral", 0.0),
                   3: S.Scored("neutral", 0.0), 3.9: S.Scored("neutral", 0.0),
                   4: S.Scored("positive", pytest.approx(0.6)), 5: S.Scored("positive", 1.0)}
    # Label and mean on one scale: a theme of 0, 2, 3, 5 reads 1 / 2 / 1 and mean 0 ((-1 + 0 + 0 + 1) / 4).
    assert S.distribution([S.from_rating(r, scale) for r in (0, 2, 3, 5)]) == {
        "positive": 1, "neutral": 2, "negative": 1, "mean": 0.0}


def test_every_0_to_5_score_has_the_sign_of_its_label_on_a_fine_grid() -> None:
    scale = S.declared_scale("0-5")
    sign = {"positive": 1, "neutral": 0, "negative": -1}
    for i in range(0, 501):
        s = S.from_rating(i / 100, scale)
        assert s is not None and (s.score > 0) - (s.score < 0) == sign[s.label], (i / 100, s)


def test_the_declaration_is_checked_against_the_values() -> None:
    values = [0, 3, 5, None, "", 6, "five", 5.5, -1]
    assert S.declared_problems(values, "0-5") == [(5, "scale", 6), (6, "value", "five"), (7, "scale", 5.5),
                                                  (8, "scale", -1)]
    # The same 0s are outside a declared 1-5.
    assert S.declared_problems([0, 3], "1-5") == [(0, "scale", 0)]


def test_an_inferred_0_to_5_field_is_still_refused_and_the_message_says_what_to_declare() -> None:
    # A 0-5 rating and a 0-10 question answered only 0-5 look the same: the researcher says which.
    msg = S.rating_scale([0, 1, 2, 3, 4, 5])
    assert isinstance(msg, str) and '"scale": "0-5"' in msg and '"scale": "0-10"' in msg


def test_params_take_the_ranges_and_name_the_field_for_others() -> None:
    p = ThematicParams.model_validate({"sentiment_from": {"key": "r", "scale": "0-5"},
                                       "score": {"key": "r", "scale": "0-5"}})
    assert p.sentiment_from is not None and p.sentiment_from.scale == "0-5"
    assert p.score is not None and p.score.scale == "0-5"
    assert p.model_dump()["sentiment_from"] == {"key": "r", "scale": "0-5"}
    for scale in ("1-5", "1-7", "1-10"):
        assert ThematicParams.model_validate({"score": {"key": "r", "scale": scale}}).score is not None
    for bad in ({"score": {"key": "r", "scale": "0-10"}}, {"score": {"key": "r", "scale": "0-6"}},
                {"sentiment_from": {"key": "r", "scale": "0-6"}}):
        with pytest.raises(ValidationError) as err:
            ThematicParams.model_validate(bad)
        assert [e["loc"][:2] for e in err.value.errors()] == [(next(iter(bad)), "scale")], err.value.errors()


@pytest.mark.parametrize(("scale", "values", "want"), [
    ("0-5", [0, 2, 5, None, ""], None),
    ("0-5", [0, 2, 6], ("scale", "a 0-5 rating is a number from 0 to 5, not 6")),
    ("0-5", [0, -0.5], ("scale", "a 0-5 rating is a number from 0 to 5, not -0.5")),
    ("1-5", [0, 3], ("scale", "a 1-5 rating is a number from 1 to 5, not 0")),
    ("1-10", [1, 10, 7.5], None),
    ("1-7", [1, "8"], ("scale", 'a 1-7 rating is a number from 1 to 7, not "8"')),
    ("0-5", [1, "x"], ("key", 'not a number: "x"')),
])
def test_a_score_range_is_checked(scale: impact.Scale, values: list[object], want: tuple[str, str] | None) -> None:
    assert impact.problem(values, scale) == want


def test_a_score_on_a_range_is_its_mean_and_is_named_so() -> None:
    values = [0, 1, 5, 5, 4, 3]
    themes_of = [["t1"], ["t1"], ["t2"], ["t2"], ["t2"], []]
    got = impact.impact(values, themes_of, [{"id": "t1", "label": "A"}, {"id": "t2", "label": "B"}], key="r",
                        scale="0-5")
    # By hand: overall 18 / 6 = 3; t1 mean 0.5, without it (5 + 5 + 4 + 3) / 4 = 4.25, impact 3 - 4.25 = -1.25.
    assert got["scale"] == "0-5" and got["overall"] == 3.0
    assert [(r["theme_id"], r["score"], r["impact"]) for r in got["themes"]] == [
        ("t1", 0.5, -1.25), ("t2", pytest.approx(14 / 3, abs=1e-4), pytest.approx(3 - 4 / 3, abs=1e-4))]
    Impact.model_validate(got)
    assert render.score_word("0-5") == "rating (0–5)" and render.score_word("csat") == "CSAT"


def test_the_result_names_a_declared_0_to_5_sentiment_scale() -> None:
    info = SentimentInfo.model_validate({"source": "metadata", "field": "r", "scale": "rating0to5",
                                         "rating_range": "0-5", "scale_from": "declared", "scored": 3})
    assert info.rating_range == "0-5"


def test_a_breakdown_by_a_declared_range_is_a_group_per_value() -> None:
    # A 0-5 score of a field whose values are in 1-5 is not read as stars or quartiles: the declared range wins.
    assert derive.declared_scales({}, {"key": "r", "scale": "0-5"}) == {"r": "0-5"}
    assert derive.declared_scales({}, {"key": "r", "scale": "numeric"}) == {}
