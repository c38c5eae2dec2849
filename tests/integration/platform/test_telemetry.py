"""One job's span tree and its log context, captured in-process with an in-memory exporter."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.direct import functions, run_worker_once
from tests.support.platform import fast_settings, submit

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _tracing() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch)
    functions()  # imports function_app, which installs the log-context factory


def test_request_attempt_and_stage_spans_share_one_trace(caplog: pytest.LogCaptureFixture) -> None:
    _EXPORTER.clear()
    caplog.set_level(logging.INFO)
    job = submit("sleep", {"seconds": 1.2, "steps": 4})
    run_worker_once()
    spans = {s.name: s for s in _EXPORTER.get_finished_spans()}
    request, attempt, stage = spans["submit_job"], spans["job.attempt"], spans["stage sleep"]
    assert request.context.trace_id == attempt.context.trace_id == stage.context.trace_id
    assert attempt.parent is not None and attempt.parent.span_id == request.context.span_id
    assert stage.parent is not None and stage.parent.span_id == attempt.context.span_id
    assert attempt.attributes and attempt.attributes["thematiq.job_id"] == job["id"]
    assert attempt.attributes["thematiq.outcome"] == "succeeded"

    transitions = [r for r in caplog.records if getattr(r, "event", None) == "job.transition"]
    assert [r.status for r in transitions] == ["queued", "running", "succeeded"]  # type: ignore[attr-defined]
    finished = [r for r in caplog.records if getattr(r, "event", None) == "stage.finished"]
    assert finished and finished[0].stage == "sleep" and finished[0].duration_ms > 0  # type: ignore[attr-defined]
    # Every line the worker logs inside the job carries the job's context.
    worker_lines = [r for r in caplog.records if r.name.startswith("shared.runtime.worker")]
    assert worker_lines and all(getattr(r, "job_id", None) == job["id"] for r in worker_lines)
    assert all(getattr(r, "pipeline", None) == "sleep" for r in worker_lines if "attempt" in r.getMessage())


def test_application_insights_is_configured_with_the_managed_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.monitor.opentelemetry as distro
    from azure.identity import ManagedIdentityCredential

    from shared.observability import telemetry

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(distro, "configure_azure_monitor", lambda **kw: calls.append(kw))
    monkeypatch.setattr(telemetry, "_configured", False)
    monkeypatch.setattr(logging, "_logRecordFactory", logging.getLogRecordFactory())  # restored after the test
    monkeypatch.setenv("APPLICATIONINSIGHTS_CONNECTION_STRING", "InstrumentationKey=00000000-0000-0000-0000-000000000000")
    monkeypatch.setenv("AzureWebJobsStorage__clientId", "11111111-1111-1111-1111-111111111111")
    telemetry.configure()
    assert len(calls) == 1
    assert calls[0]["logger_name"] == "thematiq"
    assert isinstance(calls[0]["credential"], ManagedIdentityCredential)
    telemetry.configure()  # idempotent
    assert len(calls) == 1


class _HostContext:
    """The ``context`` the Functions host passes: only its invocation's trace context matters here."""

    class _Trace:
        def __init__(self, traceparent: str) -> None:
            self.trace_parent, self.trace_state, self.attributes = traceparent, "", {}

    def __init__(self, traceparent: str) -> None:
        self.trace_context = self._Trace(traceparent)


def test_app_spans_are_internal_and_hang_off_the_host_invocation() -> None:
    """No double counting: the host writes the requests row; the app's spans are INTERNAL children of it,
    and one trace runs from the gateway's request through the queue hop to every stage."""
    from opentelemetry.trace import SpanKind

    from tests.support.direct import body_of

    _EXPORTER.clear()
    host_trace, host_span = "ab" * 16, "cd" * 8
    import azure.functions as func

    req = func.HttpRequest(
        method="POST", url="http://localhost:7071/api/jobs",
        # The gateway's traceparent: the host already made its invocation a child of it.
        headers={"traceparent": f"00-{host_trace}-{'ef' * 8}-01"},
        params={}, route_params={}, body=b'{"pipeline": "sleep", "params": {"seconds": 0.2, "steps": 2}, "input": 1}',
    )
    resp = functions()["submit_job"](req, context=_HostContext(f"00-{host_trace}-{host_span}-01"))
    assert resp.status_code == 202, resp.get_body()
    job = body_of(resp)
    # The queue trigger's invocation, as the worker's OpenTelemetry integration makes it current.
    with trace.get_tracer("host").start_as_current_span("host.queue_invocation", kind=SpanKind.CONSUMER) as q:
        run_worker_once()
    spans = _EXPORTER.get_finished_spans()
    app = [s for s in spans if s.name != "host.queue_invocation"]
    assert app and all(s.kind == SpanKind.INTERNAL for s in app), [(s.name, s.kind) for s in app]
    by = {s.name: s for s in app}
    request, attempt = by["submit_job"], by["job.attempt"]
    stages = [s for s in app if s.name.startswith("stage ")]
    assert request.context.trace_id == int(host_trace, 16)
    assert request.parent is not None and request.parent.span_id == int(host_span, 16)
    assert attempt.context.trace_id == request.context.trace_id
    assert attempt.parent is not None and attempt.parent.span_id == request.context.span_id
    assert attempt.attributes and attempt.attributes["thematiq.job_id"] == job["id"]
    assert [link.context.span_id for link in attempt.links] == [q.get_span_context().span_id]
    assert stages and all(
        s.context.trace_id == request.context.trace_id and s.parent and s.parent.span_id == attempt.context.span_id
        for s in stages
    )
