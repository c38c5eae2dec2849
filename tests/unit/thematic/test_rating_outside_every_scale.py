"""``sentiment_from`` on values outside 0-10 (review46u): the drugs.com ratings sent as -1/0/+1 got "a rating must lie
in 1-5 or 0-10 (or declare its scale: {"key", "scale"})", but no declarable scale (0-5, 1-5, 1-7, 1-10, 0-10) holds a
-1 or a 100, so the advice led to a second 422. The message names the values' range and what does fit."""

from __future__ import annotations

import pytest

from pipelines.thematic.sentiment import rating_scale


@pytest.mark.parametrize(("values", "span"), [([-1, 0, 1, 1], "from -1 to 1"), ([0, 50, 100], "from 0 to 100"),
                                              ([-0.5, 0.25], "from -0.5 to 0.25")])
def test_values_outside_every_scale_are_not_told_to_declare_one(values: list[float], span: str) -> None:
    why = rating_scale(values)
    assert isinstance(why, str), why
    assert span in why
    assert "or declare its scale" not in why
    assert "positive/neutral/negative" in why and "params.score" in why
