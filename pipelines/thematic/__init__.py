"""Thematic analysis: discover themes in free-text responses (and code them against a codebook).

Stages: clean → embed (embedded all-MiniLM-L6-v2, offline) → cluster (automatic
theme count, explained) → describe (keywords, quotes, labels; LLM optional) →
assign. See docs/thematic.md. Importing this package is cheap: onnxruntime
and the tokenizer load on first use.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from shared.sdk import Pipeline, RetryPolicy, ValidationFailed

from .edit import edit_result, render_codebook
from .params import ThematicParams
from .render import render_csv, render_md
from .run import run
from .validate import prepare, responses_of, validate_input
from .verbatims import FILTERS as RESPONSE_FILTERS
from .verbatims import page as responses_page
from .xlsx import render_xlsx

__all__ = ["PIPELINE", "ThematicParams", "run", "validate_input"]


def check_params(params: ThematicParams) -> None:
    """Submission-time check that needs the settings: llm=required without a provider → 422."""
    from .encoders import unavailable
    from .llm_port import llm_available

    if params.embedding != "fast" and (reason := unavailable(params.embedding)) is not None:
        # An optional encoder that is not installed here: 422 with how to install it, not a failed job later.
        raise ValidationFailed(
            f"embedding={params.embedding} is not available",
            [{"field": "params.embedding", "message": reason}],
        )
    if params.sentiment == "llm" and not llm_available():
        raise ValidationFailed(
            "sentiment=llm but no LLM provider is configured",
            [{"field": "params.sentiment", "message": "no LLM provider is configured; use lexicon"}],
        )
    if params.label_language is not None and not llm_available():
        raise ValidationFailed(
            "label_language needs an LLM, and none is configured",
            [{"field": "params.label_language",
              "message": "no LLM provider is configured; without one, labels are phrases from the responses"}],
        )
    if params.llm == "required" and not llm_available():
        raise ValidationFailed(
            "llm=required but no LLM provider is configured",
            [{"field": "params.llm", "message": "no LLM provider is configured (LLM_PROVIDER=none); use auto or off"}],
        )


#: MiB of an attempt before its texts: onnxruntime, the fast encoder's two sessions on one copy of the weights
#: (issue 27: ``embed.OnnxEncoder``, ``shared_weights.py``), numpy. 250 for one session; the second session added
#: 79 MiB (VNNI graph) while sessions shared nothing, and adds +40 (VNNI) / +57 (the default int8 graph) now
#: (``bench/embed_sessions.py --rss``, embed-only peaks, 2026-12-07): 250 + 57, rounded up.
BASE_MB: Final = 310.0
#: What ``embedding="quality"`` (all-mpnet-base-v2 int8, two sessions on one copy of its 267 MB graph) adds: its
#: embed-only peak 780 MiB (500 BBC leads) against the fast encoder's 270 (the int8 graph, 2,000 leads).
QUALITY_EXTRA_MB: Final = 510.0


def memory_mb(params: Any, data: Any) -> float:
    """Estimated peak memory of one attempt (MiB), for the host's admission (docs/performance.md).

    ``BASE_MB`` (+ ``QUALITY_EXTRA_MB`` with ``embedding="quality"``), plus per text a fixed part (row,
    embedding, clustering state) and a part that grows with its length (tokens in the embedding batches).
    Fitted to the measured peaks: 20,000 survey-length answers in one process peak at 2.04 GiB.
    Conservative when the embed stage fans out to chunk workers (above 5,000 answers).
    """
    items = responses_of(data) if isinstance(data, list | dict) else []
    count = len(items)
    chars = sum(len(t.get("text", "")) if isinstance(t, dict) else len(str(t)) for t in items)
    mean = chars / count if count else 0.0
    base = BASE_MB + (QUALITY_EXTRA_MB if getattr(params, "embedding", "fast") == "quality" else 0.0)
    return base + count * (0.05 + 0.00025 * min(mean, 2000.0))


def _run(ctx: Any, params: Any, data: Any) -> Any:
    return run(ctx, params, data)


PIPELINE = Pipeline(
    name="thematic",
    params_model=ThematicParams,
    run=_run,
    validate_input=validate_input,
    validate_params=check_params,
    prepare=prepare,
    edit_result=edit_result,
    # Failures worth retrying are LLM/storage blips; checkpoints make a retry cheap.
    retry=RetryPolicy(max_attempts=3, base_delay=timedelta(seconds=10), max_delay=timedelta(minutes=2)),
    # 100k responses embed in ~15 min on 2 cores; leave room for the rest.
    timeout_seconds=1500,
    renderers={"md": render_md, "codebook": render_codebook},
    # Need the texts and metadata of the stored input beside the result.
    exports={"csv": render_csv, "xlsx": render_xlsx},
    responses=responses_page,
    response_filters=RESPONSE_FILTERS,
    description="Discover themes in free-text responses: labels, keywords, quotes, per-response assignments.",
    memory_mb=memory_mb,
)
