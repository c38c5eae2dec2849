"""A scriptable fake of the OpenAI / Azure OpenAI REST API, for tests without network.

It is a real HTTP server on a free 127.0.0.1 port in a background thread, so
the client under test exercises its actual HTTP code (timeouts, headers,
status codes) with no mocks. Each test scripts the replies it wants::

    with FakeLLMServer() as server:
        server.script(rate_limited(retry_after="1"), chat_json({"label": "x"}))
        ... point LLM_ENDPOINT at server.url ...
        assert len(server.requests) == 2

Replies are consumed in order, one per request. When the script is empty the
``responder`` (a function of the request) answers, if set; otherwise the
server returns 500 with ``{"error": {"code": "script_exhausted"}}`` so a test
that sends more requests than it scripted fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer. ``delay`` seconds pass before it is sent (a hang, when longer than the timeout)."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """What the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw text if it was not JSON
    at: float  # time.monotonic() on arrival


Responder = Callable[[RecordedRequest], Reply]


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode("utf-8")


def chat_content(content: str, *, prompt_tokens: int = 50, completion_tokens: int = 10,
                 model: str = "gpt-4o-mini-2024-07-18", finish_reason: str = "stop") -> Reply:
    """A 200 chat completion whose message content is ``content`` verbatim (use it for malformed JSON)."""
    return Reply(200, _json({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }), {"Content-Type": "application/json"})


def chat_json(obj: Any, **kw: Any) -> Reply:
    """A 200 chat completion whose content is ``obj`` as JSON."""
    return chat_content(json.dumps(obj), **kw)


def embeddings(vectors: list[list[float]], *, prompt_tokens: int = 8,
               model: str = "text-embedding-3-small") -> Reply:
    """A 200 embeddings answer (listed in reverse order: clients must sort by ``index``)."""
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return Reply(200, _json({"object": "list", "model": model, "data": data[::-1],
                             "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}),
                 {"Content-Type": "application/json"})


def error(status: int, code: str = "error", headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, _json({"error": {"code": code, "message": f"fake {status}"}}),
                 {"Content-Type": "application/json", **(headers or {})})


def rate_limited(retry_after: str | None = "1", retry_after_ms: str | None = None) -> Reply:
    """429 with ``Retry-After`` (seconds or HTTP date) and/or ``retry-after-ms``."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    return error(429, "429", headers)


def server_error(status: int = 500) -> Reply:
    return error(status, "server_error")


def hang(seconds: float, then: Reply | None = None) -> Reply:
    """Wait ``seconds`` before answering (``then`` or a success): a client with a shorter timeout gives up."""
    base = then or chat_json({})
    return Reply(base.status, base.body, base.headers, delay=seconds)


#: The name of the thread that serves one connection: a client the test did not close keeps its connection alive
#: (and the thread, which makes no storage call) after the test; tests/conftest.py's leak guard knows the name.
CONNECTION_THREAD = "fake-llm-connection"


class _Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` whose connection threads are named :data:`CONNECTION_THREAD` (daemons)."""

    daemon_threads = True  # a hanging reply never blocks shutdown

    def process_request(self, request: Any, client_address: Any) -> None:
        threading.Thread(target=self.process_request_thread, args=(request, client_address),
                         name=CONNECTION_THREAD, daemon=True).start()


class FakeLLMServer:
    """The server. Use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        # A short poll interval makes stop() (shutdown) return in ~50 ms instead of 500.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-llm", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes replies that are still "hanging"
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def script(self, *replies: Reply) -> None:
        """Append replies; each request takes the next one."""
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(request)
        return error(500, "script_exhausted")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                parts = urlsplit(self.path)
                recorded = RecordedRequest(
                    method="POST",
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    at=time.monotonic(),
                )
                reply = server._next(recorded)
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before we answered

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output quiet

        return Handler
