"""The insight and render stages, and the loop: the result document is built from the state the stages fill."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from pipelines.thematic import sentiment as sentiments
from pipelines.thematic import stages
from pipelines.thematic.embed import ModelInfo
from pipelines.thematic.result import ThematicResult
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext

from .stage_support import state


def _assigned(items: list[dict[str, Any]], **params: Any) -> tuple[FakeContext, stages.RunState]:
    ctx, s = state(items, **params)
    for stage in stages.STAGES[:5]:
        stage(ctx, s)
    return ctx, s


def _items(seed: int = 1) -> list[dict[str, Any]]:
    items, _ = feedback(per_theme=8, seed=seed)
    items.append({"id": "blank", "text": ""})
    return items


def test_the_loop_runs_the_stages_in_order() -> None:
    assert [f.__name__ for f in stages.STAGES] == [
        "clean_stage", "embed_stage", "cluster_stage", "describe_stage", "assign_stage", "insight_stage",
        "render_stage"]


def test_insight_by_default_falls_back_to_the_lexicon_when_the_fast_encoder_did_not_embed_the_job() -> None:
    # The word embedder stands for any other encoder (multilingual, an embeddings deployment): the default
    # classifier cannot read its vectors, so every usable response is scored by the lexicon, and the note says why.
    ctx, s = _assigned(_items())
    stages.insight_stage(ctx, s)
    assert s.sentiment is not None and s.sentiment.source == "lexicon"
    assert s.sentiment.model == sentiments.LEXICON_MODEL
    assert s.sentiment.note is not None and "fake-words" in s.sentiment.note
    assert s.scored == sentiments.lexicon([r.text for r in s.usable]) and len(s.usable) == s.sentiment.scored
    assert s.recode is None and "total" in s.checkpoints.timings


class _FastWords:
    """A stand-in for the fast encoder (``encoder == "fast"``, 384 dimensions) without its model: hashed words."""

    encoder = "fast"

    def __init__(self, graph: str = "int8") -> None:
        self.info = ModelInfo("fake-fast", "fake-minilm==0", "f00d", 384, 128, runtime="fake", graph=graph)

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> NDArray[np.float32]:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for n, text in enumerate(texts):
            for word in text.lower().split():
                out[n, int(hashlib.md5(word.encode()).hexdigest()[:6], 16) % 384] += 1.0
            out[n] /= max(float(np.linalg.norm(out[n])), 1e-9)
        if on_batch is not None:
            on_batch(len(texts))
        return out


def test_insight_by_default_scores_with_the_classifier_over_the_fast_encoders_vectors() -> None:
    ctx, s = state(_items())
    s.embedder = _FastWords()
    for stage in stages.STAGES[:6]:
        stage(ctx, s)
    assert s.sentiment is not None and s.sentiment.document() == {
        "source": "model", "field": None, "model": sentiments.MODEL_NAME, "scale": None, "scored": len(s.usable)}
    assert s.scored == sentiments.by_model(s.emb)
    # The lexicon is still there when asked for, with no note.
    ctx, s = state(_items(), sentiment="lexicon")
    s.embedder = _FastWords()
    for stage in stages.STAGES[:6]:
        stage(ctx, s)
    assert s.sentiment is not None and s.sentiment.source == "lexicon" and s.sentiment.note is None
    assert s.scored == sentiments.lexicon([r.text for r in s.usable])


@pytest.mark.parametrize("graph", ["", "fp16"])
def test_insight_by_default_uses_the_lexicon_on_a_minilm_file_the_weights_were_not_fitted_on(graph: str) -> None:
    # "": the legacy MiniLM file (a deployment packaged without the built graphs); "fp16": a graph not in
    # the weight file's trained_on.graphs. Same encoder name, other vectors: the lexicon scores, the note says why.
    ctx, s = state(_items())
    s.embedder = _FastWords(graph)
    for stage in stages.STAGES[:6]:
        stage(ctx, s)
    assert s.sentiment is not None and s.sentiment.source == "lexicon"
    assert s.sentiment.note is not None and (f"graph {graph}" if graph else "fake-minilm==0") in s.sentiment.note
    assert "int8, int8-vnni" in s.sentiment.note
    assert s.scored == sentiments.lexicon([r.text for r in s.usable])


def test_insight_with_sentiment_off_writes_no_sentiment() -> None:
    ctx, s = _assigned(_items(), sentiment="off")
    stages.insight_stage(ctx, s)
    assert s.sentiment is None and s.scored is None


def test_insight_reads_a_rating_from_metadata_when_asked() -> None:
    items = _items()
    for n, it in enumerate(items):
        it["metadata"] = {"stars": 1 + n % 5}
    ctx, s = _assigned(items, sentiment_from="stars")
    stages.insight_stage(ctx, s)
    assert s.sentiment is not None and s.sentiment.document() == {
        "source": "metadata", "field": "stars", "model": None, "scale": "stars", "rating_range": "1-5",
        "scale_from": "inferred", "scored": len(s.usable)}
    by_stars = {it["id"]: it["metadata"]["stars"] for it in items}
    assert s.scored is not None
    for r, x in zip(s.usable, s.scored, strict=True):
        assert x is not None and (x.label == "negative") == (by_stars[r.id] <= 2)


def test_render_builds_a_valid_result_whose_counts_add_up() -> None:
    ctx, s = _assigned(_items())
    stages.insight_stage(ctx, s)
    stages.render_stage(ctx, s)
    assert s.result is not None
    doc = s.result.document()
    ThematicResult.model_validate(doc)
    counts = doc["run"]["counts"]
    assert counts["responses"] == len(s.items) and counts["usable"] == len(s.usable)
    assert counts["themed"] + counts["other"] == counts["usable"] and counts["unusable"]["empty"] == 1
    # One assignment per response, in input order; a theme's count is its assignments'.
    assert [a["response_id"] for a in doc["assignments"]] == [it["id"] for it in s.items]
    for theme in doc["themes"]:
        assert theme["count"] == sum(1 for a in doc["assignments"] for r in a["themes"]
                                     if r["theme_id"] == theme["id"])
    assert [t["count"] for t in doc["themes"]] == sorted((t["count"] for t in doc["themes"]), reverse=True)
    assert doc["run"]["theme_count"]["explanation"].startswith(doc["run"]["theme_count"]["summary"])
    assert doc["instrument"]["n"] == len(s.usable) and ctx.progress_calls[-1][0] == "done"


def test_render_puts_each_responses_sentiment_on_its_assignment() -> None:
    ctx, s = _assigned(_items())
    stages.insight_stage(ctx, s)
    stages.render_stage(ctx, s)
    assert s.result is not None and s.scored is not None
    by_id = {a["response_id"]: a for a in s.result.document()["assignments"]}
    for r, x in zip(s.usable, s.scored, strict=True):
        assert by_id[r.id]["sentiment"] == (x.to_json() if x is not None else None)
    assert "sentiment" not in by_id["blank"]


def test_render_with_breakdown_by_tables_each_segment() -> None:
    items = _items()
    for n, it in enumerate(items):
        it["metadata"] = {"plan": "pro" if n % 2 else "free"}
    ctx, s = _assigned(items, breakdown_by=["plan"], min_group_size=5)
    stages.insight_stage(ctx, s)
    stages.render_stage(ctx, s)
    assert s.result is not None
    [table] = s.result.document()["breakdowns"]
    assert table["field"] == "plan" and {g["value"] for g in table["groups"]} == {"pro", "free"}


def test_the_whole_loop_returns_the_render_stages_result() -> None:
    ctx, s = state(_items())
    doc = stages.run_stages(ctx, s)
    assert s.result is not None and doc == s.result.document() and list(doc["run"]["timings_seconds"]) == [
        "clean", "embed", "cluster", "describe", "assign", "total", "insight"]


def test_the_loop_without_a_render_stage_is_a_bug_not_a_result() -> None:
    ctx, s = state(_items())
    with pytest.raises(RuntimeError, match="render stage"):
        stages.run_stages(ctx, s, stages.STAGES[:-1])


def _rated(seed: int = 2) -> list[dict[str, Any]]:
    # A 0-10 likelihood-to-recommend question whose answers happen to lie in 1-5 (an unhappy panel).
    items = _items(seed)
    for n, it in enumerate(items):
        it["metadata"] = {"ltr": 1 + n % 5}
    return items


def test_a_declared_scale_wins_over_the_inferred_one_for_label_mean_nps_and_breakdown() -> None:
    from pipelines.thematic.edit import edit_result

    items = _rated()
    _, s = state(items, sentiment_from="ltr", breakdown_by=["ltr"], min_group_size=1)
    inferred = stages.run_stages(FakeContext(), s)
    _, s = state(items, sentiment_from={"key": "ltr", "scale": "0-10"}, breakdown_by=["ltr"], min_group_size=1)
    declared = stages.run_stages(FakeContext(), s)
    # Inferred: 1-5 reads as stars (a 5 is positive); declared 0-10: every answer is a detractor (NPS 0-6).
    assert {k: inferred["sentiment"][k] for k in ("scale", "rating_range", "scale_from")} == {
        "scale": "stars", "rating_range": "1-5", "scale_from": "inferred"}
    assert {k: declared["sentiment"][k] for k in ("scale", "rating_range", "scale_from")} == {
        "scale": "score10", "rating_range": "0-10", "scale_from": "declared"}
    by_id = {str(it["id"]): it["metadata"]["ltr"] for it in items}
    for a in inferred["assignments"]:
        if a.get("sentiment"):
            assert (a["sentiment"]["label"] == "positive") == (by_id[str(a["response_id"])] >= 4)
    rated = [a for a in declared["assignments"] if a.get("sentiment")]
    assert rated and all(a["sentiment"] == {"label": "negative", "score": -1.0} for a in rated)
    # The theme's mean and NPS are on the declared scale: all detractors is NPS -100 (stars have no NPS).
    for t in declared["themes"]:
        assert t["sentiment"]["mean"] == -1.0 and t["sentiment"]["nps"] == -100.0
        assert t["sentiment"]["positive"] == 0
    assert all("nps" not in t["sentiment"] for t in inferred["themes"])
    assert any(t["sentiment"]["positive"] > 0 for t in inferred["themes"])
    # A breakdown by the same key groups it on the declared scale too: NPS groups, not a group per value.
    assert inferred["breakdowns"][0]["kind"] == "categorical"
    assert [g["value"] for g in inferred["breakdowns"][0]["groups"]] == ["1", "2", "3", "4", "5"]
    assert declared["breakdowns"][0]["kind"] == "nps"
    assert [g["value"] for g in declared["breakdowns"][0]["groups"]] == ["detractor"]
    ThematicResult.model_validate(declared)
    # A codebook edit recomputes the breakdown from the stored result: still on the declared scale.
    a, b = declared["themes"][0]["id"], declared["themes"][1]["id"]
    merged = edit_result(declared, {"edits": [{"op": "merge", "themes": [a, b]}]}, items)
    assert merged["breakdowns"][0]["kind"] == "nps"


def test_declared_one_to_seven_and_one_to_ten_scales_read_by_their_bands() -> None:
    seven, ten = sentiments.declared_scale("1-7"), sentiments.declared_scale("1-10")
    labels = {n: sentiments.from_rating(n, seven) for n in range(1, 8)}
    assert [labels[n].label for n in range(1, 8)] == ["negative"] * 3 + ["neutral"] + ["positive"] * 3  # type: ignore[union-attr]
    assert [labels[n].score for n in (1, 4, 7)] == [-1.0, 0.0, 1.0]  # type: ignore[union-attr]
    tens = [sentiments.from_rating(n, ten) for n in range(1, 11)]
    assert [x.label for x in tens] == ["negative"] * 4 + ["neutral"] * 2 + ["positive"] * 4  # type: ignore[union-attr]
    assert tens[0].score == -1.0 and tens[-1].score == 1.0  # type: ignore[union-attr]
    # 1-5 declared reads as inferred stars; both name their range, only one is declared.
    assert sentiments.declared_scale("1-5").kind == "stars" == sentiments.rating_scale([1, 5]).kind  # type: ignore[union-attr]
    assert sentiments.rating_scale([1, 5]) == sentiments.RatingScale("stars", 1.0, 5.0, "1-5", False)


def test_theme_ids_follow_the_counts_shown_with_copies_counted() -> None:
    # A small theme's answer sent 12 times over (count_duplicates): its copies make it the largest theme, so it is
    # t1 and listed first; the describe stage numbered it last (by distinct members), and it was listed first as t6.
    items, _ = feedback(per_theme=8, seed=1)
    ctx, s = state(items)
    plain = stages.run_stages(ctx, s)
    last = plain["themes"][-1]
    first = next(a["response_id"] for a in plain["assignments"] if a["themes"] and a["themes"][0]["theme_id"] == last["id"])
    text = next(it["text"] for it in items if it["id"] == first)
    ctx, s = state([*items, *({"id": f"copy{n}", "text": text} for n in range(12))], count_duplicates=True)
    doc = stages.run_stages(ctx, s)
    themes = doc["themes"]
    assert [t["id"] for t in themes] == [f"t{n}" for n in range(1, len(themes) + 1)]
    assert themes[0]["label"] == last["label"] and themes[0]["count"] > plain["themes"][0]["count"]
    assert [t["count"] for t in themes] == sorted((t["count"] for t in themes), reverse=True)
    ids = {t["id"] for t in themes}
    for a in doc["assignments"]:
        assert {r["theme_id"] for r in a["themes"]} <= ids
    for t in themes:  # sub-themes carry their theme's new id, numbered by their counts
        subs = [x for x in doc["subthemes"] if x["parent"] == t["id"]]
        assert t["subthemes"] == [f"{t['id']}.{n}" for n in range(1, len(subs) + 1)]
        assert sorted(x["id"] for x in subs) == t["subthemes"]
        assert [x["count"] for x in sorted(subs, key=lambda x: x["id"])] == sorted((x["count"] for x in subs), reverse=True)
    assert {a.get("fine") for a in doc["assignments"]} - {None} <= {x["id"] for x in doc["subthemes"]}
