"""Map-stage functions: the work of one chunk when a stage fans out over chunk workers.

``ctx.map`` runs these in a chunk worker's own pipeline process with the job's
params, so they must be module-level and rebuild what they need (the
embedder, the LLM client) themselves. Their outputs are what the in-process
path would compute for the same texts: embeddings do not depend on which
other texts share a batch (checked in the tests), and LLM coding uses the
same batches of ``assign.CODING_BATCH`` because a chunk holds whole batches,
so the prompts are identical and a redelivered chunk is served by the LLM cache.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shared.sdk import PermanentError, PipelineContext

from . import assign as assigning
from .describe import LLMUsage
from .embed import TextEmbedder, embedder_for
from .llm_port import ChatClient, resolve_client
from .params import ThematicParams

#: Upper bound on responses per LLM-coding chunk: 10 coding calls, a few
#: minutes at most, so a lost chunk costs little.
CODE_CHUNK_MAX = 250
#: LLM coding fans out from this many responses (or ``fanout_min_responses``
#: if lower): coding is slow per response (~0.2–0.5 s), unlike embedding.
CODE_FANOUT_MIN = 1_000


def npy(a: NDArray[Any]) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def from_npy(b: bytes) -> NDArray[Any]:
    return np.load(io.BytesIO(b), allow_pickle=False)  # type: ignore[no-any-return]


def redact_on(params: ThematicParams, client: object | None) -> bool:
    """PII redaction rule: explicit param, else on whenever an LLM is used."""
    return params.redact_pii if params.redact_pii is not None else client is not None


def job_client(params: ThematicParams) -> ChatClient | None:
    return None if params.llm == "off" else resolve_client(params.llm)


def default_encoder(params: ThematicParams) -> str:
    """The embedded encoder the params alone decide (``language="auto"`` may switch to multilingual later)."""
    return params.embedding if params.language in ("en", "auto") else "multilingual"


def job_embedder(
    params: ThematicParams, client: object | None, encoder: str | None = None, graph: str | None = None
) -> TextEmbedder:
    return embedder_for(
        client, redact=redact_on(params, client), encoder=encoder or default_encoder(params), graph=graph
    )


def code_chunk_size(params: ThematicParams) -> int:
    """Whole coding batches, at most CODE_CHUNK_MAX responses."""
    size = min(params.fanout_chunk_size, CODE_CHUNK_MAX)
    return max(assigning.CODING_BATCH, size // assigning.CODING_BATCH * assigning.CODING_BATCH)


def embed_chunk(ctx: PipelineContext, params: ThematicParams, texts: list[Any]) -> bytes:
    """One chunk of the ``embed`` map stage: the embeddings of ``texts`` as .npy bytes.

    Items are texts, ``[encoder, text]`` pairs when the parent chose an
    encoder the params alone do not name (``language="auto"`` on a
    multilingual survey), or ``[encoder, text, graph]`` when it runs the fast
    encoder, whose graph the parent chose by its CPU: every chunk must use the
    parent's choices, whatever CPU it lands on.
    """
    encoder = graph = None
    if texts and isinstance(texts[0], list):
        encoder = str(texts[0][0])
        graph = str(texts[0][2]) if len(texts[0]) > 2 else None
        texts = [str(it[1]) for it in texts]
    embedder = job_embedder(params, job_client(params), encoder, graph)
    emb = embedder.embed(texts, on_batch=lambda done: ctx.progress("embed", done, len(texts)))
    return npy(emb.astype(np.float32))


def code_chunk(ctx: PipelineContext, params: ThematicParams, items: list[list[str]]) -> dict[str, Any]:
    """One chunk of the ``code`` map stage: LLM codes of ``[id, text]`` items (text already redacted)."""
    client = job_client(params)
    if client is None or not params.seed_themes:
        raise PermanentError("the code stage needs an LLM client and seed_themes")
    book = [{"name": s.name, "description": s.description} for s in params.seed_themes]
    usage = LLMUsage()
    codes = assigning.code_by_llm(
        client,
        book,
        [(i, t) for i, t in items],
        multi_label=params.multi_label,
        usage=usage,
        cancelled=ctx.raise_if_cancelled,
    )
    return {"codes": codes, "usage": usage.__dict__}
