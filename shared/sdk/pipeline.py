"""The pipeline plugin contract: what a pipeline is, and what it may ask of the platform.

A pipeline is a :class:`Pipeline` value published under the entry-point group
``thematiq.pipelines``. It runs in its own OS process (see ``shared.runtime.child``);
everything it needs from the platform goes through :class:`PipelineContext`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from shared.sdk.fanout_types import MapResult
from shared.sdk.responses import Exporter, ResponseLister
from shared.sdk.retry import RetryPolicy

#: Renders a stored result document in another format: returns (content type, body).
Renderer = Callable[[dict[str, Any]], tuple[str, bytes]]


class PipelineContext(Protocol):
    """What a running pipeline may ask of the platform."""

    job_id: str
    tenant: str
    attempt: int
    logger: logging.Logger

    def progress(self, stage: str, processed: int = 0, total: int | None = None, message: str = "") -> None:
        """Report progress. Cheap to call often: the platform throttles the writes."""

    def cancelled(self) -> bool:
        """True once the job has been asked to cancel. Check it between units of work."""

    def raise_if_cancelled(self) -> None:
        """Raise :class:`shared.sdk.errors.Cancelled` if the job has been asked to cancel."""

    def checkpoint(self, name: str, data: bytes) -> None:
        """Store a stage's output so that a later attempt of the same job can skip the stage."""

    def restore(self, name: str) -> bytes | None:
        """A checkpoint stored by this or an earlier attempt of the job, or None."""

    def usage(self, **counters: float) -> None:
        """Add to the job's usage counters (e.g. ``llm_tokens=812``, ``llm_cost_usd=0.002``)."""

    def map(
        self, stage: str, items: list[Any], fn: Callable[..., Any], *, chunk_size: int | None = None,
        error_budget: float = 0.0,
    ) -> MapResult:
        """Run ``fn(ctx, params, chunk_items)`` over chunks of ``items`` on many workers (a map stage).

        The first call suspends the attempt (it exits; no worker waits) and the
        job becomes ``waiting``; when every chunk has finished the attempt runs
        again from the top and this call returns the chunks' outputs. So the
        work before a map stage must be checkpointed or cheap. ``fn`` must be a
        module-level function; it returns JSON or bytes. Up to
        ``error_budget`` (a fraction of the items) may fail; their chunks are
        listed in ``MapResult.skipped``. See ``shared.runtime.fanout``.
        """


class EarlierResults(Protocol):
    """Read access, at submission, to the results of the submitting tenant's earlier jobs (and nobody else's)."""

    def result(self, job_id: str, *, field: str) -> dict[str, Any]:
        """The current result document (edits included) of a succeeded job of this tenant and pipeline.

        An unknown id and another tenant's job are the same not-found error naming ``field`` (a 404 that never
        says whether the job exists elsewhere); a job of this tenant that has not succeeded is a
        ``ValidationFailed`` naming ``field``.
        """


#: Edits a finished job's result: ``edit(result, body, input)`` returns the new result document. It must be a
#: pure function of its arguments (the platform stores the new version under its own concurrency control) and
#: raise :class:`shared.sdk.errors.ValidationFailed` naming the field of ``body`` that does not fit.
ResultEditor = Callable[[dict[str, Any], Any, Any], dict[str, Any]]


@dataclass(frozen=True)
class Pipeline:
    """A named unit of work the platform can run.

    ``run(ctx, params, input)`` returns a JSON-serialisable result document.
    Raise :class:`shared.sdk.errors.PermanentError` for input that can never work
    (the job fails at once); any other exception is treated as transient and
    retried according to ``retry``.
    """

    name: str
    #: The job's ``params``, validated at submission strictly as JSON (an int field takes a JSON integer only, a
    #: float any JSON number, an enum or literal its JSON string). A rule across fields raises
    #: :class:`shared.sdk.errors.ParamError` in a model validator, so the 422 names the field it blames.
    params_model: type[BaseModel]
    run: Callable[[PipelineContext, Any, Any], Any]
    #: Validates and normalises the submitted ``input`` before anything is
    #: stored. Raise :class:`shared.sdk.errors.ValidationFailed` naming the field.
    validate_input: Callable[[Any], Any] | None = None
    #: Checks of params that depend on this deployment's settings (e.g. an LLM
    #: is required but none is configured), run at submission after the params
    #: model. Raise :class:`shared.sdk.errors.ValidationFailed` naming ``params.<field>``.
    validate_params: Callable[[Any], None] | None = None
    #: Submission-time checks that need the params and the input together (a metadata key the responses must
    #: carry), or an earlier job's result (a baseline to compare with): ``prepare(params, input, earlier)`` runs
    #: after ``validate_params`` and ``validate_input`` and returns the input to store. Raise
    #: :class:`shared.sdk.errors.ValidationFailed` naming the field, so a bad request is a 4xx, never a failed job.
    prepare: Callable[[Any, Any, EarlierResults], Any] | None = None
    #: Edits of a finished job's result (``PATCH /api/jobs/{id}/themes``), or None if the pipeline has none.
    edit_result: ResultEditor | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Upper bound on one attempt; capped by the PIPELINE_TIMEOUT_SECONDS setting.
    timeout_seconds: float | None = None
    renderers: Mapping[str, Renderer] = field(default_factory=dict)
    #: Downloads that need the stored input beside the result (texts, metadata): ``?format=<name>``. A name
    #: here wins over the same name in ``renderers``.
    exports: Mapping[str, Exporter] = field(default_factory=dict)
    #: ``GET /api/jobs/{id}/responses``: every response joined with its coding, or None if the pipeline has none.
    responses: ResponseLister | None = None
    #: The query parameters ``responses`` filters on besides ``metadata[key]`` (anything else is a 422).
    response_filters: frozenset[str] = frozenset()
    description: str = ""
    #: Estimated peak memory of one attempt in MiB, from the validated params and the input. A host
    #: starts an attempt only while the estimates of its running attempts fit in its memory budget
    #: (``INSTANCE_MEMORY_MB`` minus ``MEMORY_MARGIN_MB``); None counts ``DEFAULT_ATTEMPT_MEMORY_MB``.
    memory_mb: Callable[[Any, Any], float] | None = None
