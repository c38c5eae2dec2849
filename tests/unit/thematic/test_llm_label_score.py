"""Label and score on one scale under ``sentiment: "llm"`` and ``"lexicon"`` (consist46, issue 23).

The classifier (researcher46) and a rating (researcher45) give a score whose sign is the label, 0 for a neutral.
The LLM path kept whatever the LLM said ("negative" at +0.8, "neutral" at -0.3), and the lexicon kept a neutral's
compound (up to +-0.05), so a theme's counts and its mean could tell two stories.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel

from pipelines.thematic import sentiment as S
from pipelines.thematic.describe import LLMUsage
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeLLM, FakeResult

SIGN = {"positive": 1, "neutral": 0, "negative": -1}


class SaysClient:
    """A fake LLM client (as tests/support/thematic_fakes.FakeLLM answers): each response's label and score are
    the ones listed for its text (``None``: no score sent)."""

    model_name = "fake-gpt"

    def __init__(self, said: dict[str, tuple[str, float | None]]) -> None:
        self.said = said
        self.prompts: list[str] = []

    def complete_json(self, messages: list[dict[str, str]], schema: type[BaseModel], *, max_tokens: int = 800,
                      purpose: str = "") -> FakeResult:
        assert purpose == "thematic.sentiment"
        self.prompts.append(messages[0]["content"])
        out: list[dict[str, Any]] = []
        for r in json.loads(messages[-1]["content"])["responses"]:
            label, score = self.said[r["text"]]
            out.append({"id": r["id"], "label": label, **({} if score is None else {"score": score})})
        return FakeResult(schema.model_validate({"responses": out}))


def test_the_llm_label_counts_and_its_score_is_moved_to_the_labels_side() -> None:
    said: dict[str, tuple[str, float | None]] = {
        "a": ("negative", 0.8),    # the other side: the label's default
        "b": ("neutral", -0.3),    # a neutral scores 0
        "c": ("positive", 0.7),    # on its side: kept
        "d": ("negative", -0.9),   # kept
        "e": ("positive", 0.0),    # 0 is no positive score
        "f": ("negative", None),   # no score: the default, as before
        "g": ("neutral", 0.0),     # already on the scale
    }
    items = [(str(n), t) for n, t in enumerate(said)]
    disagreed: list[tuple[str, S.Label, float]] = []
    got, stopped = S.by_llm(SaysClient(said), items, LLMUsage(), disagreed=disagreed)  # type: ignore[arg-type]
    assert stopped is None
    assert got == {"0": S.Scored("negative", -0.5), "1": S.Scored("neutral", 0.0), "2": S.Scored("positive", 0.7),
                   "3": S.Scored("negative", -0.9), "4": S.Scored("positive", 0.5), "5": S.Scored("negative", -0.5),
                   "6": S.Scored("neutral", 0.0)}
    # What the LLM said of the three it had to change stays visible (the result's note shows it).
    assert disagreed == [("0", "negative", 0.8), ("1", "neutral", -0.3), ("4", "positive", 0.0)]
    # A theme of "a" and "b" read "1 negative, 1 neutral, mean +0.25"; now its mean is on the negative side.
    assert S.distribution([got["0"], got["1"]]) == {"positive": 0, "neutral": 1, "negative": 1, "mean": -0.25}


def test_every_llm_label_and_score_lands_on_one_scale() -> None:
    rng = random.Random(46)
    for _ in range(2_000):
        label = rng.choice(S.LABELS)
        score = rng.choice([None, 0.0, 1.0, -1.0, round(rng.uniform(-1, 1), rng.choice([1, 4]))])
        scored, changed = S.llm_scored(label, score)
        assert scored.label == label and -1 <= scored.score <= 1
        assert (scored.score > 0) - (scored.score < 0) == SIGN[label], (label, score, scored)
        # A score already on the label's side is kept as the LLM gave it.
        assert changed == (score is not None and scored.score != score)


def test_the_prompt_asks_for_the_score_on_the_labels_side() -> None:
    client = SaysClient({"x": ("neutral", 0.0)})
    S.by_llm(client, [("0", "x")], LLMUsage())  # type: ignore[arg-type]
    assert "0 for neutral" in client.prompts[0] and "below 0 for negative" in client.prompts[0]


def test_a_lexicon_neutral_scores_0_and_its_compound_stays_readable() -> None:
    # VADER's compounds of two survey answers (samples/feedback.csv), inside its neutral band (-0.05, 0.05).
    texts = ["The bag fee is silly. 30 cents for a paper bag?", "The app freezes when switching between delivery "
             "and pickup", "Courier was fast and polite, no complaints", "Support never answered my email."]
    compound = S.lexicon_polarity(texts)
    assert [round(c, 4) for c in compound[:2]] == [0.0258, -0.0258]
    got = S.lexicon(texts)
    assert [s.label for s in got[:2]] == ["neutral", "neutral"] and [s.score for s in got[:2]] == [0.0, 0.0]
    # A polar label keeps its compound (VADER's thresholds make its sign the label's).
    assert [s.score for s in got[2:]] == compound[2:] and all(s.label != "neutral" for s in got[2:])
    for s, c in zip(got, compound, strict=True):
        assert (s.score > 0) - (s.score < 0) == SIGN[s.label] and s.label == S.label_of(c)


class _Contrary(FakeLLM):
    """FakeLLM's labels, with a score against each: +0.8 for a negative, -0.3 for a neutral, 0.9 for a positive."""

    def complete_json(self, messages: list[dict[str, str]], schema: type[BaseModel], *, max_tokens: int = 800,
                      purpose: str = "") -> FakeResult:
        res = super().complete_json(messages, schema, max_tokens=max_tokens, purpose=purpose)
        if purpose != "thematic.sentiment":
            return res
        score = {"negative": 0.8, "neutral": -0.3, "positive": 0.9}
        return FakeResult(schema.model_validate({"responses": [
            {"id": r.id, "label": r.label, "score": score[r.label]} for r in res.value.responses]}))


def test_a_run_with_llm_sentiment_tells_one_story_in_counts_and_means_and_says_what_the_llm_said() -> None:
    from pipelines.thematic import stages

    from .stage_support import state

    items, _ = feedback(per_theme=8, seed=1)
    ctx, s = state(items, client=_Contrary(), llm="auto", sentiment="llm")
    for stage in stages.STAGES:
        stage(ctx, s)
    assert s.result is not None
    doc = s.result.model_dump(mode="json")
    labels = [a["sentiment"]["label"] for a in doc["assignments"] if a.get("sentiment")]
    assert {"negative", "neutral", "positive"} <= set(labels)  # the canned labels cover all three
    for a in doc["assignments"]:
        if a.get("sentiment"):
            sc = a["sentiment"]
            assert (sc["score"] > 0) - (sc["score"] < 0) == SIGN[sc["label"]], a
    for th in doc["themes"]:
        d = th["sentiment"]
        # The mean's sign follows the counts: no positive answer, no positive mean (and the other way round).
        assert (d["positive"] == 0) <= (d["mean"] <= 0) and (d["negative"] == 0) <= (d["mean"] >= 0), th
    n_neutral, n_negative = labels.count("neutral"), labels.count("negative")
    note = doc["sentiment"]["note"]
    assert note is not None and f"{n_neutral + n_negative} response(s)" in note, note
    assert f"{n_neutral} labelled neutral scored 0" in note and f"{n_negative} on the other side" in note
    assert "at +0.80" in note or "at -0.30" in note
