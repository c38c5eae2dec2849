"""A model-free embedder and a state builder for the unit tests of the thematic stages (``stages.py``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pipelines.thematic.embed import ModelInfo
from pipelines.thematic.params import ThematicParams
from pipelines.thematic.stages import Checkpoints, RunState
from tests.support.thematic_fakes import FakeContext

DIMENSIONS = 64


class WordEmbedder:
    """Bag of hashed words, unit length: texts sharing words are close, so planted themes cluster."""

    info = ModelInfo("fake-words", "0", "f00d", DIMENSIONS, 128, runtime="fake")

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str], *, on_batch: Callable[[int], None] | None = None) -> NDArray[np.float32]:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for n, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if len(word) > 3:
                    out[n, int(hashlib.md5(word.encode()).hexdigest()[:6], 16) % DIMENSIONS] += 1.0
            out[n] /= max(float(np.linalg.norm(out[n])), 1e-9)
        if on_batch is not None:
            on_batch(len(texts))
        return out


def state(
    items: list[dict[str, Any]], ctx: FakeContext | None = None, *, client: Any = None,
    baseline: dict[str, Any] | None = None, **params: Any,
) -> tuple[FakeContext, RunState]:
    """A fresh state over ``items`` with the word embedder and (default) ``llm="off"``, ``min_theme_size=3``."""
    ctx = ctx or FakeContext()
    p = ThematicParams(**{"llm": "off", "min_theme_size": 3, **params})
    return ctx, RunState(params=p, items=items, client=client, embedder=WordEmbedder(),
                         checkpoints=Checkpoints(ctx, "fp"), baseline=baseline, redact_on=client is not None)


def planted(n: int = 3, per: int = 8, seed: int = 0) -> NDArray[np.float32]:
    """``n`` tight groups of ``per`` unit vectors around orthogonal directions."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n):
        base = np.zeros(DIMENSIONS, dtype=np.float32)
        base[g * 5] = 1.0
        rows += [base + rng.normal(0, 0.05, DIMENSIONS).astype(np.float32) for _ in range(per)]
    emb = np.stack(rows).astype(np.float32)
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
