"""The thematic run as a loop of stages over one typed state (``RunState``).

``STAGES`` runs in order: clean → embed → cluster → describe → assign → insight → render. Each stage is a
function ``(ctx, state) -> None`` that reads the fields its docstring names and writes the ones it names; the
first four are checkpointed (``Checkpoints.stage``), so a retry after a crash restores them and resumes at the
first unfinished one, and the embeddings are never computed twice. The embed stage also checkpoints every
``EMBED_PART`` texts, and large inputs embed as a map stage over chunk workers (``ctx.map``, see ``mapped.py``);
a map call suspends the attempt, which then re-runs from the top, so everything before it comes from
checkpoints. ``run.py`` builds the state and runs the loop.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from shared.sdk import PermanentError, PipelineContext

from . import assign as assigning
from . import cluster as clustering
from . import describe as describing
from . import embed as embedding
from . import lang, mapped
from . import sentiment as sentiments
from .clean import CleanedResponse, clean, from_json, to_json
from .document import Recode, compare_recode, copy_weights, counted, insight_sentiment, number_by_count, result_model
from .embed import ClientEmbedder, TextEmbedder
from .llm_port import ChatClient
from .params import ThematicParams
from .pii import redact
from .result import SeedCode, SeedThemeOut, SentimentInfo, ThematicResult

#: Texts per partial embedding checkpoint (and per cancellation check): at
#: most ~20 s of embedding is lost to a crash, for one 3 MB blob per part.
EMBED_PART = 2048
#: The checkpoint that fixes the fast encoder's graph (chosen by CPU) for the rest of a fanned-out job: its
#: chunks and its re-run after fan-in may land on CPUs that would choose the other one.
GRAPH_CHOICE = "embed-graph-choice"

T = TypeVar("T")


class Checkpoints:
    """Runs a stage unless its checkpoint (keyed by the input's fingerprint) exists, and times it."""

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

    def stage(self, name: str, compute: Callable[[], T], encode: Callable[[T], bytes],
              decode: Callable[[bytes], T]) -> T:
        """The stage's value from its checkpoint, else computed and checkpointed (timed either way)."""
        raw = self.restore(name)
        started = time.perf_counter()
        if raw is not None:
            return decode(raw)
        value = compute()
        self.save(name, encode(value), started)
        return value


@dataclass
class RunState:
    """What one attempt of the run knows; each stage fills in its own section."""

    # Given: the job and its collaborators.
    params: ThematicParams
    items: list[dict[str, Any]]
    client: ChatClient | None
    embedder: TextEmbedder
    checkpoints: Checkpoints
    baseline: dict[str, Any] | None = None
    #: No graph choice was restored: a fanned-out embed stage records the one this attempt made.
    save_graph: bool = False
    #: PII redaction of what leaves the process (``mapped.redact_on``).
    redact_on: bool = False
    started: float = field(default_factory=time.perf_counter)
    #: Per kind of PII, how many were redacted from text sent out (prompts, API embeddings).
    pii_counts: dict[str, int] = field(default_factory=lambda: {"email": 0, "card": 0, "phone": 0})
    usage: describing.LLMUsage = field(default_factory=describing.LLMUsage)
    # clean
    rows: list[CleanedResponse] = field(default_factory=list)
    usable: list[CleanedResponse] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    #: Copies counted with their first copy (``params.count_duplicates``): each with its first copy's usable
    #: position. Never embedded: every stage up to insight works on ``usable`` alone.
    copies: list[tuple[CleanedResponse, int]] = field(default_factory=list)
    plan: lang.Plan | None = None
    # embed
    emb: NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    # cluster (labels and centroids are rewritten by describe's merges)
    labels: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    k: int = 0
    choice: dict[str, Any] = field(default_factory=dict)
    centroids: NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    # describe
    themes: list[describing.ThemeInfo] = field(default_factory=list)
    levels: describing.Levels | None = None
    merges: list[dict[str, Any]] = field(default_factory=list)
    # assign
    assigned: list[assigning.Assignment] = field(default_factory=list)
    seed_codes: list[list[SeedCode]] | None = None
    seed_summary: list[SeedThemeOut] | None = None
    llm_sentiment: tuple[dict[str, sentiments.Scored], str | None] | None = None
    #: What the LLM said of the responses whose score did not fit its label (usable position, label, its score):
    #: their score was moved to the label's side (sentiments.llm_scored), and the result's note says so.
    llm_disagreed: list[tuple[str, sentiments.Label, float]] = field(default_factory=list)
    # insight
    sentiment: SentimentInfo | None = None
    scored: list[sentiments.Scored | None] | None = None
    recode: Recode | None = None
    insight_started: float = 0.0
    # render
    result: ThematicResult | None = None
    #: Quotes as the LLM saw them, by usable position (``quote_text``).
    _quotes: dict[int, str] = field(default_factory=dict, init=False, repr=False)

    def redact(self, text: str) -> str:
        """``text`` as it may leave the process: PII-redacted when redaction is on (and counted)."""
        if not self.redact_on:
            return text
        out, found = redact(text)
        for key, v in found.items():
            self.pii_counts[key] += v
        return out

    def quote_text(self, i: int) -> str:
        """Usable response ``i`` as an LLM sees it: truncated, redacted once however often it is quoted."""
        if i not in self._quotes:
            self._quotes[i] = self.redact(self.texts[i][: describing.QUOTE_CHARS])
        return self._quotes[i]


Stage = Callable[[PipelineContext, RunState], None]


def clean_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``items``; writes ``rows`` (every response with its status), ``usable``, ``texts`` and the
    language ``plan`` (which may switch ``embedder`` to the encoder of the detected languages). Checkpointed."""
    ctx.progress("clean", 0, len(s.items), "normalising texts")
    s.rows = s.checkpoints.stage("clean", lambda: clean(s.items), lambda rows: json.dumps(to_json(rows)).encode(),
                                 lambda raw: from_json(json.loads(raw)))
    s.usable = [r for r in s.rows if r.status == "ok"]
    s.texts = [r.text for r in s.usable]
    if s.params.count_duplicates:
        position = {str(r.id): n for n, r in enumerate(s.usable)}
        s.copies = [(r, position[str(r.duplicate_of)]) for r in s.rows
                    if r.duplicate_of is not None and str(r.duplicate_of) in position]
    ctx.progress("clean", len(s.items), len(s.items), f"{len(s.usable)} usable responses")
    ctx.raise_if_cancelled()
    if not s.usable:
        raise PermanentError("no usable responses: every text is empty, a non-answer, gibberish or a duplicate")
    # Languages: detected per response under "auto"; they pick the encoder and the keyword stopwords.
    default = mapped.default_encoder(s.params)
    s.plan = lang.plan(s.params.language, default, s.texts)
    lang.set_keyword_languages(s.plan.keyword_languages)
    if s.plan.encoder != default and not isinstance(s.embedder, ClientEmbedder):
        s.embedder = mapped.job_embedder(s.params, s.client, s.plan.encoder)


def embed_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``texts`` and ``embedder``; writes ``emb`` (one float32 row per usable text). Checkpointed, and
    in parts of ``EMBED_PART`` within the stage; fanned out over chunk workers for large inputs."""

    def decode(raw: bytes) -> NDArray[np.float32]:
        emb = mapped.from_npy(raw).astype(np.float32)
        if emb.shape[0] != len(s.texts):
            raise PermanentError("embedding checkpoint does not match the input")
        return emb

    s.emb = s.checkpoints.stage("embed", lambda: _embed_texts(ctx, s), mapped.npy, decode)
    ctx.raise_if_cancelled()


def cluster_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``emb``; writes ``labels``, ``k``, ``choice`` (how the count was chosen) and ``centroids``.
    Themes smaller than ``min_theme_size`` are folded into their nearest theme. Checkpointed."""
    ctx.progress("cluster", 0, 1, "choosing the number of themes")

    def decode(raw: bytes) -> tuple[NDArray[np.int64], int, dict[str, Any]]:
        d = json.loads(raw)
        return np.array(d["labels"], dtype=np.int64), int(d["k"]), d["choice"]

    def encode(v: tuple[NDArray[np.int64], int, dict[str, Any]]) -> bytes:
        return json.dumps({"labels": v[0].tolist(), "k": v[1], "choice": v[2]}).encode()

    s.labels, s.k, s.choice = s.checkpoints.stage("cluster", lambda: _cluster(s), encode, decode)
    s.centroids = assigning.recentre(s.labels, s.emb, s.k)
    ctx.progress("cluster", 1, 1, f"{s.k} themes")
    ctx.raise_if_cancelled()


def stage_threads() -> int:
    """Threads for the cluster stage's independent units (:mod:`.parallel`): as many as the embedding uses
    (``embed.DEFAULT_THREADS``, read when the stage runs), each on one BLAS thread; the result is the same at any
    count (issue 27)."""
    return embedding.DEFAULT_THREADS


def _cluster(s: RunState) -> tuple[NDArray[np.int64], int, dict[str, Any]]:
    p = s.params
    num = None if p.num_themes == "auto" else int(p.num_themes)
    cl = clustering.cluster(s.emb, num_themes=num, max_themes=p.max_themes, min_theme_size=p.min_theme_size,
                            seed=p.seed, threads=stage_threads())
    labels, k = assigning.fold_small(cl.labels, s.emb, cl.k, min(p.min_theme_size, max(1, len(s.texts) // 2)))
    explanation = cl.explanation
    if k != cl.k:
        explanation += (
            f"; {cl.k - k} theme(s) smaller than min_theme_size={p.min_theme_size} were folded into their nearest theme"
        )
    choice = {"criterion": cl.criterion, "explanation": explanation, "scores": cl.scores,
              **clustering.count_json(cl.count, k)}
    return labels, k, choice


_Described = tuple[list[describing.ThemeInfo], NDArray[np.int64], describing.LLMUsage, describing.Levels,
                   list[dict[str, Any]], NDArray[np.float32] | None]


def describe_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``labels``, ``centroids``, ``emb``, ``texts``; writes ``themes`` (labelled, near-duplicates
    merged, by keywords or the LLM), the rewritten ``labels``/``centroids``, ``levels`` (broad and fine),
    ``merges`` and the LLM ``usage`` so far. Checkpointed (with the usage, so a resumed run reports it)."""

    def encode(v: _Described) -> bytes:
        themes, labels, usage, levels, merges, _ = v
        return json.dumps({"themes": describing.to_json(themes), "labels": labels.tolist(), "usage": usage.__dict__,
                           "levels": levels.to_json(), "merges": merges}).encode()

    def decode(raw: bytes) -> _Described:
        d = json.loads(raw)
        return (describing.from_json(d["themes"]), np.array(d["labels"], dtype=np.int64),
                describing.LLMUsage(**d["usage"]), describing.Levels.from_json(d["levels"]), d["merges"], None)

    themes, labels, usage, levels, merges, centroids = s.checkpoints.stage(
        "describe", lambda: _describe(ctx, s), encode, decode)
    s.themes, s.labels, s.usage, s.levels, s.merges = themes, labels, usage, levels, merges
    s.centroids = centroids if centroids is not None else assigning.recentre(labels, s.emb, len(themes))
    ctx.raise_if_cancelled()


def _describe(ctx: PipelineContext, s: RunState) -> _Described:
    p, usage = s.params, s.usage
    # Key-phrase labels rank their candidates by contextual vectors (the mean embedding of the responses
    # using a phrase): no model or API call, so labels are the same however the embed stage ran.
    phrase_embed = describing.CONTEXTUAL
    themes = describing.describe(s.labels, s.centroids, s.emb, s.texts, embed=phrase_embed)
    # Near-duplicate merge by centroid similarity + keyword overlap, with or without an LLM.
    themes, labels, merge_records = describing.merge_near_duplicates(
        themes, s.labels, s.emb, s.texts, embed=phrase_embed, seed=p.seed
    )
    merges = [asdict(m) for m in merge_records]
    centroids = assigning.recentre(labels, s.emb, len(themes))
    if s.client is not None:
        ctx.progress("describe", 0, len(themes), "labelling themes with the LLM")
        describing.llm_label(s.client, themes, s.quote_text, usage, lambda n: ctx.progress("describe", n, len(themes)),
                             label_language=p.label_language)
        ctx.raise_if_cancelled()
        if usage.skipped is None:
            themes, labels, centroids = _llm_merge(s.client, themes, labels, s.emb, s.texts, usage)
            merges += [{"into": th.id, "merged": th.merged_from, "by": "llm"} for th in themes if th.merged_from]
    levels = describing.build_levels(themes, labels, s.emb, s.texts, min_size=p.min_theme_size, seed=p.seed,
                                     embed=phrase_embed, threads=stage_threads())
    return themes, labels, usage, levels, merges, centroids


def assign_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``emb``, ``labels``, ``centroids``; writes ``assigned`` (themes per usable response), the
    codebook's ``seed_codes``/``seed_summary`` (``params.seed_themes``) and ``llm_sentiment``
    (``params.sentiment == "llm"``); then numbers the themes by their counts (``number_by_count``). Not checkpointed: it is fast, and what the LLM answered is cached."""
    started = time.perf_counter()
    p = s.params
    ctx.progress("assign", 0, len(s.texts), "assigning responses")
    s.assigned = assigning.assign(s.emb, s.labels, s.centroids, multi_label=p.multi_label)
    if p.seed_themes:
        s.seed_codes, s.seed_summary = _code_seed(ctx, s)
    if p.sentiment == "llm" and p.sentiment_from is None and s.client is not None:
        # Keyed by usable position; texts leave the process truncated and redacted like every LLM prompt.
        ctx.progress("assign", 0, len(s.texts), "sentiment with the LLM")
        s.llm_sentiment = sentiments.by_llm(s.client, [(str(n), s.redact(t[:1000])) for n, t in enumerate(s.texts)],
                                            s.usage, cancelled=ctx.raise_if_cancelled, disagreed=s.llm_disagreed)
    # Ids by the count the result shows (copies and secondary themes in): known only now (number_by_count).
    number_by_count(s)
    s.checkpoints.timings["assign"] = round(time.perf_counter() - started, 3)


def insight_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads ``usable``, ``copies``, ``emb``, ``assigned``, ``baseline``, ``llm_sentiment``; writes ``sentiment``
    (the result's section) with ``scored`` (one per usable response, then one per counted copy), and ``recode``: how this wave is coded
    against the earlier one (``params.compare_to``), or None. First it closes the LLM's part of the run: the API
    embedder's redactions join ``pii_counts`` and the LLM usage is reported to the platform (``ctx.usage``)."""
    if isinstance(s.embedder, ClientEmbedder):
        for key, v in s.embedder.redactions.items():
            s.pii_counts[key] = s.pii_counts.get(key, 0) + v
    if s.usage.calls:
        ctx.usage(llm_tokens=s.usage.prompt_tokens + s.usage.completion_tokens, llm_cost_usd=s.usage.cost_usd)
    # "total" is the run up to here, as it always was; the insight time is measured apart.
    s.checkpoints.timings["total"] = round(time.perf_counter() - s.started, 3)
    s.insight_started = time.perf_counter()
    ctx.progress("insight", 0, 1, "sentiment, breakdowns, comparison")
    s.sentiment, s.scored = insight_sentiment(s)
    s.recode = compare_recode(s) if s.baseline is not None else None


def render_stage(ctx: PipelineContext, s: RunState) -> None:
    """Reads every section above; writes ``result``: the ``ThematicResult``, built part by part (``document.py``)."""
    s.result = result_model(s)
    ctx.progress("done", len(s.items), len(s.items), f"{len(s.result.themes)} themes")


STAGES: tuple[Stage, ...] = (clean_stage, embed_stage, cluster_stage, describe_stage, assign_stage, insight_stage,
                             render_stage)


def run_stages(ctx: PipelineContext, s: RunState, stages: tuple[Stage, ...] = STAGES) -> dict[str, Any]:
    """Run ``stages`` in order over ``s``; returns the document of the result the last one wrote (as stored)."""
    for stage in stages:
        stage(ctx, s)
    if s.result is None:
        raise RuntimeError("no result: the render stage writes it, and it did not run")
    return s.result.document()


# Embedding ------------------------------------------------------------------------------------------------------


def _embed_texts(ctx: PipelineContext, s: RunState) -> NDArray[np.float32]:
    """Embeddings of ``texts``: fanned out over chunk workers for large inputs, else in this process."""
    mapper = getattr(ctx, "map", None)
    if mapper is not None and len(s.texts) >= s.params.fanout_min_responses:
        return _embed_fanout(ctx, s, mapper)
    return _embed(ctx, s.texts, s.embedder, s.checkpoints.fp, s.checkpoints.resumed)


def _embed_fanout(ctx: PipelineContext, s: RunState, mapper: Callable[..., Any]) -> NDArray[np.float32]:
    texts, params = s.texts, s.params
    ctx.progress("embed", 0, len(texts), f"embedding on chunk workers, {params.fanout_chunk_size} per chunk")
    # Suspends this attempt the first time; the re-run finds the chunks
    # done and gets their outputs, in chunk order (error budget 0: every
    # chunk's output is present).
    encoder = getattr(s.embedder, "encoder", None)
    graph = getattr(s.embedder, "graph", None)
    # Chunk workers see only the params: name the encoder when the params alone do not (lang.plan), and
    # the fast encoder's graph always, so that every chunk runs the parent's graph whatever its CPU.
    chunk_items: list[Any] = (
        [[encoder, t, graph] for t in texts] if graph is not None
        else texts if encoder in (None, mapped.default_encoder(params)) else [[encoder, t] for t in texts]
    )
    if graph is not None and s.save_graph:
        # Before the chunks exist: if this write's answer is lost, the re-run reads it back or chooses again
        # before any chunk is created (map_stage creates them after), so no vector of another graph exists.
        ctx.checkpoint(GRAPH_CHOICE, graph.encode())
    res = mapper("embed", chunk_items, mapped.embed_chunk, chunk_size=params.fanout_chunk_size)
    emb = np.concatenate([mapped.from_npy(o) for o in res.outputs]).astype(np.float32)
    if emb.shape[0] != len(texts):
        raise PermanentError(f"the embed map stage returned {emb.shape[0]} vectors for {len(texts)} texts")
    s.checkpoints.resumed.append("embed_fanout")
    return emb


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
        part = mapped.from_npy(raw).astype(np.float32) if raw is not None else None
        if part is not None and part.shape[0] == len(chunk):
            restored += len(chunk)
        else:
            # Within a part texts are length-sorted to reduce padding.
            part = embedder.embed(chunk, on_batch=functools.partial(_embed_progress, ctx, start, len(texts)))
            if start + len(chunk) < len(texts):
                # The last part is not saved on its own: the whole-stage checkpoint follows at once.
                ctx.checkpoint(name, mapped.npy(part))
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


# Describe: the LLM merge -------------------------------------------------------------------------------------------


def _llm_merge(
    client: ChatClient,
    themes: list[describing.ThemeInfo],
    labels: NDArray[np.int64],
    emb: NDArray[np.float32],
    texts: list[str],
    usage: describing.LLMUsage,
) -> tuple[list[describing.ThemeInfo], NDArray[np.int64], NDArray[np.float32]]:
    """Apply the LLM merge pass; merged themes keep the larger theme's label and get fresh keywords/quotes."""
    k = len(themes)
    centroids = assigning.recentre(labels, emb, k)
    idx = {th.id: int(labels[th.members[0]]) for th in themes if th.members}
    groups = describing.llm_merge_groups(client, themes, {tid: centroids[i] for tid, i in idx.items()}, usage)
    if not groups:
        return themes, labels, centroids
    remap = np.arange(k)
    for g in groups:
        for tid in g[1:]:
            remap[idx[tid]] = idx[g[0]]
    uniq, new = np.unique(remap[labels], return_inverse=True)
    new = new.astype(np.int64)
    centroids = assigning.recentre(new, emb, len(uniq))
    old_by_id = {th.id: th for th in themes}
    merged = describing.describe(new, centroids, emb, texts)
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


# Assign: the codebook (seed themes) -----------------------------------------------------------------------------


def _code_seed(ctx: PipelineContext, s: RunState) -> tuple[list[list[SeedCode]], list[SeedThemeOut]]:
    """Each usable response's codes of ``params.seed_themes`` (by embedding, then by the LLM when there is one),
    and each code's count and share."""
    params = s.params
    assert params.seed_themes is not None
    book = [{"name": c.name, "description": c.description} for c in params.seed_themes]
    # Keywords (a served codebook carries them) are part of what a code means; a plain seed has none.
    code_emb = s.embedder.embed([
        (f"{c.name}: {c.description}".strip(": ") + (f" ({', '.join(c.keywords)})" if c.keywords else ""))
        for c in params.seed_themes
    ])
    sim_codes = assigning.code_by_similarity(s.emb, code_emb, multi_label=params.multi_label)
    out: list[list[SeedCode]] = [
        [SeedCode(name=book[j]["name"], confidence=round(c, 4), coded_by="embedding") for j, c in codes]
        for codes in sim_codes
    ]
    if s.client is not None:
        sims = s.emb @ code_emb.T
        pos = {b["name"]: j for j, b in enumerate(book)}
        for key, names in _code_by_llm(ctx, s, book).items():
            i = int(key)
            out[i] = [SeedCode(name=nm, confidence=round(float(sims[i, pos[nm]]), 4), coded_by="llm") for nm in names]
    # Counted as every count is: each response with its counted copies (they carry its codes).
    n, weight = counted(s), copy_weights(s) or [1] * len(out)
    summary = []
    for b in book:
        c = sum(w for codes, w in zip(out, weight, strict=True) if any(x.name == b["name"] for x in codes))
        summary.append(
            SeedThemeOut(name=b["name"], description=b["description"], count=c, share=round(c / n, 4) if n else 0.0)
        )
    return out, summary


def _code_by_llm(ctx: PipelineContext, s: RunState, book: list[dict[str, str]]) -> dict[str, list[str]]:
    """The LLM's codes by usable position (as a string): on chunk workers for many responses, else here."""
    assert s.client is not None
    params, usage = s.params, s.usage
    ctx.progress("assign", 0, len(s.texts), "coding responses against the codebook with the LLM")
    items = [(str(i), s.redact(t[:1000])) for i, t in enumerate(s.texts)]
    mapper = getattr(ctx, "map", None)
    if mapper is None or len(items) < min(params.fanout_min_responses, mapped.CODE_FANOUT_MIN):
        return assigning.code_by_llm(s.client, book, items, multi_label=params.multi_label, usage=usage,
                                     cancelled=ctx.raise_if_cancelled)
    # Many responses: code on chunk workers. Everything before this
    # point is restored from checkpoints when the attempt re-runs, and
    # a chunk delivered twice hits the LLM cache (same prompts).
    res = mapper("code", [[i, t] for i, t in items], mapped.code_chunk, chunk_size=mapped.code_chunk_size(params))
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
    return llm
