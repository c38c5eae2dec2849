"""Issue 27's proof, in the fast tier (nothing built or loaded): the MiniLM graph follows the CPU flags (faked),
each graph is refused at load unless its file matches that graph's own pinned sha256, and a chunk worker runs the
graph its parent chose, whatever its own CPU would choose. The integration twins in
``tests/integration/thematic/test_embeddings.py`` build and run the real graphs."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from pipelines.thematic import ThematicParams, mapped
from pipelines.thematic import embed as E
from pipelines.thematic import models as M
from tests.support.thematic_fakes import FakeContext

MINILM = M.SPECS["minilm"]
VNNI_CPU = frozenset({"fpu", "avx2", "avx512f", "avx512_vnni"})
AVX2_CPU = frozenset({"fpu", "avx2", "avx512f"})


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THEMATIQ_EMBEDDING_GRAPH", raising=False)
    monkeypatch.delenv("THEMATIQ_EMBEDDING_MODEL_PATH", raising=False)


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ("fpu sse avx2 avx512f avx512_vnni", "int8-vnni"),  # AVX-512 VNNI (Cascade Lake+, Zen 4+)
        ("fpu sse avx2 avx_vnni", "int8-vnni"),  # AVX-VNNI only (Alder Lake+)
        ("fpu sse avx2 avx512f avx512bw", "int8"),  # AVX-512 without VNNI: pairs saturate, the default graph
        ("fpu sse avx2", "int8"),
    ],
)
def test_the_graph_follows_faked_cpuinfo_flags(flags: str, want: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Fake CPU\nflags\t\t: {flags}\n")
    real = M.cpu_flags
    monkeypatch.setattr(M, "cpu_flags", lambda *a: real(cpuinfo))
    # As on a bootstrapped deployment, whatever this machine has installed: the graph is built or buildable.
    monkeypatch.setattr(E, "_can_build", lambda: True)
    assert M.choose_graph(MINILM).key == want
    # What a job records and loads: decided without building or loading anything.
    lazy = E.LazyLocalEmbedder()
    assert lazy.graph == want and lazy.info.graph == want and lazy.info.sha256 == MINILM.graph(want).sha256


def test_no_cpuinfo_means_the_default_graph_and_the_override_wins(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert M.cpu_flags(tmp_path / "missing") == frozenset()
    assert M.choose_graph(MINILM, frozenset()).key == MINILM.graphs[0].key == "int8"
    monkeypatch.setenv("THEMATIQ_EMBEDDING_GRAPH", "int8")
    assert M.choose_graph(MINILM, VNNI_CPU).key == "int8"
    monkeypatch.setenv("THEMATIQ_EMBEDDING_GRAPH", "int8-vnni")
    assert M.choose_graph(MINILM, AVX2_CPU).key == "int8-vnni"


def test_the_two_graphs_have_distinct_pins() -> None:
    shas = [g.sha256 for g in MINILM.graphs]
    assert [g.key for g in MINILM.graphs] == ["int8", "int8-vnni"]
    assert all(len(s) == 64 for s in shas) and len(set(shas)) == 2
    assert {i.sha256 for i in E.GRAPH_INFO.values()} == set(shas)


@pytest.mark.parametrize("graph", [g.key for g in MINILM.graphs])
def test_each_graph_loads_only_a_file_that_matches_its_own_pin(graph: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The file handed to onnxruntime is hashed against *that* graph's sha256 first: a wrong or corrupted file,
    or the other graph's file under this graph's name, never reaches the session."""
    other = next(g for g in MINILM.graphs if g.key != graph)
    fake = tmp_path / MINILM.graph(graph).file_name
    monkeypatch.setattr(M, "resolve", lambda spec, g=None, **kw: fake)
    monkeypatch.setattr(E, "tokenizer_path", lambda: tmp_path / "tokenizer.json")
    loaded: list[Path] = []
    monkeypatch.setattr(E.OnnxEncoder, "__init__", lambda self, model_file, *a, **k: loaded.append(model_file))
    for content in (b"corrupted", b"the other graph's bytes"):
        fake.write_bytes(content)
        with pytest.raises(E.ModelIntegrityError, match=MINILM.graph(graph).sha256):
            E.LocalEmbedder(graph=graph)
    assert loaded == []
    # A file whose sha256 is this graph's pin passes the model check (then the tokenizer's is checked too).
    fake.write_bytes(b"stand-in model")
    sha = hashlib.sha256(b"stand-in model").hexdigest()
    monkeypatch.setitem(E.GRAPH_INFO, graph, E.GRAPH_INFO[graph].__class__(
        **{**E.GRAPH_INFO[graph].__dict__, "sha256": sha}))
    (tmp_path / "tokenizer.json").write_bytes(b"{}")
    with pytest.raises(E.ModelIntegrityError, match=E.TOKENIZER_SHA256):
        E.LocalEmbedder(graph=graph)
    monkeypatch.setattr(E, "TOKENIZER_SHA256", hashlib.sha256(b"{}").hexdigest())
    E.LocalEmbedder(graph=graph)
    assert loaded == [fake]
    # The other graph's pin does not accept this graph's file.
    with pytest.raises(E.ModelIntegrityError, match=other.sha256):
        E.LocalEmbedder(graph=other.key)


class _Recorder:
    """Stands in for the loaded encoder: records which graph each chunk asked for."""

    graphs: ClassVar[list[str | None]] = []

    def __init__(self, encoder: str, graph: str | None) -> None:
        self.graph = graph

    def embed(self, texts: Any, *, on_batch: Any = None) -> Any:
        _Recorder.graphs.append(self.graph)
        return np.zeros((len(texts), 3), dtype=np.float32)


@pytest.mark.parametrize(("parent", "worker_cpu"), [("int8-vnni", AVX2_CPU), ("int8", VNNI_CPU)])
def test_a_chunk_worker_runs_its_parents_graph_not_its_own_cpus(parent: str, worker_cpu: frozenset[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "cpu_flags", lambda *a: worker_cpu)
    assert M.choose_graph(MINILM).key != parent  # this worker alone would choose the other graph
    _Recorder.graphs = []
    monkeypatch.setattr(E, "get_embedder", _Recorder)
    params = ThematicParams(llm="off")
    out = mapped.embed_chunk(FakeContext(params=params), params, [["fast", "late parcel", parent],
                                                                  ["fast", "rude driver", parent]])
    assert mapped.from_npy(out).shape == (2, 3)
    assert _Recorder.graphs == [parent]
    # Items without a graph (an older parent, or another encoder) run this worker's own choice.
    _Recorder.graphs = []
    mapped.embed_chunk(FakeContext(params=params), params, ["late parcel"])
    assert _Recorder.graphs == [M.choose_graph(MINILM).key]
