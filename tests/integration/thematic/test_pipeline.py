"""The whole pipeline on small synthetic feedback with the real embedded model and a fake platform context."""

from __future__ import annotations

import importlib
import json
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import PIPELINE, ThematicParams
from pipelines.thematic.embed import (
    GRAPH_INFO,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    ModelIntegrityError,
    fast_graph,
    get_embedder,
    verify,
)
from pipelines.thematic.result import ThematicResult
from pipelines.thematic.run import run_with
from shared.core.errors import Cancelled, PermanentError
from tests.support.thematic_data import feedback
from tests.support.thematic_fakes import FakeContext, FakeLLM

stages_mod = importlib.import_module("pipelines.thematic.stages")


def _nmi(a: list[Any], b: list[Any]) -> float:
    _, ai = np.unique(np.array(a, dtype=str), return_inverse=True)
    _, bi = np.unique(np.array(b, dtype=str), return_inverse=True)
    joint = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(joint, (ai, bi), 1)
    p = joint / joint.sum()
    pa, pb = p.sum(1), p.sum(0)
    nz = p > 0
    mi = float((p[nz] * np.log(p[nz] / np.outer(pa, pb)[nz])).sum())
    ha, hb = -float((pa * np.log(pa)).sum()), -float((pb * np.log(pb)).sum())
    return 2 * mi / (ha + hb) if ha + hb else 1.0


def test_embedder_integrity_and_semantics(tmp_path: Any) -> None:
    e = get_embedder()
    v = e.embed(["The parcel arrived late", "Delivery was slow", "The price is too high"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]
    # Order is kept despite length sorting; the same text embeds the same alone or in a batch.
    assert np.allclose(e.embed(["Delivery was slow"])[0], v[1], atol=1e-3)
    assert e.token_counts(["word " * 1000])[0] == 256
    bad = tmp_path / "x"
    bad.write_bytes(b"nope")
    with pytest.raises(ModelIntegrityError):
        verify(bad, MODEL_SHA256)
    assert TOKENIZER_SHA256.startswith("be50c362")


def test_run_finds_themes_and_validates() -> None:
    items, truth = feedback(per_theme=15)
    items += [{"id": "e", "text": "   "}, {"id": "g", "text": "qwrtzxcvbn"}, {"id": "d", "text": items[0]["text"]}]
    ctx = FakeContext()
    doc = PIPELINE.run(ctx, ThematicParams(llm="off", min_theme_size=3), PIPELINE.validate_input(items))
    ThematicResult.model_validate(doc)
    assert doc["schema_version"] == "1.7"
    themes = doc["themes"]
    # The synthetic set has 4 themes written from 5 templates each; splitting
    # by template is legitimate, mixing themes is not.
    assert 3 <= len(themes) <= 20
    for t in themes:
        assert "cluster" not in t["label"].lower() and t["keywords"]
        assert 1 <= len(t["quotes"]) <= 5
        assert len({q["text"] for q in t["quotes"]}) == len(t["quotes"])
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    assert by_id["e"]["reason"] == "empty" and by_id["g"]["reason"] == "gibberish"
    assert by_id["d"]["reason"] == "exact_duplicate" and by_id["d"]["duplicate_of"] == 0
    pred = [by_id[i]["themes"][0]["theme_id"] if by_id[i]["themes"] else "other" for i in range(len(truth))]
    assert _nmi(truth, pred) > 0.6
    for tid in set(pred) - {"other"}:
        members = [truth[i] for i, p in enumerate(pred) if p == tid]
        assert max(members.count(m) for m in set(members)) >= 0.8 * len(members)
    run = doc["run"]
    assert run["theme_count"]["explanation"] and run["embedding_model"]["graph"] == fast_graph().key
    assert run["embedding_model"]["sha256"] == GRAPH_INFO[fast_graph().key].sha256
    assert set(run["timings_seconds"]) >= {"clean", "embed", "cluster", "describe", "assign"}
    assert run["counts"]["unusable"]["empty"] == 1 and not run["llm"]["used"]
    stages = [p[0] for p in ctx.progress_calls]
    assert stages.index("clean") < stages.index("embed") < stages.index("cluster")
    assert stages[-1] == "done"
    ctype, body = PIPELINE.exports["csv"](doc, items)
    lines = body.decode().splitlines()
    assert ctype.startswith("text/csv") and lines[0].startswith("response_id,theme_id,theme_label,confidence,bucket")
    assert lines[0].split(",")[9] == "text"
    assert len(lines) == 1 + len(items)
    ctype, md = PIPELINE.renderers["md"](doc)
    assert b"# Thematic analysis" in md and themes[0]["label"].encode() in md


def test_retry_resumes_without_embedding_again(monkeypatch: pytest.MonkeyPatch) -> None:
    items, _ = feedback(per_theme=6)
    params = ThematicParams(llm="off", min_theme_size=2)
    ctx = FakeContext()
    calls = {"n": 0}
    real = stages_mod._embed

    def counting(*a: Any) -> Any:
        calls["n"] += 1
        return real(*a)

    monkeypatch.setattr(stages_mod, "_embed", counting)

    # First attempt crashes in the cluster stage, after embeddings were checkpointed.
    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("worker died")

    monkeypatch.setattr(stages_mod.clustering, "cluster", boom)
    with pytest.raises(RuntimeError):
        run_with(ctx, params, items, client=None)
    assert calls["n"] == 1 and any(k.startswith("embed-") for k in ctx.checkpoints)
    monkeypatch.undo()
    monkeypatch.setattr(stages_mod, "_embed", counting)
    retry = FakeContext(checkpoints=ctx.checkpoints)
    doc = run_with(retry, params, items, client=None)
    assert calls["n"] == 1, "a retry must not embed again"
    assert doc["run"]["resumed_stages"] == ["clean", "embed"]
    # A different input never reuses those checkpoints.
    other = [dict(i, text=i["text"] + " x") for i in items]
    run_with(FakeContext(checkpoints=ctx.checkpoints), params, other, client=None)
    assert calls["n"] == 2


@pytest.mark.parametrize("n", [1, 2, 3, 7, 30])
def test_tiny_inputs(n: int) -> None:
    items, _ = feedback(per_theme=8)
    items = items[:: max(1, len(items) // n)][:n]
    doc = run_with(FakeContext(), ThematicParams(llm="off"), items, client=None)
    ThematicResult.model_validate(doc)
    assert len(doc["themes"]) >= 1 and len(doc["assignments"]) == n


def test_all_unusable_is_permanent() -> None:
    with pytest.raises(PermanentError):
        run_with(FakeContext(), ThematicParams(llm="off"), [{"id": 1, "text": " "}, {"id": 2, "text": "!!!"}], client=None)


def test_cancel_between_stages() -> None:
    items, _ = feedback(per_theme=4)
    with pytest.raises(Cancelled):
        run_with(FakeContext(cancel_after_progress=2), ThematicParams(llm="off"), items, client=None)


def test_llm_required_without_client_is_permanent() -> None:
    with pytest.raises(PermanentError):
        run_with(FakeContext(), ThematicParams(llm="required"), [{"id": 1, "text": "hello there"}], client=None)


def test_llm_labels_merge_redaction_and_usage() -> None:
    items, _ = feedback(per_theme=12)
    items[0]["text"] = "Delivery late, call me on +44 20 7946 0958 or mail bob@example.com"
    llm = FakeLLM()
    ctx = FakeContext()
    doc = run_with(ctx, ThematicParams(llm="auto", min_theme_size=3), items, client=llm)
    ThematicResult.model_validate(doc)
    assert all(t["labelled_by"] == "llm" and t["label"].startswith("About ") for t in doc["themes"])
    sent = json.dumps([m for _, ms in llm.calls for m in ms])
    assert "bob@example.com" not in sent and "7946" not in sent
    assert doc["run"]["llm"]["used"] and doc["run"]["llm"]["model"] == "fake-gpt"
    assert ctx.usage_counters["llm_tokens"] == 120 * doc["run"]["llm"]["calls"]
    purposes = [p for p, _ in llm.calls]
    assert purposes.count("thematic.merge") == 1

    # Merge pass: the LLM proposes to merge two themes; accepted only if centroids agree.
    ids = [t["id"] for t in doc["themes"]]
    llm2 = FakeLLM(merge=[ids[:2]])
    doc2 = run_with(FakeContext(), ThematicParams(llm="auto", min_theme_size=3), items, client=llm2)
    assert len(doc2["themes"]) in (len(ids), len(ids) - 1)
    ThematicResult.model_validate(doc2)


def test_llm_budget_exhausted_degrades_to_keywords() -> None:
    items, _ = feedback(per_theme=10)
    doc = run_with(FakeContext(), ThematicParams(llm="auto", min_theme_size=3), items, client=FakeLLM(fail_after=1))
    labelled = [t["labelled_by"] for t in doc["themes"]]
    assert labelled.count("llm") == 1 and "keywords" in labelled
    assert "stopped" in (doc["run"]["llm"]["note"] or "")


def test_seed_codebook_embedding_and_llm() -> None:
    items, truth = feedback(per_theme=10)
    book = [{"name": "Delivery", "description": "late or lost parcels, shipping and couriers"},
            {"name": "Pricing", "description": "prices, fees and costs are too expensive"}]
    params = ThematicParams(llm="off", min_theme_size=3, seed_themes=book)
    doc = run_with(FakeContext(), params, items, client=None)
    summary = {s["name"]: s["count"] for s in doc["seed_themes"]}
    assert summary["Delivery"] >= 6 and summary["Pricing"] >= 6
    by_id = {a["response_id"]: a for a in doc["assignments"]}
    hits = [by_id[i]["seed_codes"][0]["name"] for i, t in enumerate(truth) if t == "delivery" and by_id[i]["seed_codes"]]
    assert hits.count("Delivery") >= 0.8 * len(hits)
    llm = FakeLLM(code={"parcel": "Delivery", "price": "Pricing"})
    doc = run_with(FakeContext(), params.model_copy(update={"llm": "auto"}), items, client=llm)
    coded = [c for a in doc["assignments"] for c in (a.get("seed_codes") or []) if c["coded_by"] == "llm"]
    assert coded and {c["name"] for c in coded} <= {"Delivery", "Pricing"}
