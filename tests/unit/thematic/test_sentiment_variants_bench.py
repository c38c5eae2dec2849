"""Issue 23 #2: what bench/sentiment_variants.py computes, by hand values: the lexicon cues stacked onto the
embedding, the margin rule that makes the neutral class, and the leave-one-domain-out selection never fitting on
the domain it scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.support.bench import load_bench

V = load_bench("sentiment_variants")


def test_the_cues_flag_a_negated_problem_a_contrast_and_read_the_clause_after_it() -> None:
    rows = V.cues(["Courier was fast and polite, no complaints", "The screen is lovely but the battery died.",
                   "Support never answered my email."])
    # columns: compound, pos, neg, neu, tail compound, min / max sentence compound, negation, contrast, negated problem
    assert rows.shape == (3, 10)
    assert rows[0, 9] == 1.0 and rows[1, 9] == 0.0 and rows[2, 9] == 0.0
    assert list(rows[:, 8]) == [0.0, 1.0, 0.0]
    assert list(rows[:, 7]) == [1.0, 0.0, 1.0]  # "no", none, "never"
    a = V._analyzer()
    assert rows[1, 4] == pytest.approx(a.polarity_scores(" the battery died.")["compound"], abs=1e-6)
    assert rows[2, 4] == pytest.approx(rows[2, 0])  # no contrast: the tail is the whole text


class _Fixed:
    """A fitted-classifier stand-in with fixed probabilities (the polar head's classes: negative, positive)."""

    def __init__(self, p: list[list[float]], classes: list[int]) -> None:
        self.p, self.classes_ = np.array(p), np.array(classes)

    def predict_proba(self, x: Any) -> Any:
        return self.p


def _data(n: int) -> Any:
    return V.Data([""] * n, ["neutral"] * n, np.zeros((n, 384), np.float32))


def test_the_margin_rule_calls_neutral_within_m_of_an_even_split() -> None:
    polar = _Fixed([[0.52, 0.48], [0.30, 0.70], [0.95, 0.05]], [0, 2])
    labels, score = V.predict(polar, _data(3), "emb", "polar", "margin", 0.1)
    assert labels == ["neutral", "positive", "negative"] and score == pytest.approx([-0.04, 0.4, -0.9])
    three = _Fixed([[0.15, 0.5, 0.35], [0.1, 0.3, 0.6]], [0, 1, 2])
    assert V.predict(three, _data(2), "emb", "3way", "argmax", 0.0)[0] == ["neutral", "positive"]
    # The same probabilities under the margin rule: P(pos) - P(neg) = 0.2 is past 0.1, so positive.
    assert V.predict(three, _data(2), "emb", "3way", "margin", 0.1)[0] == ["positive", "positive"]


def test_leave_one_domain_out_never_fits_on_the_domain_it_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, str]] = []
    data = {name: V.Data([name] * 2, ["negative", "positive"], np.zeros((2, 384), np.float32))
            for name in ("films", "drugs", "products")}

    def fake_fit(d: Any, features: str, head: str, c: float, key: Any = None) -> Any:
        held = key[2]
        assert held not in d.texts, (held, d.texts)
        seen.append((len(d.texts), held))
        return _Fixed([[0.9, 0.0, 0.1], [0.1, 0.0, 0.9]], [0, 1, 2])

    monkeypatch.setattr(V, "fit", fake_fit)
    (cfg,) = V.lodo(data, ("films", "drugs", "products"), "emb", "3way", ("argmax",), 1.0)
    assert sorted(h for _, h in seen) == ["drugs", "films", "products"] and all(n == 4 for n, _ in seen)
    assert cfg["objective"] == 1.0  # every left-out pair read right: kappa 1 both ways
