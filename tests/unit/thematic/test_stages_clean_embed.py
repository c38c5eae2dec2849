"""The clean and embed stages, and the checkpoint rule they share: a finished stage is restored, not redone."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.thematic import mapped, stages
from shared.sdk import PermanentError
from shared.sdk.fanout_types import MapResult
from tests.support.thematic_fakes import FakeContext

from .stage_support import WordEmbedder, state

ITEMS = [
    {"id": "a", "text": "The delivery was late again"},
    {"id": "b", "text": "   "},
    {"id": "c", "text": "The delivery was late again"},
    {"id": "d", "text": "Prices went up, far too expensive"},
]


def test_a_stage_with_a_checkpoint_is_restored_without_running_and_reported_as_resumed() -> None:
    ctx = FakeContext(checkpoints={"clean-fp": b"saved"})
    cp = stages.Checkpoints(ctx, "fp")

    def never() -> bytes:
        raise AssertionError("a checkpointed stage must not run again")

    assert cp.stage("clean", never, bytes, bytes) == b"saved"
    assert cp.resumed == ["clean"] and cp.timings == {"clean": 0.0}


def test_a_stage_without_a_checkpoint_runs_once_and_is_checkpointed_under_the_fingerprint() -> None:
    ctx = FakeContext()
    cp = stages.Checkpoints(ctx, "fp")
    assert cp.stage("cluster", lambda: "value", str.encode, bytes.decode) == "value"
    assert ctx.checkpoints == {"cluster-fp": b"value"} and cp.resumed == [] and "cluster" in cp.timings


def test_clean_keeps_usable_texts_in_input_order_and_marks_the_rest_with_a_reason() -> None:
    ctx, s = state(ITEMS)
    stages.clean_stage(ctx, s)
    assert [r.status for r in s.rows] == ["ok", "empty", "exact_duplicate", "ok"]
    assert [r.id for r in s.usable] == ["a", "d"] and s.texts == [r.text for r in s.usable]
    assert s.plan is not None and s.plan.detected is None  # language "en": nothing detected
    assert "clean-fp" in ctx.checkpoints


def test_clean_restored_from_its_checkpoint_gives_the_same_rows() -> None:
    ctx, first = state(ITEMS)
    stages.clean_stage(ctx, first)
    retry = FakeContext(checkpoints=ctx.checkpoints)
    _, again = state(ITEMS, retry)
    stages.clean_stage(retry, again)
    assert again.rows == first.rows and again.checkpoints.resumed == ["clean"]


def test_clean_with_no_usable_response_is_a_permanent_error() -> None:
    ctx, s = state([{"id": 1, "text": ""}, {"id": 2, "text": "  "}])
    with pytest.raises(PermanentError, match="no usable responses"):
        stages.clean_stage(ctx, s)


def test_embed_writes_one_vector_per_usable_text_and_checkpoints_them() -> None:
    ctx, s = state(ITEMS)
    stages.clean_stage(ctx, s)
    stages.embed_stage(ctx, s)
    assert s.emb.shape == (2, WordEmbedder.info.dimensions) and s.emb.dtype == np.float32
    assert np.array_equal(mapped.from_npy(ctx.checkpoints["embed-fp"]), s.emb)


def test_embed_restored_from_its_checkpoint_does_not_embed_again() -> None:
    ctx, s = state(ITEMS)
    stages.clean_stage(ctx, s)
    stages.embed_stage(ctx, s)
    retry = FakeContext(checkpoints=ctx.checkpoints)
    _, again = state(ITEMS, retry)
    stages.clean_stage(retry, again)
    stages.embed_stage(retry, again)
    assert isinstance(again.embedder, WordEmbedder) and again.embedder.calls == []
    assert np.array_equal(again.emb, s.emb) and again.checkpoints.resumed == ["clean", "embed"]


def test_an_embedding_checkpoint_of_another_length_is_refused() -> None:
    ctx, s = state(ITEMS)
    stages.clean_stage(ctx, s)
    ctx.checkpoints["embed-fp"] = mapped.npy(np.zeros((5, 4), dtype=np.float32))
    with pytest.raises(PermanentError, match="does not match"):
        stages.embed_stage(ctx, s)


def test_embed_in_parts_checkpoints_every_part_but_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stages, "EMBED_PART", 2)
    items = [{"id": i, "text": f"answer number {word} about things"} for i, word in
             enumerate(["alpha", "bravo", "charlie", "delta", "echo"])]
    ctx, s = state(items)
    stages.clean_stage(ctx, s)
    stages.embed_stage(ctx, s)
    assert isinstance(s.embedder, WordEmbedder) and s.embedder.calls == [2, 2, 1]
    assert sorted(k for k in ctx.checkpoints if k.startswith("embedpart-")) == [
        "embedpart-2-00000-fp", "embedpart-2-00001-fp"]


class _MapContext(FakeContext):
    """``ctx.map`` answered by the word embedder, recording what the chunk workers were given."""

    def __init__(self, lose: int = 0, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.given: list[object] = []
        self.graph_saved_before_map: bool | None = None
        self.lose = lose

    def map(self, stage: str, items: list[object], fn: object, *, chunk_size: int | None = None,
            error_budget: float = 0.0) -> MapResult:
        self.given = items
        self.graph_saved_before_map = stages.GRAPH_CHOICE in self.checkpoints
        texts = [str(it[1]) if isinstance(it, list) else str(it) for it in items][self.lose:]
        size = chunk_size or len(texts)
        parts = [texts[i:i + size] for i in range(0, len(texts), size)]
        return MapResult([mapped.npy(WordEmbedder().embed(p)) for p in parts], [len(p) for p in parts])


class _FastEmbedder(WordEmbedder):
    encoder, graph = "fast", "int8"


def _fanout_state(ctx: _MapContext) -> stages.RunState:
    items = [{"id": i, "text": f"answer {w} about the delivery"} for i, w in enumerate(
        ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"])]
    _, s = state(items, ctx, fanout_min_responses=5, fanout_chunk_size=4)
    s.embedder, s.save_graph = _FastEmbedder(), True
    stages.clean_stage(ctx, s)
    return s


def test_a_large_input_embeds_on_chunk_workers_that_are_told_the_encoder_and_graph() -> None:
    ctx = _MapContext()
    s = _fanout_state(ctx)
    stages.embed_stage(ctx, s)
    assert ctx.given == [["fast", t, "int8"] for t in s.texts]
    # The graph is fixed before any chunk exists, so no chunk can run another one.
    assert ctx.graph_saved_before_map is True and ctx.checkpoints[stages.GRAPH_CHOICE] == b"int8"
    assert np.array_equal(s.emb, WordEmbedder().embed(s.texts)) and "embed_fanout" in s.checkpoints.resumed
    assert isinstance(s.embedder, WordEmbedder) and s.embedder.calls == []  # nothing embedded in this process


def test_a_map_stage_that_returns_too_few_vectors_is_a_permanent_error() -> None:
    ctx = _MapContext(lose=1)
    s = _fanout_state(ctx)
    with pytest.raises(PermanentError, match="returned 5 vectors for 6 texts"):
        stages.embed_stage(ctx, s)
