"""Partial embedding checkpoints, map stages (embed, LLM coding) through a fake context, and
embeddings from an embeddings deployment (the fake LLM server)."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import ThematicParams
from pipelines.thematic import mapped as M
from pipelines.thematic.embed import LocalEmbedder
from pipelines.thematic.result import ThematicResult
from pipelines.thematic.run import run_with
from shared.llm.client import LLMClient
from shared.sdk.fanout_types import Suspend
from tests.integration.llm.conftest import fake_llm, llm_env  # noqa: F401 - pytest fixtures
from tests.support.fake_llm_server import FakeLLMServer, RecordedRequest, Reply, chat_json, embeddings
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext, FakeLLM

stages_mod = importlib.import_module("pipelines.thematic.stages")


def _summary(doc: dict[str, Any]) -> tuple[Any, Any]:
    """What must not depend on how the job ran: themes and who is in them."""
    themes = [(t["id"], t["label"], t["count"], t["keywords"]) for t in doc["themes"]]
    assigned = [(a["response_id"], a["bucket"], [r["theme_id"] for r in a["themes"]], a.get("seed_codes"))
                for a in doc["assignments"]]
    return themes, assigned


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Texts per call of the local model's ``embed``."""
    sizes: list[int] = []
    real = LocalEmbedder.embed

    def embed(self: LocalEmbedder, texts: Any, **kw: Any) -> Any:
        sizes.append(len(texts))
        return real(self, texts, **kw)

    monkeypatch.setattr(LocalEmbedder, "embed", embed)
    return sizes


def test_embedding_resumes_from_partial_checkpoints(monkeypatch: pytest.MonkeyPatch, counted: list[int]) -> None:
    monkeypatch.setattr(stages_mod, "EMBED_PART", 16)
    items, _ = feedback(per_theme=15)  # 60 usable texts → parts of 16, 16, 16, 12
    params = ThematicParams(llm="off", min_theme_size=3)
    # Writes: clean, part 0, part 1, then the worker "dies" writing part 2.
    ctx = FakeContext(fail_checkpoint_after=3)
    with pytest.raises(RuntimeError, match="worker died"):
        run_with(ctx, params, items, client=None)
    assert counted == [16, 16, 16]
    assert sum(k.startswith("embedpart-") for k in ctx.checkpoints) == 2
    counted.clear()
    retry = FakeContext(checkpoints=ctx.checkpoints)
    doc = run_with(retry, params, items, client=None)
    assert counted == [16, 12], "only the parts after the last partial checkpoint are embedded again"
    assert doc["run"]["resumed_stages"] == ["clean", "embed_partial:32"]
    # Same result as a run that never crashed.
    assert _summary(doc) == _summary(run_with(FakeContext(), params, items, client=None))


def test_embed_fans_out_above_threshold_and_matches_in_process(counted: list[int]) -> None:
    items, _ = feedback(per_theme=15)
    base = ThematicParams(llm="off", min_theme_size=3)
    local = run_with(FakeContext(), base, items, client=None)
    params = base.model_copy(update={"fanout_min_responses": 20, "fanout_chunk_size": 16})
    ctx = FakeContext(params=params, suspend=True)
    counted.clear()
    with pytest.raises(Suspend):
        run_with(ctx, params, items, client=None)  # the map call suspends the attempt
    assert ctx.map_calls["embed"] == [(0, 16), (1, 16), (2, 16), (3, 12)]
    assert counted == [16, 16, 16, 12]
    doc = run_with(ctx, params, items, client=None)  # the re-run after fan-in
    ThematicResult.model_validate(doc)
    assert counted == [16, 16, 16, 12], "the re-run embeds nothing itself"
    assert doc["run"]["resumed_stages"] == ["clean", "embed_fanout"]
    assert _summary(doc) == _summary(local)
    # Below the threshold: in process, no map stage.
    small = FakeContext(params=base)
    run_with(small, base, items[:19], client=None)
    assert small.map_calls == {}


def test_llm_coding_fans_out_in_whole_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    items, _ = feedback(per_theme=15)
    book = [{"name": "Delivery", "description": "late parcels"}, {"name": "Pricing", "description": "prices"}]
    code = {"parcel": "Delivery", "price": "Pricing"}
    params = ThematicParams(llm="auto", min_theme_size=3, seed_themes=book, fanout_min_responses=20,
                            fanout_chunk_size=30)
    inline_llm = FakeLLM(code=code)
    inline = run_with(FakeContext(), params.model_copy(update={"fanout_min_responses": 10**5}), items,
                      client=inline_llm)
    chunk_llm = FakeLLM(code=code)
    # The chunk worker builds its own client from the settings; here: the fake.
    monkeypatch.setattr(M, "job_client", lambda p: chunk_llm)
    ctx = FakeContext(params=params)
    doc = run_with(ctx, params, items, client=FakeLLM(code=code))
    # 30 per chunk rounds down to whole coding batches of 25: the same prompts as in process.
    assert ctx.map_calls["code"] == [(0, 25), (1, 25), (2, 10)]
    assert [m for p, m in chunk_llm.calls] == [m for p, m in inline_llm.calls if p == "thematic.code"]
    assert _summary(doc) == _summary(inline)
    assert doc["run"]["llm"]["calls"] == inline["run"]["llm"]["calls"]


def _hash_vector(text: str, dims: int = 64) -> list[float]:
    v = np.zeros(dims)
    for w in re.findall(r"[a-z]+", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dims] += 1.0
    return [float(x) for x in v]


def test_embeddings_deployment_is_used_when_configured(
    fake_llm: FakeLLMServer, llm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    counted: list[int],
) -> None:
    monkeypatch.setenv("LLM_EMBEDDINGS_DEPLOYMENT", "text-embedding-3-small")

    def respond(req: RecordedRequest) -> Reply:
        if req.path.endswith("/embeddings"):
            return embeddings([_hash_vector(t) for t in req.body["input"]])
        return chat_json({"label": "Fake label", "description": "A fake description.", "merge": []})

    fake_llm.responder = respond
    items, _ = feedback(per_theme=10)
    items[0]["text"] = "Delivery late, mail me at bob@example.com"
    client = LLMClient.from_settings(cache=None)
    assert client is not None and client.embeddings_enabled
    doc = run_with(FakeContext(), ThematicParams(llm="auto", min_theme_size=3), items, client=client)
    ThematicResult.model_validate(doc)
    model = doc["run"]["embedding_model"]
    assert model["name"] == "text-embedding-3-small" and model["runtime"] == "api" and model["dimensions"] == 64
    sent = [t for r in fake_llm.requests if r.path.endswith("/embeddings") for t in r.body["input"]]
    assert len(sent) == len(items), "every usable text was embedded by the deployment"
    assert "bob@example.com" not in json.dumps(sent), "texts are redacted before they leave the process"
    assert doc["run"]["counts"]["pii_redacted"]["email"] >= 1
    assert counted == [], "the local model is not used"
    assert len(doc["themes"]) >= 2
