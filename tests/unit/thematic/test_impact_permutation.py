"""Impact's interval with permutation critical values (stats46, impact.permutation_interval).

Welch's t interval starred 7-12 % of unrelated 20-50-response themes on skewed CSAT (most answers 5; nominal 5 %,
review46). The interval now takes its critical values from permutations of the scores, so "excludes 0" is a
permutation test of Welch's statistic (exact size when the theme is unrelated to the score).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.thematic import impact


def test_the_interval_by_hand_on_four_scores() -> None:
    # Scores 0, 1, 2, 5; the theme holds the first two. Every split into 2 + 2 (6 of them, each drawn ~166 times of
    # 999, far more than the 25 a tail needs) gives Welch's statistic (a - b) / sqrt(s_a²/2 + s_b²/2):
    #   {0,1} | {2,5}: (0.5 - 3.5) / sqrt(0.5/2 + 4.5/2) = -3 / 1.58114 = -1.89737   (the observed split)
    #   {0,2} | {1,5}: (1 - 3) / sqrt(2/2 + 8/2) = -2 / 2.23607 = -0.89443
    #   {0,5} | {1,2}: (2.5 - 1.5) / sqrt(12.5/2 + 0.5/2) = 1 / 2.54951 = 0.39223
    #   and their mirrors 0.89443, -0.39223, 1.89737.
    # c_lo = -1.89737, c_hi = 1.89737. f = 2/4; impact = f (0.5 - 3.5) = -1.5; f * se = 0.5 * 1.58114 = 0.79057.
    # Interval: -1.5 - 1.89737 * 0.79057 = -3.0 to -1.5 + 1.89737 * 0.79057 = 0.0: the observed split is the most
    # extreme of 6, p = 1/6 a tail, so it never excludes 0 (Welch's t interval is -2.99 to +0.32 here).
    v = np.array([0.0, 1.0, 2.0, 5.0])
    m = np.array([[1.0], [1.0], [0.0], [0.0]])
    lo, hi = impact.permutation_interval(v, m)
    assert lo[0] == pytest.approx(-3.0, abs=1e-9) and hi[0] == pytest.approx(0.0, abs=1e-9)
    symmetric = impact.permutation_interval(v, m, tails="symmetric")
    assert symmetric[0][0] == pytest.approx(-3.0, abs=1e-9) and symmetric[1][0] == pytest.approx(0.0, abs=1e-9)
    doc = impact.impact(v.tolist(), [["a"], ["a"], ["b"], ["b"]], [{"id": "a"}, {"id": "b"}], key="s",
                        scale="numeric")
    a = next(t for t in doc["themes"] if t["theme_id"] == "a")
    assert doc["interval"] == "permutation"
    assert (a["impact"], a["ci_low"], a["ci_high"]) == (-1.5, -3.0, 0.0) and not impact.starred(a)


def test_welchs_statistic_by_hand_with_a_constant_side() -> None:
    # The 9 scores of test_insight_stats' Welch case: theme 1, 2, 3, 6 (mean 3, s² 14/3), rest 4, 4, 5, 7, 10
    # (mean 6, s² 6.5): se = sqrt(14/3/4 + 6.5/5) = 1.57056, t = -3 / 1.57056 = -1.91015.
    v = np.array([1, 2, 3, 6, 4, 4, 5, 7, 10], dtype=float)
    n_a = np.array([4.0])
    t, se = impact._studentised(np.array([12.0]), np.array([50.0]), n_a, float(v.sum()), float((v * v).sum()), 9,
                                float(v.var(ddof=1)))
    assert se[0] == pytest.approx(1.57056, abs=1e-5) and t[0] == pytest.approx(-1.91015, abs=1e-5)
    # A theme of four 5s beside 1, 2, 3, 4, 5: its variance 0 is unseen spread, given the whole's: the 9 scores
    # 5, 5, 5, 5, 1, 2, 3, 4, 5 have sum 35, sum x² 155, s² = (155 - 35²/9) / 8 = 2.36111; the rest's s² 2.5;
    # se = sqrt(2.36111/4 + 2.5/5) = 1.04416; t = (5 - 3) / 1.04416 = 1.91541.
    w = np.array([5, 5, 5, 5, 1, 2, 3, 4, 5], dtype=float)
    t, se = impact._studentised(np.array([20.0]), np.array([100.0]), n_a, float(w.sum()), float((w * w).sum()), 9,
                                float(w.var(ddof=1)))
    assert se[0] == pytest.approx(1.04416, abs=1e-5) and t[0] == pytest.approx(1.91541, abs=1e-5)
    # A side of one response: no variance to estimate, no statistic.
    t, se = impact._studentised(np.array([1.0]), np.array([1.0]), np.array([1.0]), 40.0, 300.0, 9, 5.0)
    assert math.isnan(t[0]) and math.isnan(se[0])


def test_the_interval_and_the_star_agree_and_the_ends_are_welchs_centre_and_error() -> None:
    # Whatever the permutations say, the interval is centred on the impact with Welch's error: its ends are
    # impact - c_hi * f * se and impact - c_lo * f * se, so excludes 0 <=> t below c_lo or above c_hi.
    rng = np.random.default_rng(7)
    v = rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=300, p=[.05, .05, .1, .2, .6])
    m = (rng.random((300, 5)) < np.array([0.05, 0.1, 0.2, 0.4, 0.6])).astype(float)
    lo, hi = impact.permutation_interval(v, m)
    wlo, whi = impact.welch_interval(v, m)
    centre = (wlo + whi) / 2  # Welch's interval is symmetric about the impact
    assert np.all(lo < centre) and np.all(centre < hi)
    # Same input, same interval (a fixed seed); another seed moves the ends only a little.
    again = impact.permutation_interval(v, m)
    assert np.array_equal(lo, again[0]) and np.array_equal(hi, again[1])
    other = impact.permutation_interval(v, m, seed=99)
    assert np.allclose(lo, other[0], atol=0.1 * (hi - lo).max()) and np.allclose(hi, other[1], atol=0.1 * (hi - lo).max())


def test_degenerate_inputs_give_the_point_or_no_interval() -> None:
    m = np.array([[1.0]] * 4 + [[0.0]] * 5)
    lo, hi = impact.permutation_interval(np.full(9, 3.0), m)  # every score equal: the point 0
    assert lo[0] == 0.0 and hi[0] == 0.0
    lo, hi = impact.permutation_interval(np.arange(9.0), np.array([[1.0]] + [[0.0]] * 8))  # one response in it
    assert np.isnan(lo[0]) and np.isnan(hi[0])
    lo, hi = impact.permutation_interval(np.array([1e308, 1e308, -1e308, 5.0]), np.array([[1.0], [1.0], [0.0], [0.0]]))
    assert np.isnan(lo[0]) and np.isnan(hi[0])  # squares overflow: no variance to tell
    lo, hi = impact.permutation_interval(np.zeros(0), np.zeros((0, 2)))
    assert lo.shape == (2,) and np.isnan(lo).all()


def _csat_null_starred(seed: int, k: int, interval: str) -> bool:
    """bench/impact_constant_side.py's csat null (P(5) = .9, 400 responses, a theme of the first k): starred?"""
    rng = np.random.default_rng(seed)
    p = [0.01, 0.01, 0.01, 0.07, 0.90]
    v = np.concatenate([rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=k, p=p),
                        rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=400 - k, p=p)])
    m = np.zeros((400, 1))
    m[:k, 0] = 1.0
    c = v - v.mean()
    lo, hi = (impact.welch_interval if interval == "welch" else impact.permutation_interval)(c, m)
    return bool(round(lo[0], 4) > 0 or round(hi[0], 4) < 0)


def test_skewed_csat_with_no_effect_is_starred_at_the_nominal_rate() -> None:
    # The rule, written before looking at any result: bench/impact_constant_side.py's csat null, themes of k = 20, 30
    # and 50 of 400, seeds 0-199 each (600 themes, none with an effect); at most 5 % + 2 Monte-Carlo sd
    # (sqrt(.05 * .95 / 600) = 0.9 %), i.e. at most 41 starred. Welch's t interval starred more (review46: 7-12 %).
    shipped = sum(_csat_null_starred(s, k, "welch") for k in (20, 30, 50) for s in range(200))
    now = sum(_csat_null_starred(s, k, "permutation") for k in (20, 30, 50) for s in range(200))
    assert now <= 41 < shipped, (now, shipped)


def test_the_first_null_csat_theme_welch_stars_is_not_starred_now() -> None:
    # The rule, written before looking: the first seed 0, 1, 2, ... whose 30-response csat null theme
    # (_csat_null_starred) Welch's t interval stars; the result must not star it. Whichever seed that is.
    seed = next(s for s in range(1000) if _csat_null_starred(s, 30, "welch"))
    assert not _csat_null_starred(seed, 30, "permutation"), seed
    rng = np.random.default_rng(seed)
    p = [0.01, 0.01, 0.01, 0.07, 0.90]
    v = np.concatenate([rng.choice([1, 2, 3, 4, 5], size=30, p=p), rng.choice([1, 2, 3, 4, 5], size=370, p=p)])
    doc = impact.impact(v.tolist(), [["a"] if i < 30 else ["b"] for i in range(400)], [{"id": "a"}, {"id": "b"}],
                        key="csat", scale="csat")
    assert not impact.starred(next(t for t in doc["themes"] if t["theme_id"] == "a"))


def test_the_legends_name_the_interval_the_result_says() -> None:
    from pipelines.thematic.render import _impact_md
    from thematiq_cli.render import impact_table

    v = [1.0, 2.0, 3.0, 6.0, 4.0, 4.0, 5.0, 7.0, 10.0] * 3
    doc = impact.impact(v, [["a"] if i % 9 < 4 else ["b"] for i in range(27)], [{"id": "a"}, {"id": "b"}],
                        key="s", scale="numeric")
    for render in (lambda d: "\n".join(_impact_md(d)), impact_table):
        assert "critical values from 999 permutations of the scores" in render(doc)
        # A result stored before stats46 says "welch", and its legend still does.
        old = render({**doc, "interval": "welch"})
        assert "Welch's t)" in old and "permutations" not in old
