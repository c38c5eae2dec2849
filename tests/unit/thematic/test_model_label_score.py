"""The sentiment model's label and score are on one scale: the score's sign is the label and a neutral scores 0.

Before 2026-12-08 a neutral kept P(positive) - P(negative) ("Need more halal restaurants": neutral at -0.22), so a
theme of such answers read "0 positive, 5 neutral, 0 negative, mean -0.22". The label is the measured one
(bench/sentiment.py), so the score follows it; the neutral's lean is ``model_polarity``'s (the bench's 2-way reading).
"""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.thematic import sentiment as S
from pipelines.thematic import sentiment_model as SM


@pytest.fixture
def probs(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    # P(negative, neutral, positive) per row, as sentiment_model.probabilities returns them; the "embeddings" are
    # row numbers.
    rows: list[np.ndarray] = []
    monkeypatch.setattr(SM, "probabilities", lambda emb: np.array([rows[int(i)] for i in np.asarray(emb)[:, 0]]))
    return rows


def test_a_neutral_scores_0_and_a_polar_label_keeps_its_margin(probs: list[np.ndarray]) -> None:
    probs.extend([np.array([0.36, 0.50, 0.14]), np.array([0.10, 0.30, 0.60]), np.array([0.55, 0.40, 0.05])])
    got = S.by_model(np.arange(3.0).reshape(3, 1))
    # Hand-computed: neutral 0 (its lean, 0.14 - 0.36 = -0.22, is not the score); 0.60 - 0.10; 0.05 - 0.55.
    assert got == [S.Scored("neutral", 0.0), S.Scored("positive", pytest.approx(0.5)),
                   S.Scored("negative", pytest.approx(-0.5))]
    assert S.model_polarity(np.arange(3.0).reshape(3, 1)) == pytest.approx([-0.22, 0.5, -0.5])


def test_the_score_s_sign_is_the_label_and_a_theme_s_mean_agrees_with_its_counts(probs: list[np.ndarray]) -> None:
    rng = np.random.default_rng(7)
    probs.extend(rng.dirichlet([1.0, 1.0, 1.0], size=2000))
    got = S.by_model(np.arange(2000.0).reshape(2000, 1))
    sign = {"positive": 1.0, "neutral": 0.0, "negative": -1.0}
    assert all(np.sign(s.score) == sign[s.label] for s in got)
    assert {s.label for s in got} == set(S.LABELS)
    # A theme of neutrals only: its mean is 0, as its counts say (it was the mean of their leans).
    neutrals = [s for s in got if s.label == "neutral"]
    assert S.distribution(neutrals) == {"positive": 0, "neutral": len(neutrals), "negative": 0, "mean": 0.0}
