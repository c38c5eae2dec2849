"""Stage 5 (and the tail of stage 3): every response gets theme(s) + confidence, or ``other``.

* Themes smaller than ``min_theme_size`` are dissolved; their members go to
  the nearest remaining theme if they fit it, else to ``other``.
* A response is an outlier (``other``) when its similarity to its theme's
  centre is far below that theme's typical member (mean − 2.5 sd), or below
  an absolute floor. A per-theme rule, because tight and loose themes differ.
* Confidence is the softmax over theme-centre similarities (temperature
  0.05): near 1 when one theme clearly wins, near 1/2 between two.
* ``multi_label``: secondary themes whose similarity is within 0.05 of the
  primary's and which also pass that theme's outlier rule.
* Seed codebook: responses are coded by similarity to the embedded
  "name: description" of each code (relative rule: best code, and other codes
  within 0.05 of it for multi-label, above an absolute floor), and by the LLM
  when one is available (the LLM's codes then win, the similarity is kept
  as the confidence).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .cluster import group_sums, normalise
from .describe import LLMUsage
from .llm_port import ChatClient, CodingBatch, llm_errors

log = logging.getLogger(__name__)

OUTLIER_SD = 2.5
#: Below this cosine to its own theme centre a response is "other" regardless.
ABS_FLOOR = 0.15
TEMPERATURE = 0.05
MULTI_MARGIN = 0.05
#: Minimal cosine between a response and a seed code's "name: description".
SEED_FLOOR = 0.30
CODING_BATCH = 25


def recentre(labels: NDArray[np.int64], emb: NDArray[np.float32], k: int) -> NDArray[np.float32]:
    return normalise(group_sums(labels, emb, k))


def fold_small(
    labels: NDArray[np.int64], emb: NDArray[np.float32], k: int, min_size: int
) -> tuple[NDArray[np.int64], int]:
    """Dissolve themes below ``min_size``; members move to the nearest kept theme. Returns (labels, k)."""
    sizes = np.bincount(labels[labels >= 0], minlength=k)
    keep = np.flatnonzero(sizes >= min_size)
    if len(keep) == 0:
        # Nothing is big enough: one theme is more useful than none.
        return np.zeros_like(labels), 1
    remap = -np.ones(k, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    new = remap[labels]
    cents = recentre(new, emb, len(keep))
    lost = np.flatnonzero(new < 0)
    if lost.size:
        new[lost] = (emb[lost] @ cents.T).argmax(axis=1)
    return new, len(keep)


def thresholds(labels: NDArray[np.int64], sims_own: NDArray[np.float32], k: int) -> NDArray[np.float32]:
    out = np.full(k, ABS_FLOOR, dtype=np.float32)
    for t in range(k):
        s = sims_own[labels == t]
        if len(s) >= 5:
            out[t] = max(ABS_FLOOR, float(s.mean() - OUTLIER_SD * s.std()))
    return out


@dataclass
class Assignment:
    themes: list[tuple[int, float]]
    """(theme index, confidence), primary first; empty = other."""
    similarity: float


def assign(
    emb: NDArray[np.float32], labels: NDArray[np.int64], centroids: NDArray[np.float32], *, multi_label: bool
) -> list[Assignment]:
    k = len(centroids)
    sims = emb @ centroids.T
    rows = np.arange(len(emb))
    own = sims[rows, labels]
    thr = thresholds(labels, own, k)
    z = (sims - sims.max(axis=1, keepdims=True)) / TEMPERATURE
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    out = []
    for i in range(len(emb)):
        t = int(labels[i])
        if own[i] < thr[t]:
            out.append(Assignment([], float(own[i])))
            continue
        themes = [(t, float(p[i, t]))]
        if multi_label and k > 1:
            for u in np.argsort(-sims[i]):
                u = int(u)
                if u != t and sims[i, u] >= own[i] - MULTI_MARGIN and sims[i, u] >= thr[u]:
                    themes.append((u, float(p[i, u])))
        out.append(Assignment(themes, float(own[i])))
    return out


def code_by_similarity(
    emb: NDArray[np.float32], code_emb: NDArray[np.float32], *, multi_label: bool
) -> list[list[tuple[int, float]]]:
    """Seed codes per response by cosine to each code's embedded name + description."""
    sims = emb @ code_emb.T
    out: list[list[tuple[int, float]]] = []
    for row in sims:
        best = float(row.max()) if len(row) else 0.0
        if best < SEED_FLOOR:
            out.append([])
            continue
        order = [int(j) for j in np.argsort(-row)]
        codes = [(order[0], best)]
        if multi_label:
            codes += [(j, float(row[j])) for j in order[1:] if row[j] >= max(SEED_FLOOR, best - MULTI_MARGIN)]
        out.append(codes)
    return out


SYSTEM_CODE = (
    "You code free-text responses against a fixed codebook. For each response, list the names of the codes "
    "that apply (exact names from the codebook; none if no code applies{multi}). Answer with JSON "
    '{{"responses": [{{"id": response id, "codes": [code names]}}]}}.'
)


def code_by_llm(
    client: ChatClient,
    codebook: list[dict[str, str]],
    items: list[tuple[str, str]],
    *,
    multi_label: bool,
    usage: LLMUsage,
    cancelled: Any = None,
) -> dict[str, list[str]]:
    """LLM codes per response id; responses not coded (budget spent) are absent."""
    names = {c["name"].lower(): c["name"] for c in codebook}
    system = SYSTEM_CODE.format(multi="; several may apply" if multi_label else "; at most one")
    out: dict[str, list[str]] = {}
    for start in range(0, len(items), CODING_BATCH):
        if cancelled is not None:
            cancelled()
        batch = items[start : start + CODING_BATCH]
        user = json.dumps({"codebook": codebook, "responses": [{"id": i, "text": t} for i, t in batch]})
        try:
            res = client.complete_json(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                CodingBatch,
                max_tokens=60 * len(batch) + 100,
                purpose="thematic.code",
            )
        except llm_errors() as err:
            usage.skipped = f"LLM coding stopped after {start} responses: {type(err).__name__}"
            break
        usage.add(res)
        value: CodingBatch = res.value
        wanted = {i for i, _ in batch}
        for r in value.responses:
            if r.id in wanted:
                codes = [names[c.lower()] for c in r.codes if c.lower() in names]
                out[r.id] = codes if multi_label else codes[:1]
    return out
