"""HTTP trigger functions: the jobs API. Handlers parse the request and call ``shared.api.service``."""

from __future__ import annotations

import azure.functions as func

from shared import platform
from shared.api import polling, views
from shared.api.http import (
    AUTH_LEVEL,
    anonymous_handler,
    api_handler,
    base_url,
    json_body,
    json_response,
    query_of,
    tenant_of,
)
from shared.api.service import JobService
from shared.api.webhook_secrets import WebhookSecrets
from shared.config.constants import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_RE
from shared.core.errors import BadRequest, ValidationFailed
from shared.core.jobs import Job
from shared.observability import telemetry

bp = func.Blueprint()  # type: ignore[no-untyped-call]
API = "/api"


def service() -> JobService:
    return platform.current().service


def _idempotency_key(req: func.HttpRequest) -> str | None:
    key = req.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise BadRequest("Idempotency-Key must be 1-200 visible ASCII characters", field="Idempotency-Key")
    return str(key)


def _poll_headers(job: Job) -> dict[str, str]:
    return polling.headers(job, service().pipeline_timeout(job.pipeline))


@bp.function_name("submit_job")
@bp.route(route="jobs", methods=["POST"], auth_level=AUTH_LEVEL)
@api_handler
def submit_job(req: func.HttpRequest) -> func.HttpResponse:
    tenant = tenant_of(req)
    submitted = service().submit(tenant, json_body(req), _idempotency_key(req), telemetry.traceparent())
    body = views.public(submitted.job, base_url(req))
    headers = {"Location": body["links"]["self"], **_poll_headers(submitted.job)}
    return json_response(202 if submitted.created else 200, body, headers)


@bp.function_name("list_jobs")
@bp.route(route="jobs", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def list_jobs(req: func.HttpRequest) -> func.HttpResponse:
    jobs, cursor = service().list(tenant_of(req), query_of(req))
    base = base_url(req)
    body = {"items": [views.public(j, base) for j in jobs], "next_cursor": cursor}
    return json_response(200, body)


@bp.function_name("get_job")
@bp.route(route="jobs/{id}", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def get_job(req: func.HttpRequest) -> func.HttpResponse:
    job = service().get(tenant_of(req), req.route_params["id"])
    body = views.public(job, base_url(req))
    etag = polling.etag_of(body)
    # no-cache: a cache may keep it, but must revalidate (the 304 is what makes that cheap).
    headers = {"ETag": etag, "Cache-Control": "private, no-cache", **_poll_headers(job)}
    if polling.matches(req.headers.get("If-None-Match"), etag):
        return func.HttpResponse(status_code=304, headers=headers)
    return json_response(200, body, headers)


@bp.function_name("cancel_job")
@bp.route(route="jobs/{id}/cancel", methods=["POST"], auth_level=AUTH_LEVEL)
@api_handler
def cancel_job(req: func.HttpRequest) -> func.HttpResponse:
    job = service().cancel(tenant_of(req), req.route_params["id"])
    return json_response(200 if job.status.terminal else 202, views.public(job, base_url(req)), _poll_headers(job))


@bp.function_name("get_job_result")
@bp.route(route="jobs/{id}/result", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def get_job_result(req: func.HttpRequest) -> func.HttpResponse:
    tenant = tenant_of(req)
    query = query_of(req)
    unknown = sorted(set(query) - {"format", "code"})
    if unknown:
        # As the job list and the responses route: a typo (?fromat=csv) is named, not answered with the JSON.
        raise ValidationFailed(f"unknown query parameter {unknown[0][:60]!r}",
                               [{"field": unknown[0][:60], "message": "unknown query parameter; known: format"}])
    fmt = query.get("format") or "json"  # ?format= is the default, as an empty ?limit= is on the lists
    result = service().result(tenant, req.route_params["id"], fmt)
    # A download, never a page of the dashboard's origin: as an attachment, its type not sniffed, and under a CSP
    # that lets nothing in it run should a browser render it anyway (a result carries the tenant's own text).
    headers = {"Content-Disposition": f'attachment; filename="{result.filename}"', "ETag": result.etag,
               "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}
    return func.HttpResponse(result.body, status_code=200, headers={**headers, "Content-Type": result.content_type})


@bp.function_name("list_job_responses")
@bp.route(route="jobs/{id}/responses", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def list_job_responses(req: func.HttpRequest) -> func.HttpResponse:
    # Every response with its text, metadata and coding, a page at a time (the cursor keeps the filters).
    request = service().responses_request(tenant_of(req), req.route_params["id"], query_of(req))
    headers = {"ETag": request.etag, "Cache-Control": "private, no-cache"}
    if_none_match = req.headers.get("If-None-Match")
    if polling.matches(if_none_match, request.etag):
        if polling.any_tag(if_none_match):
            # "*" holds for any query: the filters are checked against the result first, so a bad one is its
            # 422 (RFC 9110 13.2.1). A specific ETag came from a 200 for these very filters: the cheap 304.
            service().responses_page(request)
        return func.HttpResponse(status_code=304, headers=headers)
    return json_response(200, service().responses_page(request), headers)


@bp.function_name("edit_job_themes")
@bp.route(route="jobs/{id}/themes", methods=["PATCH"], auth_level=AUTH_LEVEL)
@api_handler
def edit_job_themes(req: func.HttpRequest) -> func.HttpResponse:
    # Rename, merge, split off or delete themes of a finished job; If-Match is the ETag of the result read.
    result = service().edit_themes(
        tenant_of(req), req.route_params["id"], json_body(req), req.headers.get("If-Match")
    )
    return func.HttpResponse(
        result.body, status_code=200, headers={"ETag": result.etag, "Content-Type": result.content_type}
    )


@bp.function_name("health")
@bp.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
@anonymous_handler
def health(req: func.HttpRequest) -> func.HttpResponse:
    # One queue call proves Storage is reachable and reports the backlog; anonymous
    # so probes need no key, and it reveals nothing about any tenant.
    depth = service().stores.messages.depth()
    return json_response(200, {"status": "ok", "storage": "ok", "queue_depth": depth})


# -- webhook signing secrets (docs/webhooks.md) ---------------------------------------------------------
def webhook_secrets() -> WebhookSecrets:
    return platform.current().webhook_secrets


@bp.function_name("create_webhook_secret")
@bp.route(route="webhooks/secrets", methods=["POST"], auth_level=AUTH_LEVEL)
@api_handler
def create_webhook_secret(req: func.HttpRequest) -> func.HttpResponse:
    tenant = tenant_of(req)
    created = webhook_secrets().create_once(tenant, _idempotency_key(req), req.get_body() or b"")
    secret = created.row
    # The value is shown here (and to a replay of the same Idempotency-Key: 200); listing never shows it.
    body = {"id": secret.id, "secret": secret.value, "created_at": secret.created_at.isoformat()}
    return json_response(201 if created.applied else 200, body, {"Cache-Control": "no-store"})


@bp.function_name("list_webhook_secrets")
@bp.route(route="webhooks/secrets", methods=["GET"], auth_level=AUTH_LEVEL)
@api_handler
def list_webhook_secrets(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(200, {"items": [s.view() for s in webhook_secrets().list(tenant_of(req))]})


@bp.function_name("revoke_webhook_secret")
@bp.route(route="webhooks/secrets/{id}", methods=["DELETE"], auth_level=AUTH_LEVEL)
@api_handler
def revoke_webhook_secret(req: func.HttpRequest) -> func.HttpResponse:
    webhook_secrets().revoke(tenant_of(req), req.route_params["id"])
    return func.HttpResponse(status_code=204)
