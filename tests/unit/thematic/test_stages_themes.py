"""The cluster, describe and assign stages on planted groups (the word embedder: no model is loaded)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from pipelines.thematic import stages
from pipelines.thematic.params import SeedTheme
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext, FakeLLM

from .stage_support import planted, state


def _clustered(**params: Any) -> tuple[FakeContext, stages.RunState]:
    items = [{"id": i, "text": f"response {i}"} for i in range(24)]
    ctx, s = state(items, **params)
    s.texts = [it["text"] for it in items]
    s.emb = planted(3, 8)
    stages.cluster_stage(ctx, s)
    return ctx, s


def test_cluster_finds_the_planted_groups_and_says_how_the_count_was_chosen() -> None:
    _, s = _clustered()
    assert s.k == 3 and s.centroids.shape == (3, s.emb.shape[1])
    # Each planted group of 8 is one theme.
    assert sorted(Counter(s.labels.tolist()).values()) == [8, 8, 8]
    assert all(len(set(s.labels[g * 8:(g + 1) * 8].tolist())) == 1 for g in range(3))
    assert s.choice["criterion"] and s.choice["explanation"] and s.choice["k"] == 3


def test_cluster_with_a_fixed_count_uses_it() -> None:
    _, s = _clustered(num_themes=2)
    assert s.k == 2 and s.choice["criterion"] == "fixed"


def test_cluster_restored_from_its_checkpoint_gives_the_same_labels_and_choice() -> None:
    ctx, s = _clustered()
    retry = FakeContext(checkpoints=ctx.checkpoints)
    _, again = state(s.items, retry)
    again.texts, again.emb = s.texts, s.emb
    stages.cluster_stage(retry, again)
    assert np.array_equal(again.labels, s.labels) and again.choice == s.choice
    assert again.checkpoints.resumed == ["cluster"]


def _described(client: FakeLLM | None = None) -> tuple[FakeContext, stages.RunState]:
    items, _ = feedback(per_theme=8, seed=1)
    ctx, s = state(items, client=client, llm="auto" if client else "off")
    for stage in stages.STAGES[:4]:
        stage(ctx, s)
    return ctx, s


def test_describe_labels_every_theme_by_its_keywords_without_an_llm() -> None:
    _, s = _described()
    assert s.themes and all(th.label and th.keywords and th.labelled_by == "keywords" for th in s.themes)
    assert s.levels is not None and s.usage.calls == 0
    # Every usable response belongs to exactly one theme, and the labels say which.
    members = sorted(i for th in s.themes for i in th.members)
    assert members == list(range(len(s.texts))) and s.labels.shape == (len(s.texts),)
    assert s.centroids.shape[0] == len(s.themes)


def test_describe_with_an_llm_labels_themes_through_it_and_checkpoints_its_usage() -> None:
    llm = FakeLLM()
    ctx, s = _described(llm)
    assert all(th.labelled_by == "llm" and th.label.startswith("About ") for th in s.themes)
    assert s.usage.calls == sum(1 for purpose, _ in llm.calls if purpose in ("thematic.label", "thematic.merge"))
    # A retry restores the themes and the usage they cost, without asking the LLM again.
    retry_llm = FakeLLM()
    retry = FakeContext(checkpoints=ctx.checkpoints)
    _, again = state(s.items, retry, client=retry_llm, llm="auto")
    for stage in stages.STAGES[:4]:
        stage(retry, again)
    assert retry_llm.calls == [] and again.usage == s.usage
    assert [th.label for th in again.themes] == [th.label for th in s.themes]
    assert again.checkpoints.resumed == ["clean", "embed", "cluster", "describe"]


def test_describe_sends_the_llm_quotes_redacted() -> None:
    items, _ = feedback(per_theme=8, seed=1)
    for it in items:
        it["text"] += " write to jane@example.com"
    llm = FakeLLM()
    ctx, s = state(items, client=llm, llm="auto")
    for stage in stages.STAGES[:4]:
        stage(ctx, s)
    sent = " ".join(m["content"] for _, messages in llm.calls for m in messages)
    assert "jane@example.com" not in sent and s.pii_counts["email"] > 0


def test_assign_gives_every_usable_response_its_theme() -> None:
    ctx, s = _described()
    stages.assign_stage(ctx, s)
    assert len(s.assigned) == len(s.texts)
    assert [a.themes[0][0] for a in s.assigned if a.themes] == [int(s.labels[n]) for n, a in enumerate(s.assigned)
                                                                 if a.themes]
    assert s.seed_codes is None and s.llm_sentiment is None and "assign" in s.checkpoints.timings


def test_assign_codes_a_codebook_by_embedding_and_counts_each_code() -> None:
    ctx, s = _described()
    s.params = s.params.model_copy(update={"seed_themes": [
        SeedTheme(name="Delivery", description="parcel delivery courier shipping late"),
        SeedTheme(name="Price", description="price expensive cost subscription")]})
    stages.assign_stage(ctx, s)
    assert s.seed_codes is not None and s.seed_summary is not None and len(s.seed_codes) == len(s.texts)
    coded = Counter(c.name for codes in s.seed_codes for c in codes)
    assert {row.name: row.count for row in s.seed_summary} == {"Delivery": coded["Delivery"],
                                                                      "Price": coded["Price"]}
    delivery = [n for n, t in enumerate(s.texts) if "parcel" in t.lower()]
    assert delivery and all(any(c.name == "Delivery" for c in s.seed_codes[n]) for n in delivery)
