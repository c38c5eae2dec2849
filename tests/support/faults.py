"""Ambiguous storage outcomes, injected below the SDK's retry policy.

Every storage call can fail three ways (see docs/architecture.md#ambiguous-outcomes):

* ``refuse``     answered 503 and never applied (the SDK retries it itself);
* ``drop``       applied, then the connection drops before the answer: the tables SDK (azure-core's
                 policy) does not retry POST, MERGE or ``$batch`` then, so the caller sees
                 ServiceResponseError; the blob and queue SDKs retry every request (``StorageRetryPolicy``),
                 so a dropped blob batch is sent again (its sub-requests then 404) and a dropped send
                 sends a second message;
* ``commit-5xx`` applied, answered 503, so the SDK's own retry comes back 409 or 412;
* ``commit-5xx-unreachable`` applied and answered 503, then every retry cannot connect: azure-core
                 raises the last error, ServiceRequestError ("never sent"), for a write that happened.

And one that is not ambiguous but permanent: ``forbid``, answered 403 AuthorizationPermissionMismatch and
never applied (an identity that lost its role, a rotated key); the SDK does not retry it.

:class:`FaultTransport` does this at the azure-core transport, under the real SDK
clients talking to Azurite, so the SDK's retry behaviour is the real one. For the
in-memory fake, which has no transport, :func:`faulty` wraps a fake client with the
same rules and the same retry behaviour (two retries of a 503 with the storage
clients' settings; after a dropped connection two retries on blob and queue, none on tables).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.core.pipeline.transport import RequestsTransport, RequestsTransportResponse
from requests.structures import CaseInsensitiveDict

MODES = ("refuse", "drop", "commit-5xx", "commit-5xx-unreachable", "forbid")
_SDK_RETRIES = 2  # shared.storage.connections: retry_total=2 on every client


@dataclass
class Rule:
    service: str
    mode: str
    #: HTTP method (POST for inserts and $batch, MERGE/PATCH for updates, PUT, DELETE); None: any write.
    method: str | None = None
    #: Only requests whose body contains this text (e.g. '"status":"succeeded"').
    contains: str | None = None
    count: int = 1
    hits: int = 0
    #: Only once this other rule has been hit (a fault that follows another one).
    after: Rule | None = None


@dataclass
class Faults:
    """Armed rules, consulted for every write. Thread-safe; ``log`` records what was injected."""

    rules: list[Rule] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, service: str, mode: str, *, method: str | None = None, contains: str | None = None,
            count: int = 1, after: Rule | None = None) -> Rule:
        assert mode in MODES, mode
        rule = Rule(service, mode, method.upper() if method else None, contains, count, after=after)
        with self.lock:
            self.rules.append(rule)
        return rule

    def disarm(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, service: str, method: str, body: str) -> str | None:
        """The mode to inject for this request, consuming one use of the first matching rule."""
        read = method in ("GET", "HEAD")
        body = body.replace('": ', '":').replace(", ", ",")  # match JSON however it was spaced
        with self.lock:
            for rule in self.rules:
                if rule.count <= 0 or rule.service != service or (rule.after is not None and not rule.after.hits):
                    continue
                if read and rule.method != method:
                    continue  # reads are faulted only by a rule that names them
                if rule.method and rule.method != method and not (rule.method in ("MERGE", "PATCH") and
                                                                  method in ("MERGE", "PATCH")) \
                        and not (rule.method in ("MERGE", "PATCH") and method == "POST" and _carries_merge(body)):
                    # A MERGE rule also matches a $batch that carries a MERGE (the job write that
                    # finishes a job goes in one transaction with its active-index row).
                    continue
                if rule.contains and rule.contains not in body:
                    continue
                rule.count -= 1
                rule.hits += 1
                self.log.append((service, method, rule.mode))
                return rule.mode
        return None


def _carries_merge(body: str) -> bool:
    """A $batch with a MERGE in it: a sub-request line ``PATCH …``/``MERGE …`` (the SDK's wire form), or the
    fake's serialised arguments with ``"mode": "merge"``."""
    return re.search(r"(?:^|\n)(?:PATCH|MERGE) ", body) is not None or '"mode":"merge"' in body.lower()


def _service_of(url: str) -> str:
    # Azurite: blob 10000, queue 10001, table 10002 by default; private instances use other ports,
    # so look at the path shape instead of the port.
    if "/$batch" in url or "Tables" in url or "(PartitionKey=" in url or "()?" in url:
        return "table"
    if "/messages" in url:
        return "queue"
    return "blob"


class FaultTransport(RequestsTransport):
    """A requests transport that injects the armed faults into the writes it carries."""

    def __init__(self, faults: Faults, service: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.faults = faults
        self.service = service

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        body = request.data if isinstance(request.data, str) else (request.body or b"")
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        elif not isinstance(body, str):
            body = str(body)
        if getattr(self, "unreachable", 0) > 0:
            self.unreachable -= 1  # every retry of this call
            raise ServiceRequestError("Failed to establish a new connection: [Errno 111] Connection refused (injected)")
        mode = self.faults.take(self.service or _service_of(request.url), request.method.upper(), body)
        if mode == "refuse":
            return self._busy(request)
        if mode == "forbid":
            return self._answer(request, 403, "AuthorizationPermissionMismatch", "This request is not authorized")
        if request.method.upper() in ("GET", "HEAD") and mode is not None:
            raise ServiceResponseError("Connection reset by peer (injected)")
        response = super().send(request, **kwargs)
        if mode == "drop":
            response.body()  # the service has answered: the write is applied
            raise ServiceResponseError("Connection reset by peer (injected after the write committed)")
        if mode in ("commit-5xx", "commit-5xx-unreachable"):
            response.body()
            if mode == "commit-5xx-unreachable":
                self.unreachable = _SDK_RETRIES
            return self._busy(request)
        return response

    def _busy(self, request: Any) -> RequestsTransportResponse:
        return self._answer(request, 503, "ServerBusy", "Server Busy")

    def _answer(self, request: Any, status: int, code: str, reason: str) -> RequestsTransportResponse:
        raw = requests.Response()
        raw.status_code = status
        raw.reason = reason
        raw.headers = CaseInsensitiveDict({"x-ms-error-code": code, "Content-Type": "application/json",
                                           "Content-Length": "0"})
        raw._content = b""
        raw.url = request.url
        return RequestsTransportResponse(request, raw, self.connection_config.data_block_size)


# -- the same rules for the in-memory fake ------------------------------------------------------
_TABLE_METHODS = {"get_entity": "GET", "query_entities": "GET", "create_entity": "POST", "submit_transaction": "POST", "update_entity": "MERGE",
                  "upsert_entity": "MERGE", "delete_entity": "DELETE"}
_QUEUE_METHODS = {"send_message": "POST", "delete_message": "DELETE", "update_message": "PUT"}
_BLOB_METHODS = {"download_blob": "GET", "list_blobs": "GET", "upload_blob": "PUT", "delete_blobs": "POST", "delete_blob": "DELETE"}


def _busy_error() -> HttpResponseError:
    return _error(503, "ServerBusy", "Server Busy (injected)")


def _error(status: int, code: str, message: str) -> HttpResponseError:
    err = HttpResponseError(message=message)
    err.status_code = status
    err.error_code = code
    return err


class _Faulty:
    """A fake client whose writes obey the armed faults, retrying a 503 as the SDK would."""

    def __init__(self, inner: Any, service: str, faults: Faults) -> None:
        self._inner = inner
        self._service = service
        self._faults = faults
        self._methods = {"table": _TABLE_METHODS, "queue": _QUEUE_METHODS, "blob": _BLOB_METHODS}[service]
        #: The blob and queue SDKs' ``StorageRetryPolicy`` retries any error, a reset after a POST too (a batch
        #: delete's retry then finds its blobs gone: every sub-request 404; a send's retry sends it again);
        #: the tables SDK's (azure-core's ``RetryPolicy``) retries no POST or MERGE after one. Until review44p
        #: the fake raised for every service.
        self._retries_read_errors = service in ("blob", "queue")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        method = self._methods.get(name)
        if method is None or not callable(attr):
            return attr
        return self._wrap(attr, method)

    def _wrap(self, fn: Callable[..., Any], method: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            body = json.dumps([args, kwargs], default=str)
            for attempt in range(_SDK_RETRIES + 1):
                mode = self._faults.take(self._service, method, body)
                if mode == "refuse":
                    if attempt == _SDK_RETRIES:
                        raise _busy_error()
                    continue  # the SDK retries a 503
                if mode == "forbid":
                    raise _error(403, "AuthorizationPermissionMismatch", "This request is not authorized (injected)")
                if mode is None:
                    return fn(*args, **kwargs)
                if method == "GET":
                    if self._retries_read_errors and attempt < _SDK_RETRIES:
                        continue  # the storage SDK retries the read
                    raise ServiceResponseError("Connection reset by peer (injected)")
                fn(*args, **kwargs)  # applied
                if mode == "drop":
                    if self._retries_read_errors and attempt < _SDK_RETRIES:
                        continue  # the blob and queue SDKs send it again: the retry meets what the first try did
                    raise ServiceResponseError("Connection reset by peer (injected after the write committed)")
                if mode == "commit-5xx-unreachable":
                    _answered(self._service)  # the 503 was an answer, as the storage clients' hook would count
                    raise ServiceRequestError("Failed to establish a new connection (injected)")
                if attempt == _SDK_RETRIES:
                    raise _busy_error()
                # commit-5xx: the SDK retries the request that had already been applied
                return fn(*args, **kwargs)
            raise AssertionError("unreachable")

        return call


def _answered(service: str) -> None:
    from types import SimpleNamespace

    from shared.observability.metering import METER

    request = SimpleNamespace(method="POST", url="http://fake/")
    METER.hook(service, SimpleNamespace(http_request=request, http_response=None))


def faulty(client: Any, service: str, faults: Faults) -> Any:
    return _Faulty(client, service, faults)
