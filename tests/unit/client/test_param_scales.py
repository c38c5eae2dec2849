"""The typed client's scale names are the service's (researcher46): a 0-5 or 1-5 rating can be declared from it."""

from __future__ import annotations

from typing import get_args

from pipelines.thematic.params import RatingRange, ScoreParam, SentimentFrom, ThematicParams
from thematiq_client import RatingRange as ClientRatingRange
from thematiq_client import ScoreParam as ClientScore
from thematiq_client import ScoreScale, SentimentFromParam


def test_the_clients_scales_are_the_services() -> None:
    assert set(get_args(ScoreScale)) == set(get_args(ScoreParam.model_fields["scale"].annotation))
    assert set(get_args(ClientRatingRange)) == set(get_args(RatingRange))
    assert {"0-5", "1-5"} <= set(get_args(ScoreScale)) & set(get_args(ClientRatingRange))
    assert SentimentFrom.model_fields["scale"].annotation == RatingRange | None


def test_the_typed_params_are_what_the_service_takes() -> None:
    p = ThematicParams.model_validate({"score": ClientScore(key="sat", scale="0-5"),
                                       "sentiment_from": SentimentFromParam(key="sat", scale="0-5")})
    assert p.score is not None and p.sentiment_from is not None
    assert (p.score.scale, p.sentiment_from.scale) == ("0-5", "0-5")


def test_the_openapi_document_names_every_declared_scale() -> None:
    from shared.api.openapi import document

    text = document()["paths"]["/jobs"]["post"]["description"]
    score = text[text.index("`score:"):text.index("`sentiment_from:")]
    sentiment = text[text.index("`sentiment_from:"):]
    assert all(f"`{s}`" in score for s in get_args(ScoreScale))
    assert all(f"`{s}`" in sentiment for s in get_args(RatingRange))
