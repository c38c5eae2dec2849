"""HTTP plumbing shared by the API handlers: problem+json, JSON responses, the tenant."""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import azure.functions as func

from shared.api.problems import problem_type
from shared.config.constants import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE, TENANT_HEADER, TENANT_RE
from shared.config.settings import get_settings
from shared.core.errors import BadRequest, StorageUnavailable, ThematiqError, Unauthorized, ValidationFailed
from shared.observability import telemetry

log = logging.getLogger("thematiq.api")
_JSON = "application/json"


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status_code=status,
        mimetype=_JSON,
        charset="utf-8",
        headers=headers,
    )


def problem(status: int, slug: str, title: str, detail: str, instance: str, **extra: Any) -> func.HttpResponse:
    """An RFC 9457 problem details response."""
    body = {"type": PROBLEM_TYPE_BASE + slug, "title": title, "status": status, "detail": detail, "instance": instance}
    body.update({k: v for k, v in extra.items() if v is not None})
    headers = {"Retry-After": str(StorageUnavailable.retry_after_seconds)} if status == 503 else None
    return func.HttpResponse(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status_code=status,
        mimetype=PROBLEM_CONTENT_TYPE,
        charset="utf-8",
        headers=headers,
    )


def problem_from(err: ThematiqError, instance: str) -> func.HttpResponse:
    extra: dict[str, Any] = {}
    if isinstance(err, ValidationFailed):
        extra["errors"] = err.errors
    elif "field" in err.extra:
        extra["errors"] = [{"field": err.extra["field"], "message": err.detail}]
    ptype = problem_type(err)
    if ptype.status >= 500:
        # Internal details stay in the log; the client gets a stable message.
        return problem(ptype.status, ptype.slug, ptype.title, _public_detail(err), instance)
    return problem(ptype.status, ptype.slug, ptype.title, err.detail, instance, **extra)


def _public_detail(err: ThematiqError) -> str:
    if isinstance(err, StorageUnavailable):
        return "Storage is temporarily unavailable. Retry after the number of seconds in Retry-After."
    return "An internal error occurred."


def tenant_of(req: func.HttpRequest) -> str:
    """The caller's tenant, from the header API Management sets; the local default otherwise."""
    value = req.headers.get(TENANT_HEADER) or get_settings().default_tenant
    if not value:
        raise Unauthorized("no tenant: this API must be called through API Management")
    if not TENANT_RE.match(value):
        raise BadRequest("invalid tenant header", field=TENANT_HEADER)
    return value


Handler = Callable[[func.HttpRequest], func.HttpResponse]


def api_handler(fn: Handler) -> Handler:
    """Map project errors to problem+json and anything unexpected to a bare 500, never a traceback."""

    @functools.wraps(fn)
    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        with telemetry.request_span(fn.__name__, req.headers) as span:
            span.set_attribute("http.request.method", req.method)
            response = _handle(fn, req)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                telemetry.mark_error(span, str(response.status_code))
            return response

    return wrapper


def _handle(fn: Handler, req: func.HttpRequest) -> func.HttpResponse:
    instance = _path(req.url)
    try:
        return fn(req)
    except ThematiqError as err:
        status = problem_type(err).status
        if status >= 500:
            log.warning(
                "%s %s -> %d %s",
                req.method,
                instance,
                status,
                type(err).__name__,
                exc_info=err.__cause__ is not None,
            )
        return problem_from(err, instance)
    except Exception:
        incident = uuid.uuid4().hex[:12]
        log.exception("%s %s failed (incident %s)", req.method, instance, incident)
        return problem(
            500, "internal", "Internal error", f"An internal error occurred (incident {incident}).", instance
        )


def _path(url: str) -> str:
    path = url.split("://", 1)[-1]
    path = path[path.find("/") :] if "/" in path else "/"
    return path.split("?", 1)[0]
