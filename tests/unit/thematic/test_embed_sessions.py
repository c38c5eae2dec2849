"""The fast encoder's sessions (issue 27): ``threads`` = N runs N one-thread onnxruntime sessions, fed the
length-sorted batches by N worker threads, with the same vectors in the same order as one session, ``on_batch`` on
the calling thread in increasing order, and every worker joined when ``on_batch`` or a worker raises.

onnxruntime's session and the tokenizer are faked (nothing is loaded): a fake session's hidden states are a fixed
function of the token ids, so a text's vector depends on its text only, as the real graph's does. No test waits on
a clock: where a test needs both workers busy it meets them at a barrier (its timeout only turns a hang into a
failure). The integration twin (the real graph, 1 vs 2 sessions) is in ``tests/integration/thematic/test_embeddings.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pipelines.thematic import embed as E

INFO = E.ModelInfo("fake", "fake", "", 8, 64)


class FakeTokenizer:
    def enable_truncation(self, n: int) -> None:
        self.max = n

    def no_truncation(self) -> None: ...

    def no_padding(self) -> None: ...

    def encode_batch(self, texts: list[str]) -> list[Any]:
        return [SimpleNamespace(ids=([101] + [sum(map(ord, w)) % 997 + 1 for w in t.split()] + [102])[: self.max])
                for t in texts]

    encode_batch_fast = encode_batch  # the encoder asks for the ids without offsets


@dataclass
class Sessions:
    """Every fake session made, what they ran, and hooks: ``fail_at`` (the n-th run overall raises; -1: every
    run), ``barrier`` (each session's first run waits there, so every worker is seen running at once)."""

    made: list[FakeSession] = field(default_factory=list)
    runs: list[tuple[int, int]] = field(default_factory=list)  # (session number, thread ident)
    threads: list[threading.Thread] = field(default_factory=list)
    fail_at: int = 0
    barrier: threading.Barrier | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    sources: list[str | bytes] = field(default_factory=list)  # what each session was made from


class FakeSession:
    def __init__(self, registry: Sessions, threads: int) -> None:
        self.registry, self.threads, self.first = registry, threads, True
        with registry.lock:  # sessions are made side by side
            self.number = len(registry.made)
            registry.made.append(self)

    def get_inputs(self) -> list[Any]:
        return [SimpleNamespace(name="input_ids"), SimpleNamespace(name="attention_mask")]

    def run(self, _names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        reg = self.registry
        with reg.lock:
            reg.runs.append((self.number, threading.get_ident()))
            reg.threads.append(threading.current_thread())
            n = len(reg.runs)
        if self.first and reg.barrier is not None:
            self.first = False
            reg.barrier.wait(timeout=60)
        if n == reg.fail_at or reg.fail_at == -1:
            raise RuntimeError(f"run {n} failed")
        ids = feeds["input_ids"].astype(np.float32)
        return [np.sin(ids[:, :, None] * np.arange(1, INFO.dimensions + 1, dtype=np.float32))]


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Sessions:
    import onnxruntime as ort
    import tokenizers

    from tests.unit.thematic.test_shared_weights import tiny_model

    reg = Sessions()
    # A real (tiny) model file: with N > 1 sessions the encoder reads it to share its weights (shared_weights.py).
    tiny_model(tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)

    def session(source: str | bytes, sess_options: Any, providers: Any) -> FakeSession:
        assert sess_options.inter_op_num_threads == 1
        reg.sources.append(source)
        return FakeSession(reg, sess_options.intra_op_num_threads)

    monkeypatch.setattr(ort, "InferenceSession", session)
    monkeypatch.setattr(tokenizers.Tokenizer, "from_file", staticmethod(lambda _p: FakeTokenizer()))
    return reg


def encoder(threads: int, **kw: Any) -> E.OnnxEncoder:
    return E.OnnxEncoder(Path("model.onnx"), Path("tokenizer.json"), INFO, threads=threads, **kw)


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(f"w{int(x)}" for x in rng.integers(0, 500, int(rng.integers(1, 40)))) for _ in range(n)]


def embed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("thematiq-embed-")]


def test_n_threads_are_n_sessions_of_one_thread_and_sessions_1_is_one_session_of_n(sessions: Sessions) -> None:
    assert [s.threads for s in encoder(2)._sessions] == [1, 1]
    assert [s.threads for s in encoder(1)._sessions] == [1]
    assert [s.threads for s in encoder(2, sessions=1)._sessions] == [2]
    # Assigning _session (benches and tests swap in another graph) leaves that one session.
    enc = encoder(2)
    enc._session = sessions.made[0]
    assert enc._sessions == [sessions.made[0]] and enc._inputs == {"input_ids", "attention_mask"}


def test_n_sessions_are_made_from_one_shared_copy_of_the_weights_and_one_session_from_the_file(
    sessions: Sessions,
) -> None:
    two = encoder(2)
    assert sorted(a.shape for a, _ in two._shared) == [(128, 256), (256, 128)]  # the tiny model's two large ones
    assert len(sessions.sources) == 2 and all(isinstance(s, bytes) for s in sessions.sources)
    assert sessions.sources[0] == sessions.sources[1]
    assert len(sessions.sources[0]) < Path("model.onnx").stat().st_size // 2  # the graph without its weights
    sessions.sources.clear()
    one, unshared = encoder(1), encoder(2, share_weights=False)
    assert one._shared == [] and unshared._shared == []
    assert sessions.sources == [str(Path("model.onnx"))] * 3


@pytest.mark.parametrize("threads", [2, 3])
def test_n_sessions_give_one_sessions_vectors_in_input_order(sessions: Sessions, threads: int) -> None:
    items = texts(400)
    one = encoder(1).embed(items, batch_size=8)
    reference = np.stack([encoder(1).embed([t])[0] for t in items[:20]])
    np.testing.assert_array_equal(one[:20], reference)  # input order, whatever the batches
    sessions.runs.clear()
    sessions.barrier = threading.Barrier(threads)
    many = encoder(threads)
    got = many.embed(items, batch_size=8)
    assert np.array_equal(got, one)
    # Every session ran (they met at the barrier), none on the calling thread, each batch once.
    assert {s for s, _ in sessions.runs} == {s.number for s in many._sessions}
    assert threading.get_ident() not in {ident for _, ident in sessions.runs}
    assert len(sessions.runs) == len(E.batch_bounds(np.sort([len(t.split()) + 2 for t in items]), 8, E.BATCH_TOKENS))
    assert embed_threads() == []


def test_on_batch_is_called_on_the_calling_thread_with_increasing_counts(sessions: Sessions) -> None:
    items = texts(300, seed=1)
    calls: list[tuple[int, int]] = []
    sessions.barrier = threading.Barrier(2)
    encoder(2).embed(items, batch_size=8, on_batch=lambda done: calls.append((threading.get_ident(), done)))
    assert {ident for ident, _ in calls} == {threading.get_ident()}
    done = [d for _, d in calls]
    assert done == sorted(set(done)) and done[-1] == len(items) and len(done) == len(sessions.runs)


class Cancelled(Exception):
    pass


def test_on_batch_raising_stops_the_hand_out_joins_the_workers_and_propagates(sessions: Sessions) -> None:
    items = texts(200, seed=2)
    calls: list[int] = []

    def cancel(done: int) -> None:
        calls.append(done)
        raise Cancelled

    with pytest.raises(Cancelled):
        encoder(2).embed(items, batch_size=1, on_batch=cancel)
    assert len(calls) == 1
    # Before the first result LOOKAHEAD batches per worker are handed out, one more with it: nothing after.
    assert len(sessions.runs) <= E.LOOKAHEAD * 2 + 1 < len(items)
    assert not any(t.is_alive() for t in sessions.threads) and embed_threads() == []


def test_a_workers_error_reaches_the_caller_and_no_worker_is_left(sessions: Sessions) -> None:
    sessions.fail_at = 3
    with pytest.raises(RuntimeError, match="run 3 failed"):
        encoder(2).embed(texts(200, seed=3), batch_size=4)
    assert not any(t.is_alive() for t in sessions.threads) and embed_threads() == []
    # Every worker failing still ends (each reports its error), and the encoder stays usable after.
    enc = encoder(2)
    sessions.fail_at, sessions.barrier = -1, threading.Barrier(2)
    with pytest.raises(RuntimeError, match="failed"):
        enc.embed(texts(50, seed=4), batch_size=4)
    assert not any(t.is_alive() for t in sessions.threads) and embed_threads() == []
    sessions.fail_at, sessions.barrier = 0, None
    assert np.array_equal(enc.embed(texts(50, seed=4), batch_size=4), encoder(1).embed(texts(50, seed=4)))


def test_a_session_that_cannot_be_made_fails_the_encoder(sessions: Sessions, monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    made = ort.InferenceSession

    def second_fails(path: str, sess_options: Any, providers: Any) -> FakeSession:
        session: FakeSession = made(path, sess_options=sess_options, providers=providers)
        if session.number == 1:
            raise RuntimeError("cannot load")
        return session

    monkeypatch.setattr(ort, "InferenceSession", second_fails)
    with pytest.raises(RuntimeError, match="cannot load"):
        encoder(2)
    assert embed_threads() == []
