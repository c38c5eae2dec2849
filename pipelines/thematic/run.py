"""The thematic pipeline's entry point: builds the run's state and runs the loop of stages (``stages.py``).

clean → embed → cluster → describe → assign → insight → render; the first four are checkpointed, keyed by a
fingerprint of params + input, so a checkpoint of different data is never reused and a retry after a crash
resumes at the first unfinished stage.
"""

from __future__ import annotations

import hashlib
from typing import Any

from shared.sdk import PermanentError, PipelineContext

from . import lang, mapped
from .document import PIPELINE_VERSION
from .llm_port import ChatClient
from .mapped import from_npy as _from_npy  # noqa: F401  (bench/thematic.py reads cached embeddings with it)
from .params import ThematicParams
from .stages import EMBED_PART, GRAPH_CHOICE, Checkpoints, RunState, run_stages
from .validate import responses_of

__all__ = ["EMBED_PART", "GRAPH_CHOICE", "PIPELINE_VERSION", "run", "run_with"]

#: Params that change how the job runs, not what it computes: left out of
#: the checkpoint fingerprint.
_EXECUTION_PARAMS = {"fanout_min_responses", "fanout_chunk_size"}


def _fingerprint(params: ThematicParams, items: list[dict[str, Any]], embedder: str) -> str:
    h = hashlib.sha256(PIPELINE_VERSION.encode())
    h.update(params.model_dump_json(exclude=_EXECUTION_PARAMS).encode())
    # Vectors of another model (local vs an embeddings deployment) must never be mixed in.
    h.update(embedder.encode() + b"\x02")
    for it in items:
        h.update(str(it["id"]).encode() + b"\x00" + str(it.get("text", "")).encode() + b"\x01")
    return h.hexdigest()[:16]


def run(ctx: PipelineContext, params: ThematicParams, data: Any) -> dict[str, Any]:
    if not isinstance(params, ThematicParams):
        params = ThematicParams.model_validate(params)
    client = mapped.job_client(params)
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
    with lang.keyword_languages(("en",)):
        return run_stages(ctx, initial_state(ctx, params, items, client=client, baseline=baseline))


def initial_state(
    ctx: PipelineContext, params: ThematicParams, items: list[dict[str, Any]], *, client: ChatClient | None,
    baseline: dict[str, Any] | None = None,
) -> RunState:
    """The state the stages start from: the job, its LLM client (per ``params.llm``) and its embedder."""
    if params.llm == "required" and client is None:
        raise PermanentError("llm=required but no LLM client is available")
    if params.llm == "off":
        client = None
    # The graph a fanned-out attempt of this job chose (one GET; written only when the embed stage fans out).
    saved_graph = ctx.restore(GRAPH_CHOICE)
    embedder = mapped.job_embedder(params, client, graph=saved_graph.decode() if saved_graph else None)
    checkpoints = Checkpoints(ctx, _fingerprint(params, items, f"{embedder.info.name}@{embedder.info.sha256}"))
    return RunState(params=params, items=items, client=client, embedder=embedder, checkpoints=checkpoints,
                    baseline=baseline, save_graph=saved_graph is None, redact_on=mapped.redact_on(params, client))
