"""The stage runner: clean → embed → cluster → describe → assign, each stage checkpointed.

A retry after a crash restores every finished stage from its checkpoint and
resumes at the first unfinished one; in particular the embeddings are never
computed twice. Checkpoints are keyed by a fingerprint of params + input, so a
checkpoint of different data is never reused. The embed stage also
checkpoints every ``EMBED_PART`` texts, so a crash or timeout mid-embedding
resumes from the last part. Large inputs embed as a map stage over chunk
workers (``ctx.map``, see ``mapped.py``); a map call suspends the attempt,
which then re-runs from the top, so everything before it comes from checkpoints.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shared.sdk import PermanentError, PipelineContext

from . import assign as A
from . import baseline as B
from . import clean as C
from . import cluster as K
from . import derive as V
from . import describe as D
from . import lang as L
from . import mapped as M
from . import sentiment as S
from . import waves as W
from .embed import ClientEmbedder, TextEmbedder
from .llm_port import ChatClient
from .params import ThematicParams
from .pii import redact
from .result import SCHEMA_VERSION, ThematicResult
from .validate import responses_of

PIPELINE_VERSION = "1.2.0"
#: Texts per partial embedding checkpoint (and per cancellation check): at
#: most ~20 s of embedding is lost to a crash, for one 3 MB blob per part.
EMBED_PART = 2048
#: Params that change how the job runs, not what it computes: left out of
#: the checkpoint fingerprint.
_EXECUTION_PARAMS = {"fanout_min_responses", "fanout_chunk_size"}
#: The checkpoint that fixes the fast encoder's graph (chosen by CPU) for the rest of a fanned-out job: its
#: chunks and its re-run after fan-in may land on CPUs that would choose the other one.
GRAPH_CHOICE = "embed-graph-choice"


def _fingerprint(params: ThematicParams, items: list[dict[str, Any]], embedder: str) -> str:
    h = hashlib.sha256(PIPELINE_VERSION.encode())
    h.update(params.model_dump_json(exclude=_EXECUTION_PARAMS).encode())
    # Vectors of another model (local vs an embeddings deployment) must never be mixed in.
    h.update(embedder.encode() + b"\x02")
    for it in items:
        h.update(str(it["id"]).encode() + b"\x00" + str(it.get("text", "")).encode() + b"\x01")
    return h.hexdigest()[:16]


_npy = M.npy
_from_npy = M.from_npy


class _Stages:
    """Checkpoint helper: runs a stage unless its checkpoint exists, and times it."""

    def __init__(self, ctx: PipelineContext, fp: str) -> None:
        self.ctx, self.fp = ctx, fp
        self.timings: dict[str, float] = {}
        self.resumed: list[str] = []

    def restore(self, name: str) -> bytes | None:
        data = self.ctx.restore(f"{name}-{self.fp}")
        if data is not None:
            self.resumed.append(name)
            self.timings[name] = 0.0
        return data

    def save(self, name: str, data: bytes, started: float) -> None:
        self.ctx.checkpoint(f"{name}-{self.fp}", data)
        self.timings[name] = round(time.perf_counter() - started, 3)


def run(ctx: PipelineContext, params: ThematicParams, data: Any) -> dict[str, Any]:
    if not isinstance(params, ThematicParams):
        params = ThematicParams.model_validate(params)
    client = M.job_client(params)
    return run_with(ctx, params, data, client=client)


def run_with(ctx: PipelineContext, params: ThematicParams, data: Any, *, client: ChatClient | None) -> dict[str, Any]:
    """``run`` with an explicit LLM client (None = no LLM); the seam unit tests use.

    ``data`` is the stored input: the responses, or ``{"responses": [...], "baseline": {...}}`` when the
    submission named ``compare_to`` (``validate.prepare``).
    """
    items = responses_of(data)
    baseline = data.get("baseline") if isinstance(data, dict) else None
    if params.compare_to is not None and baseline is None:
        raise PermanentError("compare_to is set but the input carries no baseline (submitted before it existed?)")
    # Keyword stopwords/tokenisation follow the job's languages (lang.keyword_languages); reset after the job.
    with L.keyword_languages(("en",)):
        return _run_with(ctx, params, items, client=client, baseline=baseline)


def _run_with(
    ctx: PipelineContext, params: ThematicParams, items: list[dict[str, Any]], *, client: ChatClient | None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if params.llm == "required" and client is None:
        raise PermanentError("llm=required but no LLM client is available")
    if params.llm == "off":
        client = None
    redact_on = M.redact_on(params, client)
    # The graph a fanned-out attempt of this job chose (one GET; written only when the embed stage fans out).
    saved_graph = ctx.restore(GRAPH_CHOICE)
    embedder = M.job_embedder(params, client, graph=saved_graph.decode() if saved_graph else None)
    st = _Stages(ctx, _fingerprint(params, items, f"{embedder.info.name}@{embedder.info.sha256}"))
    t_all = time.perf_counter()

    # 1 Clean ------------------------------------------------------------------
    ctx.progress("clean", 0, len(items), "normalising texts")
    raw = st.restore("clean")
    t0 = time.perf_counter()
    if raw is None:
        rows = C.clean(items)
        st.save("clean", json.dumps(C.to_json(rows)).encode(), t0)
    else:
        rows = C.from_json(json.loads(raw))
    usable = [r for r in rows if r.status == "ok"]
    texts = [r.text for r in usable]
    ctx.progress("clean", len(items), len(items), f"{len(usable)} usable responses")
    ctx.raise_if_cancelled()
    if not usable:
        raise PermanentError("no usable responses: every text is empty, gibberish or a duplicate")

    # Languages: detected per response under "auto"; they pick the encoder and the keyword stopwords.
    plan = L.plan(params.language, M.default_encoder(params), texts)
    L.set_keyword_languages(plan.keyword_languages)
    if plan.encoder != M.default_encoder(params) and not isinstance(embedder, ClientEmbedder):
        embedder = M.job_embedder(params, client, plan.encoder)

    # 2 Embed ------------------------------------------------------------------
    raw = st.restore("embed")
    t0 = time.perf_counter()
    if raw is None:
        emb = _embed_stage(ctx, params, texts, st, embedder, save_graph=saved_graph is None)
        st.save("embed", _npy(emb), t0)
    else:
        emb = _from_npy(raw).astype(np.float32)
        if emb.shape[0] != len(texts):
            raise PermanentError("embedding checkpoint does not match the input")
    ctx.raise_if_cancelled()

    # 3 Cluster ----------------------------------------------------------------
    ctx.progress("cluster", 0, 1, "choosing the number of themes")
    raw = st.restore("cluster")
    t0 = time.perf_counter()
    if raw is None:
        num = None if params.num_themes == "auto" else int(params.num_themes)
        cl = K.cluster(
            emb, num_themes=num, max_themes=params.max_themes, min_theme_size=params.min_theme_size, seed=params.seed
        )
        labels, k = A.fold_small(cl.labels, emb, cl.k, min(params.min_theme_size, max(1, len(texts) // 2)))
        explanation = cl.explanation
        if k != cl.k:
            explanation += (
                f"; {cl.k - k} theme(s) smaller than min_theme_size={params.min_theme_size} "
                "were folded into their nearest theme"
            )
        choice: dict[str, Any] = {
            "criterion": cl.criterion,
            "explanation": explanation,
            "scores": cl.scores,
            **K.count_json(cl.count, k),
        }
        st.save("cluster", json.dumps({"labels": labels.tolist(), "k": k, "choice": choice}).encode(), t0)
    else:
        d = json.loads(raw)
        labels, k, choice = np.array(d["labels"], dtype=np.int64), int(d["k"]), d["choice"]
    centroids = A.recentre(labels, emb, k)
    ctx.progress("cluster", 1, 1, f"{k} themes")
    ctx.raise_if_cancelled()

    # 4 Describe ---------------------------------------------------------------
    usage = D.LLMUsage()
    pii_counts = {"email": 0, "card": 0, "phone": 0}
    redacted: dict[int, str] = {}

    def quote_text(i: int) -> str:
        # What leaves the process for an LLM: truncated and, when on, redacted.
        if i not in redacted:
            t = texts[i][: D.QUOTE_CHARS]
            if redact_on:
                t, c = redact(t)
                for key, v in c.items():
                    pii_counts[key] += v
            redacted[i] = t
        return redacted[i]

    raw = st.restore("describe")
    t0 = time.perf_counter()
    if raw is None:
        # Key-phrase labels rank their candidates by contextual vectors (the mean embedding of the responses
        # using a phrase): no model or API call, so labels are the same however the embed stage ran.
        phrase_embed = D.CONTEXTUAL
        themes = D.describe(labels, centroids, emb, texts, embed=phrase_embed)
        # Near-duplicate merge by centroid similarity + keyword overlap, with or without an LLM.
        themes, labels, merge_records = D.merge_near_duplicates(
            themes, labels, emb, texts, embed=phrase_embed, seed=params.seed
        )
        merges = [asdict(m) for m in merge_records]
        centroids = A.recentre(labels, emb, len(themes))
        if client is not None:
            ctx.progress("describe", 0, len(themes), "labelling themes with the LLM")
            D.llm_label(client, themes, quote_text, usage, lambda n: ctx.progress("describe", n, len(themes)),
                        label_language=params.label_language)
            ctx.raise_if_cancelled()
            if usage.skipped is None:
                themes, labels, centroids = _merge(client, themes, labels, emb, texts, usage)
                merges += [
                    {"into": th.id, "merged": th.merged_from, "by": "llm"} for th in themes if th.merged_from
                ]
        levels = D.build_levels(
            themes, labels, emb, texts, min_size=params.min_theme_size, seed=params.seed, embed=phrase_embed
        )
        st.save(
            "describe",
            json.dumps(
                {
                    "themes": D.to_json(themes),
                    "labels": labels.tolist(),
                    "usage": usage.__dict__,
                    "levels": levels.to_json(),
                    "merges": merges,
                }
            ).encode(),
            t0,
        )
    else:
        d = json.loads(raw)
        themes, labels = D.from_json(d["themes"]), np.array(d["labels"], dtype=np.int64)
        usage = D.LLMUsage(**d["usage"])
        levels, merges = D.Levels.from_json(d["levels"]), d["merges"]
        centroids = A.recentre(labels, emb, len(themes))
    ctx.raise_if_cancelled()

    # Theme index (cluster label) → ThemeInfo; describe orders themes by size.
    by_index = {int(labels[th.members[0]]): th for th in themes if th.members}
    themes_by_id = {th.id: th for th in themes}
    level_counts: dict[str, int] = {}

    # 5 Assign -----------------------------------------------------------------
    t0 = time.perf_counter()
    ctx.progress("assign", 0, len(texts), "assigning responses")
    assigned = A.assign(emb, labels, centroids, multi_label=params.multi_label)
    seed_codes: list[list[dict[str, Any]]] | None = None
    seed_summary: list[dict[str, Any]] | None = None
    if params.seed_themes:
        seed_codes, seed_summary = _code_seed(
            ctx, params, client, embedder, emb, texts, usage, quote_text_full=_redactor(redact_on, pii_counts)
        )
    llm_sentiment: tuple[dict[str, S.Scored], str | None] | None = None
    if params.sentiment == "llm" and params.sentiment_from is None and client is not None:
        # Keyed by usable position; texts leave the process truncated and redacted like every LLM prompt.
        ctx.progress("assign", 0, len(texts), "sentiment with the LLM")
        red = _redactor(redact_on, pii_counts)
        llm_sentiment = S.by_llm(
            client, [(str(n), red(t[:1000])) for n, t in enumerate(texts)], usage, cancelled=ctx.raise_if_cancelled
        )
    st.timings["assign"] = round(time.perf_counter() - t0, 3)

    # Result -------------------------------------------------------------------
    usable_pos = {r.index: n for n, r in enumerate(usable)}
    counts_theme = {th.id: 0 for th in themes}
    assignments: list[dict[str, Any]] = []
    other = 0
    unusable: dict[str, int] = {"empty": 0, "gibberish": 0, "exact_duplicate": 0, "near_duplicate": 0}
    for r in rows:
        if r.status != "ok":
            unusable[r.status] += 1
            assignments.append(
                {
                    "response_id": r.id,
                    "bucket": "unusable",
                    "themes": [],
                    "reason": r.status,
                    "duplicate_of": r.duplicate_of,
                }
            )
            continue
        n = usable_pos[r.index]
        a = assigned[n]
        refs: list[dict[str, Any]] = []
        for t, c in a.themes:
            if t in by_index:
                refs.append({"theme_id": by_index[t].id, "confidence": round(c, 4)})
                counts_theme[by_index[t].id] += 1
        if not refs:
            other += 1
        doc_a: dict[str, Any] = {"response_id": r.id, "bucket": "theme" if refs else "other", "themes": refs}
        if refs:
            # Both levels of the primary theme: broad (3-12) and fine.
            broad_id, fine_id = D.level_ids(levels, themes_by_id, refs[0]["theme_id"], n)
            doc_a["broad"], doc_a["fine"] = broad_id, fine_id
            for lid in (broad_id, fine_id):
                if lid is not None and lid not in counts_theme:
                    level_counts[lid] = level_counts.get(lid, 0) + 1
        if seed_codes is not None:
            doc_a["seed_codes"] = seed_codes[n]
        assignments.append(doc_a)
    n_usable = len(usable)
    theme_docs = []
    for th in sorted(themes, key=lambda t: -counts_theme[t.id]):
        theme_docs.append(
            {
                "id": th.id,
                "label": th.label,
                "description": th.description,
                "keywords": th.keywords,
                "count": counts_theme[th.id],
                "share": round(counts_theme[th.id] / n_usable, 4),
                "quotes": [{"response_id": usable[i].id, "text": texts[i][: D.QUOTE_CHARS]} for i in th.quotes],
                "parent": th.parent,
                "labelled_by": th.labelled_by,
                "merged_from": th.merged_from,
                "key_phrases": th.key_phrases,
                "subthemes": [s.id for s in levels.subthemes if s.parent == th.id],
            }
        )

    def quote_doc(i: int) -> dict[str, Any]:
        return {"response_id": usable[i].id, "text": texts[i][: D.QUOTE_CHARS]}

    parent_docs = D.level_docs(levels.parents, level_counts, n_usable, quote_doc, children=levels.children)
    sub_docs = D.level_docs(levels.subthemes, level_counts, n_usable, quote_doc)
    if isinstance(embedder, ClientEmbedder):
        for key, v in embedder.redactions.items():
            pii_counts[key] = pii_counts.get(key, 0) + v
    if usage.calls:
        ctx.usage(llm_tokens=usage.prompt_tokens + usage.completion_tokens, llm_cost_usd=usage.cost_usd)
    st.timings["total"] = round(time.perf_counter() - t_all, 3)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "themes": theme_docs,
        "parents": parent_docs,
        "subthemes": sub_docs,
        "levels": {
            "broad": levels.broad,
            "fine": levels.fine,
            "broad_count": len(parent_docs) if levels.broad == "parents" else len(theme_docs),
            "fine_count": len(theme_docs) if levels.fine == "themes" else len(sub_docs),
        },
        "seed_themes": seed_summary,
        "assignments": assignments,
        "run": {
            "pipeline": "thematic",
            "pipeline_version": PIPELINE_VERSION,
            "embedding_model": {
                "name": embedder.info.name,
                "version": embedder.info.version,
                "sha256": embedder.info.sha256 or None,
                "dimensions": int(emb.shape[1]),
                "max_tokens": embedder.info.max_tokens or None,
                "runtime": "api" if isinstance(embedder, ClientEmbedder) else embedder.info.runtime,
                "encoder": "api" if isinstance(embedder, ClientEmbedder) else getattr(embedder, "encoder", None),
                # Which built graph ran (the fast encoder: "int8-vnni" on CPUs with VNNI, else "int8").
                "graph": embedder.info.graph or None,
                "languages": plan.detected,
            },
            "params": params.model_dump(mode="json"),
            "timings_seconds": st.timings,
            "counts": {
                "responses": len(rows),
                "usable": n_usable,
                "themed": n_usable - other,
                "other": other,
                "unusable": unusable,
                "pii_redacted": pii_counts,
            },
            "theme_count": choice,
            "merges": merges,
            "llm": {
                "mode": params.llm,
                "used": usage.calls > 0,
                "model": getattr(client, "model_name", None) if client else None,
                "calls": usage.calls,
                "cached_calls": usage.cached,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cost_usd": round(usage.cost_usd, 6),
                "note": usage.skipped,
            },
            "resumed_stages": st.resumed,
        },
    }
    t0 = time.perf_counter()
    ctx.progress("insight", 0, 1, "sentiment, breakdowns, comparison")
    _insights(doc, params, items, usable, emb, embedder, baseline, llm_sentiment,
              getattr(client, "model_name", None) if client else None)
    st.timings["insight"] = round(time.perf_counter() - t0, 3)
    ctx.progress("done", len(items), len(items), f"{len(doc['themes'])} themes")
    # Validate before returning: a malformed document is our bug, not the caller's.
    ThematicResult.model_validate(doc)
    return doc


def _insights(
    doc: dict[str, Any], params: ThematicParams, items: list[dict[str, Any]], usable: list[C.CleanedResponse],
    emb: NDArray[np.float32], embedder: TextEmbedder, baseline: dict[str, Any] | None,
    llm_sentiment: tuple[dict[str, S.Scored], str | None] | None = None, llm_model: str | None = None,
) -> None:
    """Sentiment per response, the earlier wave's codebook (``compare_to``), then what follows from both."""
    metadata = {str(it["id"]): it.get("metadata") for it in items}
    scored: list[S.Scored | None] | None = None
    if params.sentiment_from is not None:
        key = params.sentiment_from
        values = [(metadata.get(str(r.id)) or {}).get(key) for r in usable]
        scale = S.rating_scale(values)
        if isinstance(scale, str):
            raise PermanentError(f"sentiment_from={key!r}: {scale}")  # checked at submission; a guard only
        scored = [S.from_rating(v, scale) for v in values]
        doc["sentiment"] = {"source": "metadata", "field": key, "model": None, "scale": scale.kind}
    elif params.sentiment == "lexicon":
        scored = list[S.Scored | None](S.lexicon([r.text for r in usable]))
        doc["sentiment"] = {"source": "lexicon", "field": None, "model": S.LEXICON_MODEL, "scale": None}
    elif params.sentiment == "llm":
        got, note = llm_sentiment if llm_sentiment is not None else ({}, "no LLM client in this run")
        missing = [n for n in range(len(usable)) if str(n) not in got]
        # What the LLM did not label (budget spent, a bad batch) is scored by the lexicon, and the result says so.
        fill = dict(zip(missing, S.lexicon([usable[n].text for n in missing]), strict=True))
        scored = [got.get(str(n)) or fill.get(n) for n in range(len(usable))]
        if missing:
            note = f"{note + '; ' if note else ''}{len(missing)} response(s) scored by {S.LEXICON_MODEL}"
        doc["sentiment"] = {"source": "llm", "field": None, "model": llm_model, "scale": None, "note": note}
    if scored is not None:
        by_id = {str(r.id): s for r, s in zip(usable, scored, strict=True)}
        for a in doc["assignments"]:
            s = by_id.get(str(a["response_id"]))
            if a["bucket"] != "unusable":
                a["sentiment"] = s.to_json() if s is not None else None
        doc["sentiment"]["scored"] = sum(1 for s in scored if s is not None)
    encoder = f"{embedder.info.name}@{embedder.info.sha256}"
    inherited = _compare(doc, params, usable, emb, embedder, baseline, encoder) if baseline is not None else []
    V.refresh(doc, metadata, breakdown_by=params.breakdown_by, min_group_size=params.min_group_size,
              score=params.score.model_dump() if params.score is not None else None, seed=params.seed)
    # Every job's instrument (waves.py), so any job can be the earlier wave of a later one.
    doc["instrument"] = W.build(
        emb, [V.primary_theme(a) for a in doc["assignments"] if a["bucket"] != "unusable"],
        [t["id"] for t in doc["themes"]], [r.text for r in usable], encoder, inherited=inherited,
    )


def _compare(
    doc: dict[str, Any], params: ThematicParams, usable: list[C.CleanedResponse], emb: NDArray[np.float32],
    embedder: TextEmbedder, baseline: dict[str, Any], encoder: str,
) -> list[dict[str, Any]]:
    """Recode ``doc`` against the earlier job (``compare_to``); returns the instrument codes this job inherits."""
    ids = [str(r.id) for r in usable]
    quotes = {str(r.id): r.text[: D.QUOTE_CHARS] for r in usable}
    primary = {str(a["response_id"]): V.primary_theme(a) for a in doc["assignments"]}
    if params.compare_mode == "discover":
        protos = B.prototypes(baseline, embedder)
        coded = B.match(emb, [primary.get(i) for i in ids], protos, [t["id"] for t in baseline["themes"]])
        B.carry_over(doc, dict(zip(ids, coded, strict=True)), baseline, quotes)
        doc["comparison"].update(mode="discover", instrument="prototypes")
        return []
    earlier = baseline.get("instrument")
    how = "centroids"
    if not earlier or earlier.get("encoder") != encoder or not earlier.get("codes") or \
            len(W.unpack(earlier["codes"][0]["centroid"])) != emb.shape[1]:
        # An earlier result without an instrument (before schema 1.2) or of another encoder: its themes'
        # prototypes stand in, and "then" is its clustering's counts (approximate, and the result says so).
        earlier, how = W.from_prototypes(B.prototypes(baseline, embedder), baseline, encoder), "prototypes"
    coded, facts = W.inherit(emb, [r.text for r in usable], [primary.get(i) for i in ids], earlier,
                             min_size=params.min_theme_size)
    # A response coded to an earlier theme gets its cosine to that theme's nearest centroid as the confidence.
    _, best, _ = W.nearest(emb, np.stack([W.unpack(c["centroid"]) for c in earlier["codes"]])
                           if earlier["codes"] else np.zeros((0, emb.shape[1]), dtype=np.float32))
    B.carry_over(doc, dict(zip(ids, coded, strict=True)), baseline, quotes, then_counts=W.counts(earlier),
                 confidence={i: float(b) for i, b in zip(ids, best, strict=True)})
    doc["comparison"].update(mode="inherit", instrument=how, far=facts["far"])
    return [dict(c) for c in earlier["codes"]]


def _embed_stage(
    ctx: PipelineContext, params: ThematicParams, texts: list[str], st: _Stages, embedder: TextEmbedder,
    *, save_graph: bool = False,
) -> NDArray[np.float32]:
    """Embeddings of ``texts``: fanned out over chunk workers for large inputs, else in this process."""
    mapper = getattr(ctx, "map", None)
    if mapper is not None and len(texts) >= params.fanout_min_responses:
        ctx.progress("embed", 0, len(texts), f"embedding on chunk workers, {params.fanout_chunk_size} per chunk")
        # Suspends this attempt the first time; the re-run finds the chunks
        # done and gets their outputs, in chunk order (error budget 0: every
        # chunk's output is present).
        encoder = getattr(embedder, "encoder", None)
        graph = getattr(embedder, "graph", None)
        # Chunk workers see only the params: name the encoder when the params alone do not (lang.plan), and
        # the fast encoder's graph always, so that every chunk runs the parent's graph whatever its CPU.
        chunk_items: list[Any] = (
            [[encoder, t, graph] for t in texts] if graph is not None
            else texts if encoder in (None, M.default_encoder(params)) else [[encoder, t] for t in texts]
        )
        if graph is not None and save_graph:
            # Before the chunks exist: if this write's answer is lost, the re-run reads it back or chooses again
            # before any chunk is created (map_stage creates them after), so no vector of another graph exists.
            ctx.checkpoint(GRAPH_CHOICE, graph.encode())
        res = mapper("embed", chunk_items, M.embed_chunk, chunk_size=params.fanout_chunk_size)
        emb = np.concatenate([M.from_npy(o) for o in res.outputs]).astype(np.float32)
        if emb.shape[0] != len(texts):
            raise PermanentError(f"the embed map stage returned {emb.shape[0]} vectors for {len(texts)} texts")
        st.resumed.append("embed_fanout")
        return emb
    return _embed(ctx, texts, embedder, st.fp, st.resumed)


def _embed(
    ctx: PipelineContext, texts: list[str], embedder: TextEmbedder, fp: str, resumed: list[str]
) -> NDArray[np.float32]:
    """Embed in parts of EMBED_PART texts, each checkpointed, so a crash resumes from the last part."""
    parts: list[NDArray[np.float32]] = []
    restored = 0
    ctx.progress("embed", 0, len(texts), "embedding")
    for n, start in enumerate(range(0, len(texts), EMBED_PART)):
        chunk = texts[start : start + EMBED_PART]
        # The part size is in the name: a checkpoint of other boundaries never matches.
        name = f"embedpart-{EMBED_PART}-{n:05d}-{fp}"
        raw = ctx.restore(name)
        part = M.from_npy(raw).astype(np.float32) if raw is not None else None
        if part is not None and part.shape[0] == len(chunk):
            restored += len(chunk)
        else:
            # Within a part texts are length-sorted to reduce padding.
            part = embedder.embed(chunk, on_batch=functools.partial(_embed_progress, ctx, start, len(texts)))
            if start + len(chunk) < len(texts):
                # The last part is not saved on its own: the whole-stage checkpoint follows at once.
                ctx.checkpoint(name, _npy(part))
        parts.append(part)
        ctx.progress("embed", start + len(chunk), len(texts))
        ctx.raise_if_cancelled()
    if restored:
        resumed.append(f"embed_partial:{restored}")
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(parts).astype(np.float32)


def _embed_progress(ctx: PipelineContext, offset: int, total: int, done: int) -> None:
    ctx.progress("embed", offset + done, total)


def _merge(
    client: ChatClient,
    themes: list[D.ThemeInfo],
    labels: NDArray[np.int64],
    emb: NDArray[np.float32],
    texts: list[str],
    usage: D.LLMUsage,
) -> tuple[list[D.ThemeInfo], NDArray[np.int64], NDArray[np.float32]]:
    """Apply the LLM merge pass; merged themes keep the larger theme's label and get fresh keywords/quotes."""
    k = len(themes)
    centroids = A.recentre(labels, emb, k)
    idx = {th.id: int(labels[th.members[0]]) for th in themes if th.members}
    groups = D.llm_merge_groups(client, themes, {tid: centroids[i] for tid, i in idx.items()}, usage)
    if not groups:
        return themes, labels, centroids
    remap = np.arange(k)
    for g in groups:
        for tid in g[1:]:
            remap[idx[tid]] = idx[g[0]]
    uniq, new = np.unique(remap[labels], return_inverse=True)
    new = new.astype(np.int64)
    centroids = A.recentre(new, emb, len(uniq))
    old_by_id = {th.id: th for th in themes}
    merged = D.describe(new, centroids, emb, texts)
    # Carry LLM labels over: a new theme inherits from the old theme holding most of its members.
    old_of = {i: th for th in themes for i in th.members}
    for th in merged:
        votes: dict[str, int] = {}
        for i in th.members:
            oid: str = old_of[i].id
            votes[oid] = votes.get(oid, 0) + 1
        src = old_by_id[max(votes, key=lambda v: votes[v])]
        th.label, th.description, th.labelled_by = src.label, src.description, src.labelled_by
        th.merged_from = sorted(votes) if len(votes) > 1 else []
    return merged, new, centroids


def _redactor(on: bool, counts: dict[str, int]) -> Callable[[str], str]:
    def f(text: str) -> str:
        if not on:
            return text
        t, c = redact(text)
        for key, v in c.items():
            counts[key] += v
        return t

    return f


def _code_seed(
    ctx: PipelineContext,
    params: ThematicParams,
    client: ChatClient | None,
    embedder: TextEmbedder,
    emb: NDArray[np.float32],
    texts: list[str],
    usage: D.LLMUsage,
    *,
    quote_text_full: Callable[[str], str],
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    assert params.seed_themes is not None
    book = [{"name": s.name, "description": s.description} for s in params.seed_themes]
    # Keywords (a served codebook carries them) are part of what a code means; a plain seed has none.
    code_emb = embedder.embed([
        (f"{s.name}: {s.description}".strip(": ") + (f" ({', '.join(s.keywords)})" if s.keywords else ""))
        for s in params.seed_themes
    ])
    sim_codes = A.code_by_similarity(emb, code_emb, multi_label=params.multi_label)
    out: list[list[dict[str, Any]]] = [
        [{"name": book[j]["name"], "confidence": round(c, 4), "coded_by": "embedding"} for j, c in codes]
        for codes in sim_codes
    ]
    if client is not None:
        ctx.progress("assign", 0, len(texts), "coding responses against the codebook with the LLM")
        items = [(str(i), quote_text_full(t[:1000])) for i, t in enumerate(texts)]
        mapper = getattr(ctx, "map", None)
        if mapper is not None and len(items) >= min(params.fanout_min_responses, M.CODE_FANOUT_MIN):
            # Many responses: code on chunk workers. Everything before this
            # point is restored from checkpoints when the attempt re-runs, and
            # a chunk delivered twice hits the LLM cache (same prompts).
            res = mapper("code", [[i, t] for i, t in items], M.code_chunk, chunk_size=M.code_chunk_size(params))
            llm: dict[str, list[str]] = {}
            for part in res.outputs:
                llm.update(part["codes"])
                u = part["usage"]
                usage.calls += u["calls"]
                usage.cached += u["cached"]
                usage.prompt_tokens += u["prompt_tokens"]
                usage.completion_tokens += u["completion_tokens"]
                usage.cost_usd += u["cost_usd"]
                usage.skipped = usage.skipped or u["skipped"]
        else:
            llm = A.code_by_llm(
                client, book, items, multi_label=params.multi_label, usage=usage, cancelled=ctx.raise_if_cancelled
            )
        sims = emb @ code_emb.T
        pos = {b["name"]: j for j, b in enumerate(book)}
        for key, names in llm.items():
            i = int(key)
            out[i] = [{"name": nm, "confidence": round(float(sims[i, pos[nm]]), 4), "coded_by": "llm"} for nm in names]
    n = len(texts)
    summary = []
    for b in book:
        c = sum(1 for codes in out if any(x["name"] == b["name"] for x in codes))
        summary.append(
            {"name": b["name"], "description": b["description"], "count": c, "share": round(c / n, 4) if n else 0.0}
        )
    return out, summary
