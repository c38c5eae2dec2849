"""Issue 23: the default sentiment (a classifier over the job's MiniLM embeddings), its weight file's integrity,
its robustness to the int8 encoder's CPU-dependent bits, the hard cases a lexicon gets wrong, and ratings on one
scale (0-10 as NPS)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic import sentiment as S
from pipelines.thematic import sentiment_model as SM
from pipelines.thematic.clean import CleanedResponse
from pipelines.thematic.document import insight_sentiment
from pipelines.thematic.embed import LazyLocalEmbedder, get_embedder
from pipelines.thematic.render import render_md
from pipelines.thematic.result import ThematicResult
from pipelines.thematic.stages import Checkpoints, RunState
from pipelines.thematic.train_sentiment import GRAPHS
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext

# (text, the label a reader gives it). Written for this test from reading survey answers, tweets and patient
# reviews: complaints in polite or positive words, and reviews that list problems but say it worked.
HARD_NEGATIVE = [
    pytest.param("Thanks for nothing.", marks=pytest.mark.xfail(
        strict=False, reason="weights 2 (films + drugs + products) call it neutral, leaning -0.26 / -0.23 by graph; "
                             "weights 1 said negative")),
    "I waited an hour on the support chat and nobody ever picked up.",
    "Customer support takes forever to reply.",
    "Contacting support feels designed to make you give up.",
    pytest.param("Great, another update and the app crashes again.", marks=pytest.mark.xfail(
        strict=False, reason="sarcasm: the classifier says neutral (leaning ~ +0.02), a known miss")),
]
HARD_POSITIVE = [
    "I had nausea and headaches for the first week, but it completely cleared my acne. So glad I tried it.",
    pytest.param(
        "Side effects were dry mouth and some dizziness, yet my blood pressure is finally under control. It works.",
        # Not strict: it passes on the VNNI graph and fails on the first int8 build (score ~ -0.01).
        marks=pytest.mark.xfail(strict=False, reason="the side-effect list can outweigh 'it works'")),
    "Lovely courier today, made my evening.",
    "Gained a little weight and feel tired in the mornings, but my panic attacks have stopped. Life changing.",
    "The battery died after two days, the screen scratches easily, but honestly it does everything I need and I "
    "love it.",
]


# The default sentiment (``ThematicParams()``, no ``sentiment`` given) on answers a lexicon reads the wrong way,
# on the vectors of each built graph of the fast encoder (a VNNI CPU's jobs get int8-vnni, any other int8).
# Complaints in positive words must not come out positive: the lexicon (the default before) calls every one of
# them positive ("support", "thanks", "free", "benefits", "party" are positive words to it). The "samples/" ones are
# answers of the bundled survey (samples/feedback.csv, its id in the comment), read and chosen by hand.
DEFAULT_NOT_POSITIVE = [
    "Support never answered my email.",  # r022; the classifier: neutral, -0.30 (the lexicon +0.40)
    "Support never answered my email",
    "Thanks for nothing.",  # neutral, about -0.25 (the lexicon +0.44)
    "Thanks for nothing",
    "The chat support is a bot that doesn't understand anything.",  # r026
    "Password reset email never shows up, not even in spam.",  # r205
    "Referral code didn't give me or my friend the credit we were promised.",  # r283 (the lexicon +0.81)
    # Written for senti (2026-12-02) after reading the training domains' product sentences ("X, but ..."):
    "Nice idea, but the refund still hasn't arrived after three weeks.",  # neutral, -0.31 (the lexicon +0.23)
]
# ... and these it calls negative outright, on both graphs.
DEFAULT_NEGATIVE = [
    "We ordered for a kids birthday party and it came so late the party was basically over. Very disappointing.",  # r015
    "Pizza came cold, cheese totally solid.",  # r068
    "Plus membership price went up but the benefits went down.",  # r108
    "The 'free delivery' promotion still charged me delivery.",  # r148
    "Chat support disconnected me twice.",  # r233
    "Customer support takes forever to reply.",  # r113
    # senti: sarcasm the classifier does read (-0.26 / -0.74 on both graphs; the lexicon +0.62 / +0.40).
    "Great, the order was marked delivered and nothing came.",
    "Perfect, another cancelled order.",
]
# Plain praise must stay positive under the default (the lexicon gets these right too: a guard, not a gain).
DEFAULT_POSITIVE = [
    "Great food, fast delivery, thank you!",
    "The driver was lovely",
    "Driver was lovely, thank you!",  # r310
    "Our usual driver knows our building and is always cheerful. Great service.",  # r230
    "Shoutout to the driver who came in the pouring rain with a smile.",  # r338
    # senti: praise after a problem or a cost (+0.82, +0.42 / +0.51, +0.80; the lexicon -0.25 on "Not cheap").
    "The case is bulky, but it protects the phone perfectly and I'm happy with it.",
    "Not cheap, but worth every penny.",
    "It took a while to arrive, but honestly the best curry I've had in ages.",
]
# Known misses of the classifier on the survey, both graphs (strict: a refit that fixes one must say so here).
# Praise that mentions a problem is read as a complaint, where the lexicon says positive (r074, r251, r175) or
# neutral (r273); and complaints without a negative word read as positive (the lexicon: positive or neutral).
_MISS = pytest.mark.xfail(strict=True, reason="a known miss of minilm-sentiment-lr 2 (docs/sentiment.md)")
DEFAULT_PRAISE_WITH_PROBLEM_WORDS = [
    pytest.param("Courier was fast and polite, no complaints", marks=_MISS),  # r074: -0.52 / -0.58
    pytest.param("My courier apologized for a small delay and was super nice about it.", marks=_MISS),  # r251
    pytest.param("My delivery guy called when he couldn't find the entrance, very polite.", marks=_MISS),  # r273
    pytest.param("Drivers have always been kind to me, even when the app messed up.", marks=_MISS),  # r175
    # Not from the survey: a template of tests/support/thematic_data.py ("staff"), -0.5 on either graph.
    pytest.param("Customer service agent was really kind and solved my issue.", marks=_MISS),
    # senti (2026-12-02), written after reading the product and drug reviews: a problem word negated ("never
    # had a problem", "can't fault", "not a single cold meal") or a problem that was put right reads as a
    # complaint, -0.41 to -0.77 on both graphs. None is fixed by the designs of bench/sentiment_variants.py
    # that were measured but not adopted (docs/sentiment.md, "Variants").
    pytest.param("Never had a single problem with any order.", marks=_MISS),  # the lexicon -0.40 too
    pytest.param("The first delivery was late, but they refunded it without me even asking. Impressed.",
                 marks=_MISS),
    pytest.param("I can't fault them.", marks=_MISS),
    pytest.param("The app crashed once, but support sorted it out in minutes and gave me a voucher.", marks=_MISS),
    pytest.param("Dizzy for two days, then nothing but relief. My migraines are gone.", marks=_MISS),
    pytest.param("Not a single cold meal in a year of ordering.", marks=_MISS),
]
DEFAULT_FLAT_COMPLAINTS = [
    pytest.param("Support should be faster for Plus members at least.", marks=_MISS),  # r297: +0.38 / +0.40
    pytest.param("Ordered breakfast, got it around lunchtime.", marks=_MISS),  # r177: +0.49 / +0.44
    pytest.param("The Plus subscription used to be worth it but now there are still fees on most orders.",
                 marks=_MISS),  # r039: +0.31 / +0.37
    # senti: a faint-praise or ironic complaint reads as praise (+0.10 to +0.81 on both graphs).
    pytest.param("The app has all the features you could want, but none of them work when you need them.",
                 marks=_MISS),
    pytest.param("The battery life is adequate at best, and it dies by lunchtime.", marks=_MISS),
    pytest.param("Thanks a lot for charging me twice.", marks=_MISS),
    pytest.param("Love how the driver just left my food at the wrong door.", marks=_MISS),
    pytest.param("The new menu looks amazing, shame half of it is always sold out.", marks=_MISS),
]


def _default_sentiment(texts: list[str], graph: str) -> tuple[Any, list[S.Scored]]:
    """The result's sentiment section and the scores of ``texts`` under the default params, as the insight
    stage decides them for a job whose vectors come from the fast encoder's ``graph``."""
    embedder = LazyLocalEmbedder("fast", graph)
    s = RunState(params=ThematicParams(), items=[], client=None, embedder=embedder,
                 checkpoints=Checkpoints(FakeContext(), "fp"))
    s.usable = [CleanedResponse(n, n, t, "ok") for n, t in enumerate(texts)]
    s.emb = np.asarray(embedder.embed(texts), dtype=np.float32)
    info, scored = insight_sentiment(s)
    assert info is not None and scored is not None and all(x is not None for x in scored)
    return info, [x for x in scored if x is not None]


@pytest.mark.parametrize("graph", GRAPHS)
def test_the_default_is_the_classifier_on_either_graphs_vectors(graph: str) -> None:
    info, scored = _default_sentiment(["Thanks for nothing."], graph)
    assert info.document() == {"source": "model", "field": None, "model": S.MODEL_NAME, "scale": None, "scored": 1}
    assert scored == S.by_model(np.asarray(get_embedder("fast", graph).embed(["Thanks for nothing."]), np.float32))


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("text", DEFAULT_NOT_POSITIVE)
def test_under_the_default_a_complaint_in_positive_words_is_not_positive(text: str, graph: str) -> None:
    assert S.lexicon([text])[0].label == "positive"  # what the old default said
    (scored,) = _default_sentiment([text], graph)[1]
    assert scored.label != "positive" and _leans_negative(scored, text, graph), scored


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("text", DEFAULT_NEGATIVE)
def test_under_the_default_a_complaint_in_positive_words_is_negative(text: str, graph: str) -> None:
    assert S.lexicon([text])[0].label == "positive"
    (scored,) = _default_sentiment([text], graph)[1]
    assert scored.label == "negative", scored


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("text", DEFAULT_POSITIVE)
def test_under_the_default_plain_praise_is_positive(text: str, graph: str) -> None:
    (scored,) = _default_sentiment([text], graph)[1]
    assert scored.label == "positive" and scored.score > 0.3, scored


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("text", DEFAULT_PRAISE_WITH_PROBLEM_WORDS)
def test_under_the_default_praise_that_mentions_a_problem_is_not_negative(text: str, graph: str) -> None:
    (scored,) = _default_sentiment([text], graph)[1]
    assert scored.label != "negative" and scored.score > 0, scored


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("text", DEFAULT_FLAT_COMPLAINTS)
def test_under_the_default_a_complaint_without_negative_words_is_not_positive(text: str, graph: str) -> None:
    (scored,) = _default_sentiment([text], graph)[1]
    assert scored.label != "positive" and _leans_negative(scored, text, graph), scored


def _leans_negative(scored: S.Scored, text: str, graph: str) -> bool:
    """A negative scores below 0; a neutral scores 0 (label and score on one scale, 2026-12-08), so its lean is
    read from the classifier: P(positive) - P(negative) < 0."""
    if scored.label == "negative":
        return scored.score < 0
    emb = np.asarray(LazyLocalEmbedder("fast", graph).embed([text]), dtype=np.float32)
    return scored.score == 0 and S.model_polarity(emb)[0] < 0


def test_the_lexicon_stays_the_explicit_option_and_the_fallback_for_other_encoders() -> None:
    text = "Support never answered my email."
    s = RunState(params=ThematicParams(sentiment="lexicon"), items=[], client=None,
                 embedder=LazyLocalEmbedder("fast"), checkpoints=Checkpoints(FakeContext(), "fp"))
    s.usable = [CleanedResponse(0, 0, text, "ok")]
    s.emb = _embed([text])
    info, scored = insight_sentiment(s)
    assert info is not None and info.document() == {
        "source": "lexicon", "field": None, "model": S.LEXICON_MODEL, "scale": None, "scored": 1}
    assert scored == S.lexicon([text])
    # The default on a job another encoder embedded (here: multilingual, as for language "de"): the lexicon,
    # and the note says why. Its vectors are not read, so a placeholder of another width stands in for them.
    s = RunState(params=ThematicParams(), items=[], client=None, embedder=LazyLocalEmbedder("multilingual"),
                 checkpoints=Checkpoints(FakeContext(), "fp"))
    s.usable = [CleanedResponse(0, 0, text, "ok")]
    s.emb = np.zeros((1, 512), np.float32)
    info, scored = insight_sentiment(s)
    assert info is not None and info.source == "lexicon" and scored == S.lexicon([text])
    assert info.note is not None and "reads only the fast encoder's vectors" in info.note, info
    # And that the lexicon reads English only: answers in other languages all came out neutral, unexplained.
    assert "an answer in another language scores neutral (0)" in info.note, info


def _embed(texts: list[str]) -> np.ndarray:
    return np.asarray(get_embedder("fast").embed(texts), dtype=np.float32)


def test_the_weight_file_is_hash_checked_and_shaped() -> None:
    raw = SM.weights_path().read_bytes()
    w = SM.parse(raw)
    assert w.coef.shape == (3, 384) and w.intercept.shape == (3,)
    # One changed digit is refused, and so is a well-hashed file of the wrong shape.
    doc = json.loads(raw)
    doc["intercept"][0] += 1
    altered = json.dumps(doc).encode()
    with pytest.raises(SM.SentimentModelError, match="sha256"):
        SM.parse(altered)
    doc["coef"] = doc["coef"][:2]
    bad = json.dumps(doc).encode()
    with pytest.raises(SM.SentimentModelError, match="classes"):
        SM.parse(bad, hashlib.sha256(bad).hexdigest())
    with pytest.raises(SM.SentimentModelError, match="dimensions"):
        SM.probabilities(np.zeros((2, 768), np.float32))


@pytest.mark.parametrize("text", HARD_NEGATIVE)
def test_complaints_in_positive_words_are_negative(text: str) -> None:
    (scored,) = S.by_model(_embed([text]))
    assert scored.label == "negative" and scored.score < 0, scored


@pytest.mark.parametrize("text", HARD_POSITIVE)
def test_a_review_that_lists_problems_but_says_it_worked_is_positive(text: str) -> None:
    (scored,) = S.by_model(_embed([text]))
    assert scored.label == "positive" and scored.score > 0, scored


def test_support_never_answered_leans_negative_where_the_lexicon_says_positive() -> None:
    text = "Support never answered my email."
    assert S.lexicon([text])[0].label == "positive"  # "support" is a positive word to VADER: +0.40
    emb = _embed([text])
    (scored,) = S.by_model(emb)
    # Honest about the limit: the classifier leans negative but is not sure enough to say so (it says
    # neutral, P(positive) - P(negative) about -0.25 with weights 2, -0.13 with weights 1); see docs/sentiment.md
    # ("Sentiment agreement"). A neutral scores 0 (label and score on one scale, 2026-12-08); the lean is kept apart.
    assert scored.label != "positive" and scored.score <= 0 and S.model_polarity(emb)[0] < 0, scored


def test_a_neutral_answer_scores_0_though_it_leans() -> None:
    # Found by researcher45: "Need more halal restaurants" was neutral at -0.22, so its theme's mean disagreed with
    # its counts. Its score is now 0; the lean stays readable (model_polarity, the bench's 2-way reading).
    emb = _embed(["Need more halal restaurants"])
    (scored,) = S.by_model(emb)
    assert scored == S.Scored("neutral", 0.0), scored
    assert S.model_polarity(emb)[0] < -0.1


@pytest.mark.xfail(strict=False, reason="the MiniLM classifier calls it neutral (leaning ~ -0.25; a neutral scores 0): a known miss")
def test_support_never_answered_is_negative() -> None:
    assert S.by_model(_embed(["Support never answered my email."]))[0].label == "negative"


def test_labels_do_not_depend_on_the_last_bits_of_the_int8_encoder() -> None:
    # Between CPUs (VNNI or not) the int8 graph's vectors differ by cosine ~0.997; perturb by more than that.
    texts = ["Thanks for nothing.", "Customer support takes forever to reply.", "Lovely courier today.",
             "The app is fine.", "I order every Friday.", "Fees are too high.", "Support never answered my email.",
             "Great food, fast delivery, friendly driver.", "The refund took three weeks and nobody replied."]
    emb = _embed(texts)
    base = S.by_model(emb)
    base_lean = S.model_polarity(emb)
    rng = np.random.default_rng(0)
    agree, total, moved = 0, 0, 0.0
    for _ in range(20):
        noisy = emb + rng.normal(0, 0.004, emb.shape).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        assert float(np.min(np.sum(noisy * emb, axis=1))) > 0.99
        got = S.by_model(noisy)
        agree += sum(a.label == b.label for a, b in zip(base, got, strict=True))
        # The lean moves little; the score too where the label holds (a flip to or from neutral moves it to or
        # from 0, as a rating's score jumps at its band's edge).
        moved = max(moved, *(abs(a - b) for a, b in zip(base_lean, S.model_polarity(noisy), strict=True)),
                    *(abs(a.score - b.score) for a, b in zip(base, got, strict=True) if a.label == b.label))
        total += len(texts)
    # Scores move little; a label flips only for answers that sit on a class boundary (score near 0, like
    # "The app is fine."): measured 0.905 of labels kept at this noise, which is above the int8 spread.
    assert moved < 0.2 and agree / total >= 0.85, (moved, agree / total)


def test_the_weights_are_fitted_on_every_graph_and_read_both_alike() -> None:
    # A VNNI CPU embeds with the int8-vnni graph, any other with int8: the weights were fitted on both graphs'
    # vectors stacked (train_sentiment.py), so one answer gets one label whichever CPU ran the job.
    assert json.loads(SM.weights_path().read_bytes())["trained_on"]["graphs"] == list(GRAPHS)
    texts = ["Thanks for nothing.", "Customer support takes forever to reply.", "Lovely courier today.",
             "I order every Friday.", "Fees are too high.", "Great food, fast delivery, friendly driver.",
             "The refund took three weeks and nobody replied.", "The app keeps logging me out.",
             "Best pizza in town, always hot.", "The driver was rude and the soup was cold."]
    embs = [np.asarray(get_embedder("fast", g).embed(texts), dtype=np.float32) for g in GRAPHS]
    by_graph = [S.by_model(e) for e in embs]
    leans = [S.model_polarity(e) for e in embs]
    for other, lean in zip(by_graph[1:], leans[1:], strict=True):
        pairs = list(zip(by_graph[0], other, strict=True))
        # Measured: leans (P(positive) - P(negative)) within 0.04 of each other; one label flips at a class boundary
        # ("rude ... cold": negative -0.37 on int8, neutral on int8-vnni, which scores 0 since 2026-12-08), none
        # changes sign.
        assert max(abs(a - b) for a, b in zip(leans[0], lean, strict=True)) < 0.1, pairs
        assert all(abs(a.score - b.score) < 0.1 for a, b in pairs if a.label == b.label), pairs
        assert all((a.score > 0) == (b.score > 0) for a, b in pairs), pairs
        assert sum(a.label == b.label for a, b in pairs) >= len(pairs) - 1, pairs


def test_the_model_reads_only_the_fast_encoders_vectors() -> None:
    assert S.model_applies(LazyLocalEmbedder("fast"))
    assert not S.model_applies(LazyLocalEmbedder("multilingual"))
    assert not S.model_applies(object())  # an embeddings deployment has no local encoder


def test_a_0_to_10_rating_scores_label_and_mean_on_one_scale_the_themes_nps() -> None:
    scale = S.rating_scale([0, 6, 7, 9, 10])
    assert isinstance(scale, S.RatingScale) and scale.kind == "score10"
    # Six 6s are six detractors: the old linear score called each +0.2, so "0 positive, 6 negative, mean +0.2".
    six = [S.from_rating(6, scale) for _ in range(6)]
    assert S.distribution(six, nps=True) == {"positive": 0, "neutral": 0, "negative": 6, "mean": -1.0, "nps": -100.0}
    # 3 promoters, 1 passive, 2 detractors of 6: NPS = (3 - 2) / 6 = +16.7, by hand.
    mixed = [S.from_rating(v, scale) for v in (9, 10, 9, 8, 0, 5)]
    got = S.distribution(mixed, nps=True)
    assert (got["positive"], got["neutral"], got["negative"], got["nps"]) == (3, 1, 2, 16.7)
    # Stars stay linear, and their sign is their label's.
    stars = S.rating_scale([1, 2, 3, 4, 5])
    assert isinstance(stars, S.RatingScale)
    assert [(s.label, s.score) for s in (S.from_rating(v, stars) for v in (2, 3, 4)) if s] == [
        ("negative", -0.5), ("neutral", 0.0), ("positive", 0.5)]


def _doc(source: str, scale: str | None, sentiment: dict[str, object]) -> dict[str, object]:
    theme = {"id": "t1", "label": "Fees", "description": "", "keywords": [], "count": 6, "share": 1.0,
             "quotes": [], "labelled_by": "keywords", "sentiment": sentiment}
    return {"schema_version": "1.2", "themes": [theme], "assignments": [],
            "run": {"counts": {"input": 6, "usable": 6, "other": 0}},
            "sentiment": {"source": source, "field": "nps" if source == "metadata" else None, "scale": scale}}


def test_the_report_says_which_source_made_the_sentiment_and_shows_nps_for_0_to_10() -> None:
    md = render_md(_doc("metadata", "score10",
                        {"positive": 0, "neutral": 0, "negative": 6, "mean": -1.0, "nps": -100.0}))[1].decode()
    assert "source: metadata" in md and "| Theme | Positive | Neutral | Negative | NPS |" in md
    assert "| Fees | 0 | 0 | 6 | -100.0 |" in md
    md = render_md(_doc("model", None, {"positive": 1, "neutral": 0, "negative": 5, "mean": -0.52}))[1].decode()
    assert "by the sentiment model over the embeddings (source: model)" in md and "| Mean |" in md
    assert "| Fees | 1 | 0 | 5 | -0.52 |" in md


def test_sentiment_model_through_the_pipeline_scores_every_usable_response_from_the_embeddings() -> None:
    items, _ = feedback(per_theme=15, seed=2)
    pipeline: Any = PIPELINE  # validate_input is typed optional in the SDK
    doc = pipeline.run(FakeContext(), ThematicParams(llm="off", min_theme_size=5, sentiment="model"),
                       pipeline.validate_input(items))
    ThematicResult.model_validate(doc)
    assert doc["sentiment"]["source"] == "model" and doc["sentiment"]["model"] == S.MODEL_NAME
    assert doc["sentiment"]["scored"] == doc["run"]["counts"]["usable"]
    usable = [a for a in doc["assignments"] if a["bucket"] != "unusable"]
    assert all(a["sentiment"]["label"] in S.LABELS and -1 <= a["sentiment"]["score"] <= 1 for a in usable)
