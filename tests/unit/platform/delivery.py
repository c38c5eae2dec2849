"""Driving the app's own functions on the installed in-memory platform, as the Functions host would."""

from __future__ import annotations

import base64
import json
from typing import Any

import azure.functions as func
from azure.functions.queue import QueueMessage

from shared.config.settings import get_settings
from shared.platform import Platform
from tests.support.app_index import app_functions


def functions() -> dict[str, Any]:
    return {f.get_function_name(): f.get_user_function() for f in app_functions()}


def http(name: str, method: str, path: str, body: Any = None, **route: str) -> func.HttpResponse:
    req = func.HttpRequest(method=method, url=f"http://localhost/api/{path}", headers={}, params={},
                           route_params=route, body=b"" if body is None else json.dumps(body).encode())
    resp: func.HttpResponse = functions()[name](req)
    return resp


def deliver_one(platform: Platform, queue: str, function: str) -> bool:
    """Deliver the next visible message of ``queue`` to ``function`` as the host would; False if there is none."""
    assert platform.fake is not None
    client = platform.fake.queue(queue)
    for m in client.receive_messages(max_messages=1, visibility_timeout=60):
        msg = QueueMessage(id=m.id, body=base64.b64decode(m.content), dequeue_count=m.dequeue_count,
                           pop_receipt=m.pop_receipt)
        functions()[function](msg)
        client.delete_message(m.id, m.pop_receipt)
        return True
    return False


def deliver_all(platform: Platform) -> list[str]:
    """Deliver job and chunk messages as the host would (receive, run the function, delete) until none is left."""
    s = get_settings()
    queues = {s.jobs_queue: "job_worker", s.chunks_queue: "chunk_worker"}
    delivered: list[str] = []
    while True:
        got = False
        for queue, function in queues.items():
            if deliver_one(platform, queue, function):
                delivered.append(function)
                got = True
        if not got:
            return delivered
        assert len(delivered) < 100, "the job does not converge"
