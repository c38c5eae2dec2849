"""What the Functions host puts on the wire for each trigger, and how it reads an HTTP answer back.

Formats measured against Microsoft's worker (/work/shared/README.md, "Microsoft's Python runtime"):

* HTTP: ``RpcHttp{method, url (full, with the query), headers (lower-case names), query, params (route values),
  body: TypedData.bytes}`` (the host offers ``RawHttpBodyBytes``, so the body is never re-encoded). The answer is
  ``RpcHttp{status_code (a string), headers, body, cookies}``; each cookie goes back as one ``Set-Cookie`` header.
* Queue: the body after ``messageEncoding`` decoding, as ``TypedData.string`` when it is UTF-8 text (as the
  host's string conversion gives) and ``bytes`` otherwise; trigger metadata ``DequeueCount`` (JSON number), ``Id``
  and ``PopReceipt`` (strings), ``InsertionTime``/``ExpirationTime``/``NextVisibleTime`` (JSON strings in .NET's
  round-trip format, ``"2026-12-01T20:05:05.1631730+00:00"``) and ``QueueTrigger`` (the body as a string).
* Timer: ``TypedData.json`` of the host's ``TimerInfo``: ``{"Schedule":{"AdjustForDST":true},
  "ScheduleStatus":{"Last","Next","LastUpdated"}|null,"IsPastDue":bool}``.

What the host sends for HTTP depends on the capabilities the *worker* declared in its ``WorkerInitResponse``
(:class:`WorkerCapabilities`; Microsoft's Python runtime 1.3.0 declares all three below, so that is the path every
test of the app runs, and the others are what another worker version would get):

* ``RawHttpBodyBytes``: the body as ``bytes``; without it, ``bytes`` only for ``application/octet-stream`` and
  ``multipart/*`` and otherwise the text (``json`` for a JSON content type), as older hosts sent it;
* ``RpcHttpBodyOnly``: only ``body``; without it also ``rawBody`` (bytes or the text, by the capability above);
* ``RpcHttpTriggerMetadataRemoved``: no trigger metadata for HTTP; without it the host repeats the request as
  ``$request``, ``Headers``, ``Query`` and each route value, which the worker then also binds by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devhost.proto import FunctionRpc_pb2 as pb

_SAME_SITE = {pb.RpcHttpCookie.Lax: "Lax", pb.RpcHttpCookie.Strict: "Strict", pb.RpcHttpCookie.ExplicitNone: "None"}


def dotnet_time(t: datetime | None) -> str | None:
    """``DateTimeOffset.ToString("o")``: seven fractional digits and an explicit offset."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}0+00:00"


@dataclass(frozen=True)
class WorkerCapabilities:
    """The worker's ``WorkerInitResponse.capabilities``: a name is on when present with a non-empty value, as the
    host reads them (``GetCapabilityState``). The default is what Microsoft's Python runtime 1.3.0 declares."""

    names: Mapping[str, str] = field(default_factory=lambda: dict.fromkeys((
        "RawHttpBodyBytes", "TypedDataCollection", "RpcHttpBodyOnly", "WorkerStatus",
        "RpcHttpTriggerMetadataRemoved", "SharedMemoryDataTransfer",
    ), "true"))

    def has(self, name: str) -> bool:
        return bool(self.names.get(name))

    @property
    def raw_http_body_bytes(self) -> bool:
        return self.has("RawHttpBodyBytes")

    @property
    def rpc_http_body_only(self) -> bool:
        return self.has("RpcHttpBodyOnly")

    @property
    def http_trigger_metadata_removed(self) -> bool:
        return self.has("RpcHttpTriggerMetadataRemoved")

    @property
    def worker_status(self) -> bool:
        return self.has("WorkerStatus")

    @property
    def handles_worker_terminate(self) -> bool:
        return self.has("HandlesWorkerTerminateMessage")


RUNTIME_CAPABILITIES = WorkerCapabilities()


def _text_body(body: bytes, content_type: str) -> pb.TypedData:
    """The body as a host without ``RawHttpBodyBytes`` sends it: bytes for binary types, else the text."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/octet-stream" or media.startswith("multipart/"):
        return pb.TypedData(bytes=body)
    text = body.decode("utf-8", "replace")
    if media == "application/json" or media.endswith("+json"):
        return pb.TypedData(json=text)
    return pb.TypedData(string=text)


def http_request(
    method: str,
    url: str,
    headers: dict[str, str],
    query: dict[str, str],
    route_params: dict[str, str],
    body: bytes,
    caps: WorkerCapabilities = RUNTIME_CAPABILITIES,
) -> pb.TypedData:
    lowered = {k.lower(): v for k, v in headers.items()}
    if caps.raw_http_body_bytes:
        typed_body = pb.TypedData(bytes=body)
    else:
        typed_body = _text_body(body, lowered.get("content-type", ""))
    http = pb.RpcHttp(
        method=method, url=url, headers=lowered, query=query, params=route_params, body=typed_body,
    )
    if not caps.rpc_http_body_only:
        http.rawBody.CopyFrom(pb.TypedData(bytes=body) if caps.raw_http_body_bytes else _text_body(body, "text/plain"))
    return pb.TypedData(http=http)


def http_trigger_metadata(request: pb.TypedData, caps: WorkerCapabilities = RUNTIME_CAPABILITIES) -> dict[str, pb.TypedData]:
    """The trigger metadata of an HTTP invocation: none for a worker that declared ``RpcHttpTriggerMetadataRemoved``."""
    if caps.http_trigger_metadata_removed:
        return {}
    http = request.http
    meta = {
        "$request": request,
        "Headers": pb.TypedData(json=json.dumps(dict(http.headers))),
        "Query": pb.TypedData(json=json.dumps(dict(http.query))),
    }
    for name, value in http.params.items():
        meta[name] = pb.TypedData(string=value)
    return meta


def _body_bytes(data: pb.TypedData) -> bytes:
    kind = data.WhichOneof("data")
    if kind in ("string", "json"):
        return str(getattr(data, kind)).encode("utf-8")
    if kind in ("bytes", "stream"):
        return bytes(getattr(data, kind))
    if kind == "int":
        return str(data.int).encode()
    if kind == "double":
        return repr(data.double).encode()
    return b""


def set_cookie(cookie: pb.RpcHttpCookie) -> str:
    """One ``Set-Cookie`` header value, as ASP.NET's CookieHeaderValue writes it."""
    parts = [f"{cookie.name}={cookie.value}"]
    # The runtime sends "" for attributes a Set-Cookie header did not have (SimpleCookie's empty defaults).
    if cookie.domain.value:
        parts.append(f"domain={cookie.domain.value}")
    if cookie.path.value:
        parts.append(f"path={cookie.path.value}")
    if cookie.HasField("expires") and cookie.expires.HasField("value"):
        when = cookie.expires.value.ToDatetime(tzinfo=UTC)
        parts.append("expires=" + when.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    if cookie.HasField("max_age") and cookie.max_age.HasField("value"):
        parts.append(f"max-age={int(cookie.max_age.value)}")
    if cookie.HasField("secure") and cookie.secure.value:
        parts.append("secure")
    if cookie.same_site in _SAME_SITE:
        parts.append(f"samesite={_SAME_SITE[cookie.same_site].lower()}")
    if cookie.HasField("http_only") and cookie.http_only.value:
        parts.append("httponly")
    return "; ".join(parts)


def http_response(data: pb.TypedData | None) -> tuple[int, bytes, list[tuple[str, str]]] | None:
    """Status, body and headers of an HTTP answer; None when the value is not an HTTP response."""
    if data is None:
        return None
    kind = data.WhichOneof("data")
    if kind == "http":
        http = data.http
        headers = [(k, v) for k, v in http.headers.items() if k.lower() != "set-cookie"]
        headers += [("Set-Cookie", set_cookie(c)) for c in http.cookies]
        status = int(http.status_code or 200)
        return status, _body_bytes(http.body), headers
    if kind == "string":  # A function returning a str: the host answers 200 with it.
        return 200, data.string.encode("utf-8"), [("Content-Type", "text/plain; charset=utf-8")]
    if kind == "bytes":
        return 200, data.bytes, [("Content-Type", "application/octet-stream")]
    return None


def queue_trigger(
    body: bytes,
    message_id: str,
    dequeue_count: int | None,
    pop_receipt: str | None,
    inserted_on: datetime | None,
    expires_on: datetime | None,
    next_visible_on: datetime | None,
) -> tuple[pb.TypedData, dict[str, pb.TypedData]]:
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    data = pb.TypedData(string=text) if text is not None else pb.TypedData(bytes=body)
    meta: dict[str, pb.TypedData] = {
        "Id": pb.TypedData(string=message_id),
        "DequeueCount": pb.TypedData(json=json.dumps(dequeue_count or 0)),
        "QueueTrigger": pb.TypedData(string=text) if text is not None else pb.TypedData(bytes=body),
    }
    if pop_receipt is not None:
        meta["PopReceipt"] = pb.TypedData(string=pop_receipt)
    for name, t in (("InsertionTime", inserted_on), ("ExpirationTime", expires_on), ("NextVisibleTime", next_visible_on)):
        value = dotnet_time(t)
        if value is not None:
            meta[name] = pb.TypedData(json=json.dumps(value))
    return data, meta


def timer_info(past_due: bool, status: dict[str, Any] | None) -> pb.TypedData:
    info = {"Schedule": {"AdjustForDST": True}, "ScheduleStatus": status, "IsPastDue": past_due}
    return pb.TypedData(json=json.dumps(info))
