"""The fast encoder's model file is read once and hashed once (speed46, issue 27's cost before embedding): the bytes
handed to the sessions are the bytes whose sha256 was checked, and a file that does not match where the model is
looked for first still falls back to the next good copy, as ``models.resolve`` does. Nothing is loaded: the encoder
itself is replaced by a recorder."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from pipelines.thematic import embed as E
from pipelines.thematic import models as M

MINILM = M.SPECS["minilm"]
GOOD = b"stand-in model"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv("THEMATIQ_EMBEDDING_GRAPH", raising=False)
    monkeypatch.delenv("THEMATIQ_EMBEDDING_MODEL_PATH", raising=False)
    packaged, cache = tmp_path / "packaged", tmp_path / "cache"
    packaged.mkdir()
    cache.mkdir()
    monkeypatch.setattr(M, "packaged_dir", lambda: packaged)
    monkeypatch.setattr(M, "cache_dir", lambda: cache)
    g = dataclasses.replace(MINILM.graph("int8-vnni"), sha256=hashlib.sha256(GOOD).hexdigest())
    monkeypatch.setattr(E, "fast_graph", lambda graph=None: g)
    monkeypatch.setitem(E.GRAPH_INFO, g.key, dataclasses.replace(E.GRAPH_INFO[g.key], sha256=g.sha256))
    (tmp_path / "tokenizer.json").write_bytes(b"{}")
    monkeypatch.setattr(E, "tokenizer_path", lambda: tmp_path / "tokenizer.json")
    monkeypatch.setattr(E, "TOKENIZER_SHA256", hashlib.sha256(b"{}").hexdigest())
    seen: dict[str, Any] = {"loaded": [], "reads": [], "hashed": []}
    monkeypatch.setattr(E.OnnxEncoder, "__init__",
                        lambda self, model_file, *a, **k: seen["loaded"].append((model_file, k.get("model_bytes"))))
    read_bytes, file_hash, models_hash = Path.read_bytes, E._sha256, M._sha256

    def reading(self: Path) -> bytes:
        seen["reads"].append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", reading)
    monkeypatch.setattr(E, "_sha256", lambda p: seen["hashed"].append(p) or file_hash(p))
    monkeypatch.setattr(M, "_sha256", lambda p: seen["hashed"].append(p) or models_hash(p))
    return {"packaged": packaged / g.file_name, "cache": cache / g.file_name, "graph": g, **seen}


def test_the_model_file_is_read_once_and_its_bytes_hashed_once(files: dict[str, Any]) -> None:
    files["packaged"].write_bytes(GOOD)
    E.LocalEmbedder(graph="int8-vnni")
    model = files["packaged"]
    assert files["loaded"] == [(model, GOOD)]
    assert [p for p in files["reads"] if p.name == model.name] == [model]
    assert [p for p in files["hashed"] if p.name == model.name] == []  # the bytes were hashed, not the file again


def test_a_file_that_does_not_match_where_the_model_is_looked_for_first_falls_back_to_the_good_copy(
        files: dict[str, Any]) -> None:
    files["packaged"].write_bytes(b"corrupted")
    files["cache"].write_bytes(GOOD)
    E.LocalEmbedder(graph="int8-vnni")
    assert files["loaded"] == [(files["cache"], GOOD)]


def test_no_file_that_matches_is_refused_before_any_session(files: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    files["packaged"].write_bytes(b"corrupted")
    files["cache"].write_bytes(b"also corrupted")
    monkeypatch.setattr(M, "build_int8", lambda spec, dest, g: dest.write_bytes(b"built wrong") or "0" * 64)
    with pytest.raises((E.ModelIntegrityError, M.ModelBuildError)):
        E.LocalEmbedder(graph="int8-vnni")
    assert files["loaded"] == []
