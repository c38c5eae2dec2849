"""An inferred rating field that is refused names a scale to declare: declaring it must then be accepted
(review46m). Before, values in 0-10 that were not all integers were always told to declare "1-10", so an
average of 0-5 stars (0.5 .. 4.5) or a probability (0.05 .. 0.95) followed the advice into a second 422
(params.sentiment_from.scale: 0.5 is outside 1-10); with the 0-5 scale declarable (schema 1.7) the first of
these has a scale that fits, and a field that fits none is told so instead of being sent to one that does not.
"""

from __future__ import annotations

import re

import pytest

from pipelines.thematic import sentiment as S


def _named(message: str) -> list[str]:
    return re.findall(r'"scale": "([^"]+)"', message)


@pytest.mark.parametrize("values", [
    [0.5, 2.5, 4.5],        # an average of 0-5 ratings
    [0.0, 1.5, 3.0, 5.0],   # the same with a 0
    [1.5, 4.5, 9.5],        # an average of 1-10 ratings
    [0.05, 0.5, 0.95],      # probabilities: no declared scale reads them
    [0.5, 7.5, 9.5],        # 0-10 averages: none either (0-10 is NPS groups of integers)
    [0, 1, 2, 3],           # 0-5 integers
])
def test_every_scale_a_refusal_names_takes_the_values(values: list[float]) -> None:
    message = S.rating_scale(values)
    assert isinstance(message, str), message
    for scale in _named(message):
        assert scale in S.DECLARED, (scale, message)
        assert S.declared_problems(values, scale) == [], (scale, message)


def test_an_average_of_0_to_5_ratings_is_told_to_declare_0_5() -> None:
    message = S.rating_scale([0.5, 2.5, 4.5])
    assert isinstance(message, str) and _named(message) == ["0-5"], message


def test_values_no_declared_scale_fits_say_so() -> None:
    message = S.rating_scale([0.05, 0.5, 0.95])
    assert isinstance(message, str) and _named(message) == [], message
    assert "no declared scale" in message, message
    other = S.rating_scale([0.5, 7.5, 9.5])
    assert isinstance(other, str) and "no declared scale" in other, other
