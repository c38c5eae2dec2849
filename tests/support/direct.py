"""In-process harness for integration tests of Thematiq's function code against real Azurite: not end to end.

What it is for: tests of *our* code behind a function (status codes and problem+json, storage effects, the
worker's lifecycle, the meter, telemetry) that need the test process's monkeypatched settings, fakes and
``METER``. It calls the user function in this process, so it skips the Functions host, the language worker
process and the gRPC hop; tests of those run the app under devhost and its worker (tests/e2e/devhost,
tests/e2e/host/test_noop_job_through_the_worker_process.py)). A test written on this harness must not be called end-to-end.

What it keeps from the real path: every trigger object is built by Microsoft's runtime (``azure-functions-runtime``,
the package the worker runs, at the pinned version) from the message devhost sends (devhost/convert.py), and every
HTTP answer goes back through the runtime's converter and devhost's reading of it, so the function sees and answers
what it would in the worker: a body as bytes, lower-case header names, an HTTP function returning ``None`` fails
(a 500 in Azure), and so does a queue function returning a value without a ``$return`` binding.

``app.get_functions()`` may be called only once per app, so the functions are indexed once per test session here.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

import azure.functions as func
from azure.functions.queue import QueueMessage
from azure.functions.timer import TimerRequest
from azure_functions_runtime.bindings import meta

from devhost import convert
from devhost.proto import FunctionRpc_pb2 as pb
from shared.storage.connections import get_queue_client
from tests.support.app_index import app_functions

_lock = threading.Lock()
_functions: dict[str, Callable[..., Any]] = {}


class RuntimeRefused(AssertionError):
    """The runtime would fail this invocation (a 500 for HTTP, a retried message for a queue)."""


def functions() -> dict[str, Callable[..., Any]]:
    # A lock, not lru_cache: concurrent first calls would index the app twice, which raises.
    with _lock:
        if not _functions:
            _functions.update({f.get_function_name(): f.get_user_function() for f in app_functions()})
        return _functions


@functools.cache
def _converters() -> None:
    meta.load_binding_registry()  # as the runtime's worker_init_request loads them


def _incoming(binding: str, name: str, data: pb.TypedData, pytype: type, metadata: dict[str, pb.TypedData]) -> Any:
    """The object the runtime binds to the trigger parameter for this message."""
    _converters()
    return meta.from_incoming_proto(
        binding, pb.ParameterBinding(name="trigger", data=data), pytype=pytype, trigger_metadata=metadata,
        function_name=name,
    )


def _media(headers: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    if content_type is None:
        return None, None
    mimetype, _, rest = content_type.partition(";")
    charset = rest.split("=", 1)[1].strip() if "charset=" in rest else None
    return mimetype.strip(), charset


def http(
    name: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | list[tuple[str, str]] | None = None,
    route_params: dict[str, str] | None = None,
    raw_query: str | None = None,
) -> func.HttpResponse:
    """Call HTTP function ``name``; returns the answer as the client would get it from the host.

    ``params`` (a list may repeat a name) go into the URL percent-encoded, ``raw_query`` as it is; the query map the
    function's ``req.params`` comes from joins a repeated name's values with ",", as the Functions host and devhost do.
    """
    fn = functions()[name]
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    pairs = list(params.items()) if isinstance(params, dict) else list(params or [])
    url = f"http://localhost:7071/api/{path}"
    if raw_query is not None:
        url += "?" + raw_query
        pairs = urllib.parse.parse_qsl(raw_query, keep_blank_values=True)
    elif pairs:
        url += "?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
    query: dict[str, str] = {}
    for k, v in pairs:
        query[k] = f"{query[k]},{v}" if k in query else v
    message = convert.http_request(method, url, headers or {}, query, route_params or {}, data)
    req = _incoming("httpTrigger", name, message, func.HttpRequest, {})
    resp = fn(req)
    _converters()
    try:
        out = meta.to_outgoing_proto("http", resp, pytype=func.HttpResponse, protos=pb)
    except TypeError as exc:
        raise RuntimeRefused(f"the runtime fails {name}'s answer {resp!r} (a 500 in Azure): {exc}") from exc
    answer = convert.http_response(out)
    if answer is None:
        raise RuntimeRefused(f"{name} answered {resp!r}, which is no HTTP response (a 500 in Azure)")
    status, content, reply_headers = answer
    mimetype, charset = _media(reply_headers)
    return func.HttpResponse(content, status_code=status, headers=dict(reply_headers), mimetype=mimetype,
                             charset=charset)


def body_of(resp: func.HttpResponse) -> Any:
    return json.loads(resp.get_body())


def receive(queue: str | None = None, visibility: int = 30) -> QueueMessage | None:
    """Receive one message from Azurite; the runtime builds the QueueMessage from what devhost would send."""
    client = get_queue_client(queue)
    for m in client.receive_messages(max_messages=1, visibility_timeout=visibility):
        data, metadata = convert.queue_trigger(
            base64.b64decode(m.content), message_id=m.id, dequeue_count=m.dequeue_count, pop_receipt=m.pop_receipt,
            inserted_on=m.inserted_on, expires_on=m.expires_on, next_visible_on=m.next_visible_on,
        )
        msg: QueueMessage = _incoming("queueTrigger", "receive", data, func.QueueMessage, metadata)
        return msg
    return None


def complete(msg: QueueMessage, queue: str | None = None) -> None:
    assert msg.id is not None
    get_queue_client(queue).delete_message(msg.id, msg.pop_receipt)


def run_worker_once(queue: str | None = None, function: str = "job_worker") -> QueueMessage | None:
    """Deliver one message to a queue-triggered function; delete it on success as the host would."""
    msg = receive(queue)
    if msg is None:
        return None
    returned = functions()[function](msg)
    if returned is not None:  # the function has no $return binding: the runtime fails the invocation
        raise RuntimeRefused(f"{function} returned {returned!r} without a $return binding")
    complete(msg, queue)
    return msg


def drain(timeout: float = 60.0, idle: float = 3.0) -> int:
    """Deliver job and chunk messages until both queues stay empty; returns how many were delivered."""
    import time

    from shared.config.settings import get_settings

    chunks_queue = get_settings().chunks_queue
    delivered, idle_since = 0, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = run_worker_once() or run_worker_once(chunks_queue, "chunk_worker")
        if got:
            delivered += 1
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > idle:
            return delivered
        else:
            time.sleep(0.2)
    raise AssertionError("queues did not drain in time")


def run_reaper(past_due: bool = False) -> None:
    info: TimerRequest = _incoming("timerTrigger", "reaper", convert.timer_info(past_due, None), func.TimerRequest, {})
    functions()["reaper"](info)
