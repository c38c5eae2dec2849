"""Stage 4: describe themes: keywords, representative quotes, labels; optional LLM labels and merge pass.

Without an LLM the label is built from c-TF-IDF keywords (never "cluster 3").
With one, each theme gets a short label and a one-sentence description from
its keywords and (PII-redacted) quotes, then one merge pass asks which themes
are the same thing; a merge is accepted only if the centroids agree too, so a
model's whim cannot fuse unrelated themes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .clean import near_key
from .keywords import ctfidf, label_from_keywords
from .llm_port import ChatClient, MergeGroups, ThemeLabel, llm_errors

log = logging.getLogger(__name__)

QUOTES = 5
QUOTE_CHARS = 300
#: Two quotes this similar are the same point made twice; show only one.
QUOTE_DEDUP_SIM = 0.95
#: An LLM-proposed merge needs at least this centroid cosine as well.
MERGE_MIN_CENTROID_SIM = 0.55


@dataclass
class ThemeInfo:
    id: str
    label: str
    description: str
    keywords: list[str]
    keyword_scores: list[float]
    members: list[int]
    """Indices into the usable-response arrays."""
    quotes: list[int]
    labelled_by: str = "keywords"
    parent: str | None = None
    merged_from: list[str] = field(default_factory=list)


@dataclass
class LLMUsage:
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    skipped: str | None = None

    def add(self, result: Any) -> None:
        self.calls += 1
        self.cached += int(bool(getattr(result, "cached", False)))
        u = getattr(result, "usage", None)
        if u is not None:
            self.prompt_tokens += int(getattr(u, "prompt_tokens", 0))
            self.completion_tokens += int(getattr(u, "completion_tokens", 0))
            self.cost_usd += float(getattr(u, "cost_usd", 0.0))


def pick_quotes(
    members: list[int], emb: NDArray[np.float32], centroid: NDArray[np.float32], texts: list[str]
) -> list[int]:
    """Up to QUOTES members closest to the centre, skipping near-identical ones."""
    if not members:
        return []
    m = np.array(members)
    order = m[np.argsort(-(emb[m] @ centroid), kind="stable")]
    chosen: list[int] = []
    keys: set[str] = set()
    for i in order[: QUOTES * 10]:
        key = near_key(texts[i])
        if key in keys or any(float(emb[i] @ emb[j]) >= QUOTE_DEDUP_SIM for j in chosen):
            continue
        chosen.append(int(i))
        keys.add(key)
        if len(chosen) == QUOTES:
            break
    return chosen


def describe(
    labels: NDArray[np.int64], centroids: NDArray[np.float32], emb: NDArray[np.float32], texts: list[str]
) -> list[ThemeInfo]:
    """Keyword-based themes, ordered by size (ids t1, t2, ...). Label -1 (= other) is skipped."""
    k = len(centroids)
    groups = [np.flatnonzero(labels == t).tolist() for t in range(k)]
    order = sorted(range(k), key=lambda t: (-len(groups[t]), t))
    kws = ctfidf([[texts[i] for i in groups[t]] for t in order])
    used: set[str] = set()
    out = []
    for n, (t, kw) in enumerate(zip(order, kws, strict=True), start=1):
        words = [w for w, _ in kw]
        label = label_from_keywords(words, used)
        desc = (
            "Responses mentioning " + ", ".join(words[:5]) + "." if words else "Responses without distinctive keywords."
        )
        out.append(
            ThemeInfo(
                f"t{n}",
                label,
                desc,
                words,
                [s for _, s in kw],
                groups[t],
                pick_quotes(groups[t], emb, centroids[t], texts),
            )
        )
    return out


SYSTEM_LABEL = (
    "You name themes found in free-text survey or feedback responses. Given a theme's keywords and example "
    'responses, answer with JSON {"label": short label of 2-5 words, "description": one sentence saying '
    "what these responses have in common}. Do not invent details that are not in the examples."
)
SYSTEM_MERGE = (
    "You review themes found in free-text responses and find near-duplicates: themes that describe the same "
    'topic and should be one. Answer with JSON {"merge": [[theme ids to merge], ...]}; use an empty list when '
    "all themes are distinct. Only merge themes that a reader would clearly consider the same."
)


def llm_label(
    client: ChatClient,
    themes: list[ThemeInfo],
    quote_text: Callable[[int], str],
    usage: LLMUsage,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Replace keyword labels with LLM labels and descriptions, in place. Stops cleanly on budget exhaustion."""
    skip = llm_errors()
    for n, th in enumerate(themes):
        prompt = {
            "keywords": th.keywords[:10],
            "examples": [quote_text(i) for i in th.quotes],
            "responses_in_theme": len(th.members),
        }
        try:
            res = client.complete_json(
                [{"role": "system", "content": SYSTEM_LABEL}, {"role": "user", "content": json.dumps(prompt)}],
                ThemeLabel,
                max_tokens=200,
                purpose="thematic.label",
            )
        except skip as err:
            usage.skipped = f"labelling stopped: {type(err).__name__}"
            log.warning("LLM labelling stopped after %d themes: %s", n, type(err).__name__)
            return
        usage.add(res)
        value: ThemeLabel = res.value
        th.label, th.description, th.labelled_by = value.label.strip(), value.description.strip(), "llm"
        if progress:
            progress(n + 1)
    # Labels must stay unique for the report and the CSV.
    seen: set[str] = set()
    for th in themes:
        base, n2 = th.label, 2
        while th.label.lower() in seen:
            th.label = f"{base} ({n2})"
            n2 += 1
        seen.add(th.label.lower())


def llm_merge_groups(
    client: ChatClient, themes: list[ThemeInfo], centroids: dict[str, NDArray[np.float32]], usage: LLMUsage
) -> list[list[str]]:
    """Groups of theme ids to merge: proposed by the LLM, confirmed by centroid similarity."""
    if len(themes) < 2:
        return []
    listing = [{"id": t.id, "label": t.label, "description": t.description, "keywords": t.keywords[:6]} for t in themes]
    try:
        res = client.complete_json(
            [{"role": "system", "content": SYSTEM_MERGE}, {"role": "user", "content": json.dumps(listing)}],
            MergeGroups,
            max_tokens=400,
            purpose="thematic.merge",
        )
    except llm_errors() as err:
        usage.skipped = f"merge pass skipped: {type(err).__name__}"
        return []
    usage.add(res)
    value: MergeGroups = res.value
    valid = {t.id for t in themes}
    taken: set[str] = set()
    groups: list[list[str]] = []
    for g in value.merge:
        ids = [i for i in dict.fromkeys(g) if i in valid and i not in taken]
        if len(ids) < 2:
            continue
        # Keep only members close to the group's first (largest) theme.
        head = ids[0]
        ok = [head] + [i for i in ids[1:] if float(centroids[head] @ centroids[i]) >= MERGE_MIN_CENTROID_SIM]
        if len(ok) >= 2:
            groups.append(ok)
            taken.update(ok)
    return groups


def to_json(themes: list[ThemeInfo]) -> list[dict[str, Any]]:
    return [asdict(t) for t in themes]


def from_json(rows: list[dict[str, Any]]) -> list[ThemeInfo]:
    return [ThemeInfo(**r) for r in rows]
