"""Impact's interval when one side of a theme has every score equal (review46): its variance is unseen, not 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.thematic import impact


def _theme_a(scores: list[float], k: int, scale: impact.Scale = "numeric") -> dict[str, object]:
    doc = impact.impact(scores, [["a"] if i < k else ["b"] for i in range(len(scores))],
                        [{"id": "a"}, {"id": "b"}], key="s", scale=scale)
    return next(t for t in doc["themes"] if t["theme_id"] == "a")


def test_a_theme_whose_scores_are_all_equal_is_not_starred_on_a_rare_score_it_merely_lacks() -> None:
    # 400 responses, 12 of the 380 outside the theme scored 10 (3 %), the rest 0; the theme's 20 are all 0. With no
    # effect at all a 20-response theme has no 10 in 0.97^20 = 54 % of draws (exactly: C(368, 20) / C(380, 20) =
    # 0.52), so this is no evidence. Welch's error rested on the outside alone (the theme's variance read as 0):
    # interval -0.0246 ... -0.0070, starred.
    scores = [0.0] * 20 + [10.0] * 12 + [0.0] * 368
    a = _theme_a(scores, 20)
    assert a["score"] == 0.0 and a["impact"] == pytest.approx(20 / 400 * (0 - 120 / 380), abs=1e-4)
    # stats46, permutation critical values: a theme of 20 with no 10 is the lowest statistic a permutation can give,
    # and half the permutations give it (C(388, 20) / C(400, 20) = 0.53 > 2.5 %): the lower critical value is the
    # observed statistic, so the interval ends at 0 exactly (it covers 0) and is not starred.
    assert a["ci_low"] < 0 == a["ci_high"], a
    assert not impact.starred(a)
    # Welch's interval (impact.welch_interval): the theme's side gets the variance of all 400 scores,
    # f * t * sqrt(s^2 / 20 + s_b^2 / 380).
    whole = (12 * 100 - 120 ** 2 / 400) / 399
    rest = (12 * 100 - 120 ** 2 / 380) / 379
    va, vb = whole / 20, rest / 380
    df = (va + vb) ** 2 / (va * va / 19 + vb * vb / 379)
    half = 20 / 400 * impact.t_quantile(0.975, df) * math.sqrt(va + vb)
    lo, hi = impact.welch_interval(np.array(scores), np.array([[1.0]] * 20 + [[0.0]] * 380))
    assert lo[0] < 0 < hi[0] and hi[0] - lo[0] == pytest.approx(2 * half, abs=2e-4)


def test_a_real_effect_on_a_constant_side_is_still_starred() -> None:
    # 20 responses that all gave 1 star against 380 of mostly 5 (some 4): far below whatever its spread.
    scores = [1.0] * 20 + [5.0] * 300 + [4.0] * 80
    a = _theme_a(scores, 20, "csat")
    assert a["ci_high"] < 0 and impact.starred(a), a


def test_every_score_equal_is_still_the_point_0() -> None:
    a = _theme_a([7.0] * 40, 20)
    assert a["impact"] == 0.0 and a["ci_low"] == 0.0 and a["ci_high"] == 0.0
