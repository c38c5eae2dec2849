"""Logs, traces and metrics, with every job's context attached.

* **Logs.** Inside :func:`job_context` every log record carries ``job_id``,
  ``tenant``, ``pipeline``, ``attempt`` and ``stage`` as attributes (a log record
  factory reads them from a context variable), so they become
  ``customDimensions`` in Application Insights. :func:`event` writes the
  structured events that docs/operations.md queries (``job.transition``,
  ``stage.finished``, ``job.poisoned``).
* **Traces.** One span per API request, one per job attempt, one per pipeline
  stage, all of kind ``INTERNAL``: the Functions host already writes one
  ``requests`` row per invocation, and a second SERVER/CONSUMER span of the app
  would count every execution twice (and double the failure rate). The request
  span's parent is the host's invocation when the host passes one (the
  ``context`` parameter), else the caller's ``traceparent`` (API Management's).
  The request's context is stored with the job and travels in the queue message,
  so every attempt and stage of a job is in the request's trace; the attempt span
  *links* to the host's queue-trigger invocation, which starts a trace of its own.
* **Metrics.** Job transitions and durations, LLM usage, queue depth, the age of
  the oldest message and the poison queue's depth.

Everything goes to Application Insights through ``azure-monitor-opentelemetry``
when ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set; otherwise the
OpenTelemetry API is a no-op and logs stay plain. Nothing here logs payloads.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from shared.config.settings import raw

log = logging.getLogger("thematiq.telemetry")
_JOB_FIELDS = ("job_id", "tenant", "pipeline", "attempt", "stage")
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("thematiq_job", default=None)
_configured = False
_lock = threading.Lock()

tracer = trace.get_tracer("thematiq")
_meter = metrics.get_meter("thematiq")
JOBS = _meter.create_counter("thematiq.jobs", description="Job state transitions by status and pipeline")
JOB_DURATION = _meter.create_histogram("thematiq.job.duration", unit="ms", description="Created to finished")
TRANSITIONS = _meter.create_counter("thematiq.transitions", description="Applied lifecycle transitions by name and kind")
LLM_TOKENS = _meter.create_counter("thematiq.llm.tokens", description="LLM tokens used by jobs")
LLM_COST = _meter.create_counter("thematiq.llm.cost_usd", unit="USD", description="Approximate LLM cost")
QUEUE_DEPTH = _meter.create_gauge("thematiq.queue.depth", description="Approximate messages on the jobs queue")
QUEUE_OLDEST = _meter.create_gauge("thematiq.queue.oldest_age_seconds", unit="s", description="Age of the oldest waiting message")
POISON_DEPTH = _meter.create_gauge("thematiq.queue.poison_depth", description="Messages in the poison queue")


def configure() -> None:
    """Send telemetry to Application Insights when it is configured. Idempotent; cheap when it is not."""
    global _configured
    with _lock:
        if _configured:
            return
        _configured = True
        _install_record_factory()
        # The SDKs' per-request INFO lines (URLs, headers) would drown the job
        # logs and cost ingestion; warnings and errors still come through.
        logging.getLogger("azure").setLevel(logging.WARNING)
        if not raw("APPLICATIONINSIGHTS_CONNECTION_STRING"):
            return
        # Imported only here: the distro costs a noticeable part of a cold start.
        from azure.monitor.opentelemetry import configure_azure_monitor

        kwargs: dict[str, Any] = {"logger_name": "thematiq"}
        client_id = raw("AzureWebJobsStorage__clientId")
        if client_id:
            # App Insights with local auth disabled accepts Entra ID tokens only.
            from azure.identity import ManagedIdentityCredential

            kwargs["credential"] = ManagedIdentityCredential(client_id=client_id)
        configure_azure_monitor(**kwargs)
        log.info("telemetry: sending to Application Insights")


def _install_record_factory() -> None:
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        ctx = _context.get()
        if ctx:
            for key, value in ctx.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return record

    logging.setLogRecordFactory(factory)


@contextmanager
def job_context(**fields: Any) -> Iterator[dict[str, Any]]:
    """Attach job fields to every log record written in this context (thread or task)."""
    merged = {**(_context.get() or {}), **{k: v for k, v in fields.items() if k in _JOB_FIELDS}}
    token = _context.set(merged)
    try:
        yield merged
    finally:
        _context.reset(token)


def current_job_field(name: str) -> Any:
    """A field of the current job context (``tenant``, ``job_id``, ...), or None outside a job."""
    return (_context.get() or {}).get(name)


def set_stage(stage: str) -> None:
    ctx = _context.get()
    if ctx is not None:
        ctx["stage"] = stage


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    """A structured event: one log line whose fields become customDimensions."""
    rendered = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
    # Fields the job context already puts on the record must not be passed
    # again: logging refuses to overwrite a record attribute.
    in_context = _context.get() or {}
    extra = {k: v for k, v in fields.items() if k not in in_context}
    log.log(level, "%s %s", name, rendered, extra={"event": name, **extra})


# -- traces ---------------------------------------------------------------------
def traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` value, to store with a job."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def request_span(name: str, headers: Mapping[str, str], host_traceparent: str | None = None) -> Iterator[Span]:
    """The app's span of one HTTP request: INTERNAL, under the host's invocation when it gave one.

    Parent, first that exists: ``host_traceparent`` (the invocation's ``context.trace_context``), a span the
    worker already made current (its OpenTelemetry integration), the request's ``traceparent`` header."""
    if host_traceparent:
        parent = extract({"traceparent": host_traceparent})
    elif trace.get_current_span().get_span_context().is_valid:
        parent = None  # the current context
    else:
        parent = extract({k.lower(): v for k, v in headers.items()})
    with tracer.start_as_current_span(name, context=parent, kind=SpanKind.INTERNAL) as span:
        yield span


@contextmanager
def attempt_span(parent_traceparent: str | None, **attributes: Any) -> Iterator[Span]:
    """The span of one job attempt, continuing the trace of the request that created the job.

    INTERNAL (the host's invocation is the ``requests`` row); linked to the host's invocation span when one
    is current, since that one starts a trace of its own for every queue message."""
    parent = extract({"traceparent": parent_traceparent}) if parent_traceparent else None
    current = trace.get_current_span().get_span_context()
    links = [Link(current)] if current.is_valid and parent_traceparent else None
    with tracer.start_as_current_span(
        "job.attempt", context=parent, kind=SpanKind.INTERNAL, links=links,
        attributes={f"thematiq.{k}": v for k, v in attributes.items() if v is not None},
    ) as span:
        yield span


def mark_error(span: Span, error_type: str) -> None:
    span.set_status(Status(StatusCode.ERROR, error_type))


def record_transition(job: Any) -> None:
    """Count a job's new state and log a ``job.transition`` event (with its duration once terminal)."""
    status = job.status.value
    JOBS.add(1, {"status": status, "pipeline": job.pipeline})
    duration_ms = None
    if job.status.terminal and job.finished_at is not None:
        duration_ms = round((job.finished_at - job.created_at).total_seconds() * 1000)
        JOB_DURATION.record(duration_ms, {"status": status, "pipeline": job.pipeline})
    event(
        "job.transition", job_id=job.id, tenant=job.tenant, pipeline=job.pipeline, attempt=job.attempts,
        status=status, duration_ms=duration_ms, error_type=job.error.type if job.error else None,
    )


def record_usage(pipeline: str, usage: Mapping[str, float]) -> None:
    if usage.get("llm_tokens"):
        LLM_TOKENS.add(usage["llm_tokens"], {"pipeline": pipeline})
    if usage.get("llm_cost_usd"):
        LLM_COST.add(usage["llm_cost_usd"], {"pipeline": pipeline})
