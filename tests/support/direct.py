"""Call the app's functions directly with real ``azure.functions`` objects, against real Azurite.

``app.get_functions()`` may be called only once per app, so the functions are
indexed once per test session here.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from typing import Any

import azure.functions as func
from azure.functions.queue import QueueMessage
from azure.functions.timer import TimerRequest

from shared.storage.connections import get_queue_client
from tests.support.app_index import app_functions

_lock = threading.Lock()
_functions: dict[str, Callable[..., Any]] = {}


def functions() -> dict[str, Callable[..., Any]]:
    # A lock, not lru_cache: concurrent first calls would index the app twice, which raises.
    with _lock:
        if not _functions:
            _functions.update({f.get_function_name(): f.get_user_function() for f in app_functions()})
        return _functions


def http(
    name: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    route_params: dict[str, str] | None = None,
) -> func.HttpResponse:
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    req = func.HttpRequest(
        method=method,
        url=f"http://localhost:7071/api/{path}",
        headers=headers or {},
        params=params or {},
        route_params=route_params or {},
        body=data,
    )
    resp: func.HttpResponse = functions()[name](req)
    return resp


def body_of(resp: func.HttpResponse) -> Any:
    return json.loads(resp.get_body())


def receive(queue: str | None = None, visibility: int = 30) -> QueueMessage | None:
    """Receive one message from Azurite and wrap it the way the Functions host does."""
    client = get_queue_client(queue)
    for m in client.receive_messages(max_messages=1, visibility_timeout=visibility):
        return QueueMessage(
            id=m.id,
            body=base64.b64decode(m.content),
            dequeue_count=m.dequeue_count,
            pop_receipt=m.pop_receipt,
            insertion_time=m.inserted_on,
            expiration_time=m.expires_on,
            time_next_visible=m.next_visible_on,
        )
    return None


def complete(msg: QueueMessage, queue: str | None = None) -> None:
    get_queue_client(queue).delete_message(msg.id, msg.pop_receipt)


def run_worker_once(queue: str | None = None, function: str = "job_worker") -> QueueMessage | None:
    """Deliver one message to a queue-triggered function; delete it on success as the host would."""
    msg = receive(queue)
    if msg is None:
        return None
    functions()[function](msg)
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
    functions()["reaper"](TimerRequest(past_due=past_due))
