"""The result document, built from the run's state (``stages.RunState``) by the insight and render stages.

The core of the document (themes, levels, assignments, run info) is built here from typed stage outputs. What
follows from the assignments (comparison rows, breakdowns, theme sentiment, impact: ``derive.refresh``; the
recoding against an earlier wave: ``baseline.carry_over``) is defined on the document itself, because a
codebook edit (``edit.py``) re-derives a stored document with the same functions; the render stage applies
them once, then checks the whole against ``result.ThematicResult``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.sdk import PermanentError

from . import baseline as earlier_wave
from . import derive, waves
from . import describe as describing
from . import sentiment as sentiments
from .embed import ClientEmbedder
from .result import SCHEMA_VERSION, ThematicResult

if TYPE_CHECKING:
    from .stages import RunState

#: Bumped when a change alters what a run computes; part of every checkpoint's fingerprint.
PIPELINE_VERSION = "1.2.0"


@dataclass
class Recode:
    """How this wave is coded against the earlier one (``params.compare_to``): ``baseline.carry_over``'s input."""

    #: Response id → earlier theme id, "" (other) or None (stays in its new theme).
    coded: dict[str, str | None]
    #: The result's ``comparison`` fields besides the rows: mode, instrument and (inherit) far.
    facts: dict[str, Any]
    then_counts: dict[str, int] | None = None
    confidence: dict[str, float] | None = None
    #: The earlier instrument's codes this job's instrument inherits (inherit mode).
    inherited: list[dict[str, Any]] = field(default_factory=list)


def encoder_name(s: RunState) -> str:
    return f"{s.embedder.info.name}@{s.embedder.info.sha256}"


def primary_ids(s: RunState) -> list[str | None]:
    """Each usable response's primary theme id (None: other), as ``assignments[].themes[0]`` will say."""
    by_index = _themes_by_index(s)
    return [next((by_index[t].id for t, _ in a.themes if t in by_index), None) for a in s.assigned]


def _themes_by_index(s: RunState) -> dict[int, describing.ThemeInfo]:
    # Theme index (cluster label) → ThemeInfo; describe orders themes by size.
    return {int(s.labels[th.members[0]]): th for th in s.themes if th.members}


# Insight --------------------------------------------------------------------------------------------------------


def insight_sentiment(s: RunState) -> tuple[dict[str, Any] | None, list[sentiments.Scored | None] | None]:
    """The result's ``sentiment`` section and one score per usable response (None: sentiment off)."""
    p, usable = s.params, s.usable
    if p.sentiment_from is not None:
        metadata = _metadata(s)
        key = p.sentiment_from
        values = [(metadata.get(str(r.id)) or {}).get(key) for r in usable]
        scale = sentiments.rating_scale(values)
        if isinstance(scale, str):
            raise PermanentError(f"sentiment_from={key!r}: {scale}")  # checked at submission; a guard only
        scored = [sentiments.from_rating(v, scale) for v in values]
        info: dict[str, Any] = {"source": "metadata", "field": key, "model": None, "scale": scale.kind}
    elif p.sentiment == "model" and sentiments.model_applies(s.embedder):
        # The vectors clustering used: no second embedding (sentiment_model.py).
        scored = list[sentiments.Scored | None](sentiments.by_model(s.emb))
        info = {"source": "model", "field": None, "model": sentiments.MODEL_NAME, "scale": None}
    elif p.sentiment in ("model", "lexicon"):
        scored = list[sentiments.Scored | None](sentiments.lexicon([r.text for r in usable]))
        info = {"source": "lexicon", "field": None, "model": sentiments.LEXICON_MODEL, "scale": None}
        if p.sentiment == "model":
            info["note"] = (f"{sentiments.MODEL_NAME} reads only the fast encoder's vectors; this job was "
                            f"embedded by {s.embedder.info.name}, so the lexicon scored it")
    elif p.sentiment == "llm":
        scored, info = _llm_sentiment(s)
    else:
        return None, None
    info["scored"] = sum(1 for x in scored if x is not None)
    return info, scored


def _llm_sentiment(s: RunState) -> tuple[list[sentiments.Scored | None], dict[str, Any]]:
    usable = s.usable
    got, note = s.llm_sentiment if s.llm_sentiment is not None else ({}, "no LLM client in this run")
    missing = [n for n in range(len(usable)) if str(n) not in got]
    # What the LLM did not label (budget spent, a bad batch) is scored by the lexicon, and the result says so.
    fill = dict(zip(missing, sentiments.lexicon([usable[n].text for n in missing]), strict=True))
    scored = [got.get(str(n)) or fill.get(n) for n in range(len(usable))]
    if missing:
        note = f"{note + '; ' if note else ''}{len(missing)} response(s) scored by {sentiments.LEXICON_MODEL}"
    model = getattr(s.client, "model_name", None) if s.client else None
    return scored, {"source": "llm", "field": None, "model": model, "scale": None, "note": note}


def compare_recode(s: RunState) -> Recode:
    """Code this wave against the earlier job (``s.baseline``): by its prototypes (discover) or its instrument."""
    assert s.baseline is not None
    baseline, emb = s.baseline, s.emb
    ids = [str(r.id) for r in s.usable]
    primary = primary_ids(s)
    if s.params.compare_mode == "discover":
        protos = earlier_wave.prototypes(baseline, s.embedder)
        coded = earlier_wave.match(emb, primary, protos, [t["id"] for t in baseline["themes"]])
        return Recode(dict(zip(ids, coded, strict=True)), {"mode": "discover", "instrument": "prototypes"})
    encoder = encoder_name(s)
    earlier = baseline.get("instrument")
    how = "centroids"
    if not earlier or earlier.get("encoder") != encoder or not earlier.get("codes") or \
            len(waves.unpack(earlier["codes"][0]["centroid"])) != emb.shape[1]:
        # An earlier result without an instrument (before schema 1.2) or of another encoder: its themes'
        # prototypes stand in, and "then" is its clustering's counts (approximate, and the result says so).
        earlier = waves.from_prototypes(earlier_wave.prototypes(baseline, s.embedder), baseline, encoder)
        how = "prototypes"
    coded, facts = waves.inherit(emb, [r.text for r in s.usable], primary, earlier, min_size=s.params.min_theme_size)
    # A response coded to an earlier theme gets its cosine to that theme's nearest centroid as the confidence.
    _, best, _ = waves.nearest(emb, np.stack([waves.unpack(c["centroid"]) for c in earlier["codes"]])
                               if earlier["codes"] else np.zeros((0, emb.shape[1]), dtype=np.float32))
    return Recode(dict(zip(ids, coded, strict=True)), {"mode": "inherit", "instrument": how, "far": facts["far"]},
                  then_counts=waves.counts(earlier), confidence={i: float(b) for i, b in zip(ids, best, strict=True)},
                  inherited=[dict(c) for c in earlier["codes"]])


def _metadata(s: RunState) -> dict[str, Any]:
    return {str(it["id"]): it.get("metadata") for it in s.items}


# Render ---------------------------------------------------------------------------------------------------------


def result_document(s: RunState) -> dict[str, Any]:
    """The whole result document of the run in ``s``, checked against ``ThematicResult``."""
    assignments, counts, level_counts, other = _assignments(s)
    themes = _theme_docs(s, counts)
    assert s.levels is not None
    levels = s.levels
    n_usable = len(s.usable)
    parents = describing.level_docs(levels.parents, level_counts, n_usable, lambda i: _quote(s, i),
                                    children=levels.children)
    subthemes = describing.level_docs(levels.subthemes, level_counts, n_usable, lambda i: _quote(s, i))
    level_doc = {
        "broad": levels.broad,
        "fine": levels.fine,
        "broad_count": len(parents) if levels.broad == "parents" else len(themes),
        "fine_count": len(themes) if levels.fine == "themes" else len(subthemes),
    }
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "themes": themes,
        "parents": parents,
        "subthemes": subthemes,
        "levels": level_doc,
        "seed_themes": s.seed_summary,
        "assignments": assignments,
        "run": _run_info(s, _theme_count(s.choice, len(themes), level_doc), other),
    }
    if s.sentiment is not None:
        doc["sentiment"] = s.sentiment
    _derive(s, doc)
    s.checkpoints.timings["insight"] = round(time.perf_counter() - s.insight_started, 3)
    # Checked before it is returned: a malformed document is our bug, not the caller's.
    ThematicResult.model_validate(doc)
    return doc


def _derive(s: RunState, doc: dict[str, Any]) -> None:
    """What follows from the assignments: the recoding against the earlier wave, then ``derive.refresh`` and
    the instrument (every job's, so any job can be the earlier wave of a later one)."""
    p, r = s.params, s.recode
    if r is not None:
        assert s.baseline is not None
        quotes = {str(u.id): u.text[: describing.QUOTE_CHARS] for u in s.usable}
        earlier_wave.carry_over(doc, r.coded, s.baseline, quotes, then_counts=r.then_counts, confidence=r.confidence)
        doc["comparison"].update(**r.facts)
    derive.refresh(doc, _metadata(s), breakdown_by=p.breakdown_by, min_group_size=p.min_group_size,
                   score=p.score.model_dump() if p.score is not None else None, seed=p.seed)
    doc["instrument"] = waves.build(
        s.emb, [derive.primary_theme(a) for a in doc["assignments"] if a["bucket"] != "unusable"],
        [t["id"] for t in doc["themes"]], [u.text for u in s.usable], encoder_name(s),
        inherited=r.inherited if r is not None else [],
    )


def _quote(s: RunState, i: int) -> dict[str, Any]:
    return {"response_id": s.usable[i].id, "text": s.texts[i][: describing.QUOTE_CHARS]}


def _assignments(s: RunState) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int], int]:
    """Every response's assignment (in input order), the count per theme and per level theme, and how many
    usable responses have no theme."""
    assert s.levels is not None
    by_index = _themes_by_index(s)
    themes_by_id = {th.id: th for th in s.themes}
    usable_pos = {r.index: n for n, r in enumerate(s.usable)}
    scored = ({str(r.id): x for r, x in zip(s.usable, s.scored, strict=True)} if s.scored is not None else None)
    counts = {th.id: 0 for th in s.themes}
    level_counts: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    other = 0
    for r in s.rows:
        if r.status != "ok":
            out.append({"response_id": r.id, "bucket": "unusable", "themes": [], "reason": r.status,
                        "duplicate_of": r.duplicate_of})
            continue
        n = usable_pos[r.index]
        ids = [(by_index[t].id, c) for t, c in s.assigned[n].themes if t in by_index]
        refs = [{"theme_id": tid, "confidence": round(c, 4)} for tid, c in ids]
        for tid, _ in ids:
            counts[tid] += 1
        other += not refs
        doc: dict[str, Any] = {"response_id": r.id, "bucket": "theme" if refs else "other", "themes": refs}
        if refs:
            # Both levels of the primary theme: broad (3-12) and fine.
            broad_id, fine_id = describing.level_ids(s.levels, themes_by_id, ids[0][0], n)
            doc["broad"], doc["fine"] = broad_id, fine_id
            for lid in (broad_id, fine_id):
                if lid is not None and lid not in counts:
                    level_counts[lid] = level_counts.get(lid, 0) + 1
        if s.seed_codes is not None:
            doc["seed_codes"] = s.seed_codes[n]
        if scored is not None:
            x = scored.get(str(r.id))
            doc["sentiment"] = x.to_json() if x is not None else None
        out.append(doc)
    return out, counts, level_counts, other


def _theme_docs(s: RunState, counts: dict[str, int]) -> list[dict[str, Any]]:
    """The themes, largest first, with their counts, shares and quotes."""
    assert s.levels is not None
    n_usable = len(s.usable)
    return [
        {
            "id": th.id,
            "label": th.label,
            "description": th.description,
            "keywords": th.keywords,
            "count": counts[th.id],
            "share": round(counts[th.id] / n_usable, 4),
            "quotes": [_quote(s, i) for i in th.quotes],
            "parent": th.parent,
            "labelled_by": th.labelled_by,
            "merged_from": th.merged_from,
            "key_phrases": th.key_phrases,
            "subthemes": [sub.id for sub in s.levels.subthemes if sub.parent == th.id],
        }
        for th in sorted(s.themes, key=lambda t: -counts[t.id])
    ]


def _theme_count(choice: dict[str, Any], k: int, level_doc: dict[str, Any]) -> dict[str, Any]:
    """``run.theme_count``: the cluster stage's choice with, first in the explanation, the count in a
    researcher's words, both levels named ("20 themes in 5 groups; ..."). Derived here, not checkpointed:
    the levels exist only after the describe stage."""
    from .cluster import count_summary

    summary = count_summary({**choice, "k": k}, level_doc)
    return {**choice, "summary": summary, "explanation": f"{summary} Why: {choice['explanation']}"}


def _run_info(s: RunState, theme_count: dict[str, Any], other: int) -> dict[str, Any]:
    unusable = {"empty": 0, "gibberish": 0, "exact_duplicate": 0, "near_duplicate": 0}
    for r in s.rows:
        if r.status != "ok":
            unusable[r.status] += 1
    n_usable, usage = len(s.usable), s.usage
    return {
        "pipeline": "thematic",
        "pipeline_version": PIPELINE_VERSION,
        "embedding_model": _embedding_model(s),
        "params": s.params.model_dump(mode="json"),
        "timings_seconds": s.checkpoints.timings,
        "counts": {"responses": len(s.rows), "usable": n_usable, "themed": n_usable - other, "other": other,
                   "unusable": unusable, "pii_redacted": s.pii_counts},
        "theme_count": theme_count,
        "merges": s.merges,
        "llm": {
            "mode": s.params.llm,
            "used": usage.calls > 0,
            "model": getattr(s.client, "model_name", None) if s.client else None,
            "calls": usage.calls,
            "cached_calls": usage.cached,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cost_usd": round(usage.cost_usd, 6),
            "note": usage.skipped,
        },
        "resumed_stages": s.checkpoints.resumed,
    }


def _embedding_model(s: RunState) -> dict[str, Any]:
    info, api = s.embedder.info, isinstance(s.embedder, ClientEmbedder)
    return {
        "name": info.name,
        "version": info.version,
        "sha256": info.sha256 or None,
        "dimensions": int(s.emb.shape[1]),
        "max_tokens": info.max_tokens or None,
        "runtime": "api" if api else info.runtime,
        "encoder": "api" if api else getattr(s.embedder, "encoder", None),
        # Which built graph ran (the fast encoder: "int8-vnni" on CPUs with VNNI, else "int8").
        "graph": info.graph or None,
        "languages": s.plan.detected if s.plan is not None else None,
    }
