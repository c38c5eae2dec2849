"""HTTP plumbing shared by the API handlers: problem+json, JSON responses, the tenant."""

from __future__ import annotations

import codecs
import functools
import inspect
import json
import logging
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import azure.functions as func

from shared.api import tenancy
from shared.api.problems import UnsupportedMediaType, problem_type
from shared.config.constants import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE
from shared.config.settings import UnresolvedSecret
from shared.core.errors import Misconfigured, StorageUnavailable, ThematiqError, ValidationFailed
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


def _codec(charset: str) -> str:
    """The codec a charset names ("utf8", "UTF-8" and "u8" are ``utf-8``; "us-ascii" is ``ascii``, whose bytes are
    UTF-8 too): RFC 8259 defines no charset for JSON, so only one that says the bytes are not UTF-8 is refused."""
    try:
        return codecs.lookup(charset).name
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        return ""


def json_body(req: func.HttpRequest) -> bytes:
    """The body of a route that reads JSON: sent as ``application/json`` (UTF-8), or with no Content-Type at all.

    Another media type (a form, ``text/plain``, XML) or a content coding (``gzip``: the body would reach the JSON
    parser compressed) is a 415 naming the header, rather than a body read as something it was not sent as.
    """
    encoding = (req.headers.get("content-encoding") or "").strip().lower()
    if encoding not in ("", "identity"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding[:40]!r} is not supported: send the JSON uncompressed", field="content-encoding"
        )
    sent = (req.headers.get("content-type") or "").strip()
    if sent:
        media, *parameters = (part.strip() for part in sent.split(";"))
        charset = next((v.strip().strip('"').lower() for k, _, v in (p.partition("=") for p in parameters)
                        if k.strip().lower() == "charset"), "utf-8")
        if media.lower() != _JSON or _codec(charset) not in ("utf-8", "ascii"):
            raise UnsupportedMediaType(
                f"Content-Type {sent[:80]!r} is not supported: send application/json (UTF-8)", field="content-type"
            )
    return bytes(req.get_body())


def query_of(req: func.HttpRequest) -> dict[str, str]:
    """The query as the client sent it, one value per name; a name given twice, or no name, is a 422 naming it.

    Read from ``req.url``, which carries the query string as sent (the Functions host passes the request's URL with
    its raw query, devhost the request target): ``req.params`` has a repeated name once, its values joined with ","
    (ASP.NET's ``StringValues.ToString()``, which devhost copies), so ``metadata[nps]=7&metadata[nps]=8`` arrived as
    the one filter ``7,8``, which matched nothing and looked like ``metadata[tags]=7,8``, a value with a comma.
    Every parameter of the routes that read this takes one value (their filters combine with AND), so a repeat is
    refused rather than guessed at; a single value is taken whole, commas and all. Names are compared exactly, as
    the routes read them (ASP.NET also joins names that differ in case, ``metadata[Plan]`` and ``metadata[plan]``:
    two filters here). ``code`` is the host's function key, not the route's: it is left to the host.
    """
    url = req.url or ""
    if "?" not in url:
        return {k: str(v) for k, v in req.params.items()}
    raw = url.split("?", 1)[1].split("#", 1)[0]
    query: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name, value in urllib.parse.parse_qsl(raw, keep_blank_values=True):
        if name == "code":
            continue
        if not name:
            raise ValidationFailed("a query parameter has no name", [
                {"field": "query", "message": f"a parameter with no name ({('=' + value)[:40]!r}): send NAME=VALUE"}])
        counts[name] = counts.get(name, 0) + 1
        query.setdefault(name, value)
    repeated = [name for name, n in counts.items() if n > 1]
    if repeated:
        errors = [{"field": name[:200], "message": (
            f"given {counts[name]} times; a query parameter takes one value (filters combine with AND, and a value "
            "is taken whole, commas included): send it once") } for name in repeated[:10]]
        raise ValidationFailed(f"query parameter {repeated[0][:60]!r} given more than once", errors)
    return query


def html_page(html: bytes, csp: str) -> func.HttpResponse:
    """A self-contained page (the dashboard, the API docs) under its Content-Security-Policy."""
    return func.HttpResponse(
        html,
        status_code=200,
        headers={
            "Content-Type": "text/html; charset=utf-8",
            "Content-Security-Policy": csp,
            # The first load carries ?code=KEY: never cache it, never send it on as a Referer.
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
        },
    )


def problem(
    status: int, slug: str, title: str, detail: str, instance: str, retry_after: int | None = None, **extra: Any
) -> func.HttpResponse:
    """An RFC 9457 problem details response; a 503 says when to retry (Storage's few seconds unless told)."""
    body = {"type": PROBLEM_TYPE_BASE + slug, "title": title, "status": status, "detail": detail, "instance": instance}
    body.update({k: v for k, v in extra.items() if v is not None})
    wait = retry_after if retry_after is not None else StorageUnavailable.retry_after_seconds
    headers = {"Retry-After": str(wait)} if status == 503 else None
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
        return problem(ptype.status, ptype.slug, ptype.title, _public_detail(err), instance,
                       retry_after=getattr(err, "retry_after_seconds", None))
    return problem(ptype.status, ptype.slug, ptype.title, err.detail, instance, **extra)


def _public_detail(err: ThematiqError) -> str:
    if isinstance(err, StorageUnavailable):
        return "Storage is temporarily unavailable. Retry after the number of seconds in Retry-After."
    if isinstance(err, Misconfigured):
        return ("The service cannot serve this request until its operator fixes a setting. "
                "Retry after the number of seconds in Retry-After.")
    return "An internal error occurred."


def tenant_of(req: func.HttpRequest) -> str:
    """The caller's tenant, only as API Management vouches for it (``shared.api.tenancy``, docs/security.md)."""
    return tenancy.tenant_of(req.headers)


def base_url(req: func.HttpRequest) -> str:
    """The base clients use for ``Location`` and links: the gateway's URL behind API Management, else ``/api``."""
    return tenancy.base_url(req.headers)


#: The auth level of every HTTP route but health: ``function`` (a key; local) or ``anonymous`` (Azure, where App
#: Service Authentication admits only API Management's identity and the app checks it). See docs/security.md.
AUTH_LEVEL = func.AuthLevel.ANONYMOUS if tenancy.auth_level_name() == "anonymous" else func.AuthLevel.FUNCTION


Handler = Callable[[func.HttpRequest], func.HttpResponse]


def api_handler(fn: Handler) -> Handler:
    """Map project errors to problem+json and anything unexpected to a bare 500, never a traceback.

    Every route wrapped here serves only callers the tenancy rules trust (API Management in Azure);
    :func:`anonymous_handler` is the one exception, for the health probe."""
    return _wrap(fn, check=True)


def anonymous_handler(fn: Handler) -> Handler:
    """:func:`api_handler` without the caller check: for ``GET /health``, which reveals no tenant's data."""
    return _wrap(fn, check=False)


def _wrap(fn: Handler, *, check: bool) -> Handler:
    def wrapper(req: func.HttpRequest, context: func.Context | None = None) -> func.HttpResponse:
        host = context.trace_context.trace_parent if context is not None else None
        with telemetry.request_span(fn.__name__, req.headers, host_traceparent=host) as span:
            span.set_attribute("http.request.method", req.method)
            response = _handle(fn, req, check)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                telemetry.mark_error(span, str(response.status_code))
            return response

    functools.update_wrapper(wrapper, fn)
    # The Functions worker binds parameters by name from the signature: ask it for ``context`` as well,
    # so the request span hangs off the host's invocation.
    del wrapper.__wrapped__  # type: ignore[attr-defined]
    params = list(inspect.signature(fn).parameters.values())[:1]
    params.append(inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=func.Context))
    wrapper.__signature__ = inspect.Signature(params, return_annotation=func.HttpResponse)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {params[0].name: func.HttpRequest, "context": func.Context, "return": func.HttpResponse}
    return wrapper


def _handle(fn: Handler, req: func.HttpRequest, check: bool) -> func.HttpResponse:
    instance = _path(req.url)
    try:
        if check:
            tenancy.check_caller(req.headers)
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
    except UnresolvedSecret as err:
        # The operator's to fix (the app's identity and the vault): said in the log by the setting's name, never
        # its value; the caller gets a 503 that nothing was done.
        log.error("%s %s -> 503: %s", req.method, instance, err)
        return problem_from(Misconfigured(str(err)), instance)
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
