"""The HTTP trigger: a threaded HTTP server that routes requests to functions.

Semantics follow the Functions host: ``/{routePrefix}/{route}`` routing (the
route defaults to the function name), method filtering, ``function``/``admin``
auth keys (header ``x-functions-key`` or query ``code``; a missing or wrong key
gives 401 with an empty body), a 100 MB request body limit (413), and 500 with
an empty body when a function fails in the worker (it raised, or returned ``None`` or something that is not an
HTTP response: the runtime fails that invocation, as in Azure). A route that matches with the wrong
method answers 404, as ASP.NET routing in the host does (no 405).
``GET /admin/host/status`` answers ``{"state": "Running"}`` for readiness probes.
Each request runs in its own thread, so sync functions run concurrently.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devhost import config, convert, invoker
from devhost.functions import FunctionSpec
from devhost.routes import Route, split_path

log = logging.getLogger("devhost")

MAX_BODY_BYTES = 100 * 1024 * 1024  # The host's request size limit (maxRequestBodySize: 100 MB).
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


@dataclass
class HttpFunction:
    spec: FunctionSpec
    route: Route
    methods: frozenset[str] | None  # None: every method
    auth_level: str


def build_table(specs: list[FunctionSpec]) -> list[HttpFunction]:
    """HTTP-triggered functions, ordered by route precedence (most specific first)."""
    table = []
    for spec in specs:
        if spec.trigger_type != "httpTrigger":
            continue
        route = config.resolve(str(spec.trigger.get("route") or spec.name))
        methods = spec.trigger.get("methods")
        table.append(
            HttpFunction(
                spec=spec,
                route=Route.parse(route),
                methods=frozenset(str(m).upper() for m in methods) if methods else None,
                auth_level=str(spec.trigger.get("authLevel", "function")).lower(),
            )
        )
    table.sort(key=lambda f: f.route.precedence)
    return table


def _key_ok(level: str, key: str | None) -> bool:
    """Function level accepts the function or master key; admin level only the master key."""
    if level == "anonymous":
        return True
    allowed = [os.environ.get("DEVHOST_MASTER_KEY", "")]
    if level == "function":
        allowed.append(os.environ.get("DEVHOST_FUNCTION_KEY", ""))
    return key is not None and any(k and hmac.compare_digest(key.encode(), k.encode()) for k in allowed)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DevHttpServer

    def log_message(self, format: str, *args: Any) -> None:
        # Access lines would duplicate the invocation log line; keep them at debug.
        log.debug("http %s", format % args)

    def _send(self, status: int, body: bytes = b"", headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        names = set()
        for k, v in headers or []:
            self.send_header(k, v)
            names.add(k.lower())
        self.send_header("Content-Length", str(len(body)))
        if self.server.stopping.is_set():
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _bad_framing(self) -> None:
        """A body whose length cannot be read (Kestrel's 400 for an invalid Content-Length or chunk size): the
        connection closes, since where the next request would start is unknown."""
        self.close_connection = True
        self._send(400)

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering 413 (over the limit) or 400 (its length cannot be read).

        Until review44p a Content-Length that was not a number (``abc``) raised out of the handler, so the client
        got no answer at all, and a negative one (``-1``) made ``rfile.read`` wait for the client to close the
        connection, holding a request thread for as long; a bad chunk size was the first case.
        """
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, total = [], 0
            while True:
                text = self.rfile.readline(1024).split(b";")[0].strip() or b"0"
                if not _HEX.fullmatch(text):
                    self._bad_framing()
                    return None
                size = int(text, 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    self.close_connection = True
                    self._send(413)
                    return None
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        sent = [v.strip() for v in self.headers.get_all("Content-Length") or []]
        if any(not v.isascii() or not v.isdigit() for v in sent) or len(set(sent)) > 1:
            self._bad_framing()  # not a length, or two that disagree (RFC 9112 6.3: unrecoverable)
            return None
        length = int(sent[0]) if sent else 0
        if length > MAX_BODY_BYTES:
            # Not reading the body: the connection can't be reused.
            self.close_connection = True
            self._send(413)
            return None
        return self.rfile.read(length) if length else b""

    def _refuse(self, status: int) -> None:
        """Answer without reading the request's body; the connection closes, since its unread body is still on it."""
        if self.headers.get("Content-Length", "0") not in ("", "0") or self.headers.get("Transfer-Encoding"):
            self.close_connection = True
        self._send(status)

    def _handle(self) -> None:
        with invoker.ACTIVITY.track():
            try:
                self._dispatch()
            except (BrokenPipeError, ConnectionResetError):
                pass

    def _dispatch(self) -> None:
        if self.server.stopping.is_set():
            self.close_connection = True
            self._send(503)
            return
        url = urlsplit(self.path)
        parts = split_path(url.path)
        if [p.lower() for p in parts] == ["admin", "host", "status"] and self.command in ("GET", "HEAD"):
            self._send(200, json.dumps({"state": "Running"}).encode(), [("Content-Type", "application/json")])
            return
        prefix = split_path(self.server.route_prefix)
        if [p.lower() for p in parts[: len(prefix)]] != [p.lower() for p in prefix]:
            self._refuse(404)
            return
        rest = parts[len(prefix):]
        target, route_params = None, {}
        for fn in self.server.table:
            params = fn.route.match(rest)
            if params is None or (fn.methods is not None and self.command not in fn.methods):
                continue
            target, route_params = fn, params
            break
        if target is None:
            self._refuse(404)
            return
        query = parse_qs(url.query, keep_blank_values=True)
        key = self.headers.get("x-functions-key") or next(iter(query.get("code") or []), None)
        if not _key_ok(target.auth_level, key):
            self._refuse(401)
            return
        # The body is read only for a caller the route admits: an unauthenticated client must not make the host
        # read (and hold) up to the body limit, or wait on a body it never sends.
        body = self._read_body()
        if body is None:
            return
        headers: dict[str, str] = {}
        for k, v in self.headers.items():
            # Repeated headers reach the function joined with ", ", as in ASP.NET.
            headers[k.lower()] = f"{headers[k.lower()]}, {v}" if k.lower() in headers else v
        host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
        caps = invoker.capabilities()
        request = convert.http_request(
            method=self.command,
            url=f"http://{host}{self.path}",
            headers=headers,
            # Repeated query keys are joined with "," (ASP.NET StringValues.ToString()).
            query={k: ",".join(v) for k, v in query.items()},
            route_params=route_params,
            body=body,
            caps=caps,
        )
        reason = "This function was programmatically called via the host APIs."
        metadata = convert.http_trigger_metadata(request, caps)
        result = invoker.invoke(target.spec, request, reason=reason, trigger_metadata=metadata)
        answer = _response(target.spec, result.outputs) if result.succeeded else None
        if answer is None:
            self._send(500)  # No details: the error is in the host log only.
            return
        self._send(*answer)


for _method in ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"):
    setattr(_Handler, f"do_{_method}", _Handler._handle)


def _response(spec: FunctionSpec, outputs: dict[str, Any]) -> tuple[int, bytes, list[tuple[str, str]]] | None:
    """Status, body and headers from the function's HTTP output (``$return`` or a named Out); None: a 500."""
    names = [str(b.get("name")) for b in spec.output_bindings("http")] or ["$return"]
    answer = convert.http_response(outputs.get(names[0]))
    if answer is None:
        log.error("function %s gave no HTTP response", spec.name)
    return answer


class DevHttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with the routing table and a stopping flag."""

    daemon_threads = True
    # A deeper backlog than the default 5, so bursts of concurrent clients aren't refused.
    request_queue_size = 128

    def __init__(self, port: int, table: list[HttpFunction], route_prefix: str, host: str = "127.0.0.1") -> None:
        self.table = table
        self.route_prefix = route_prefix
        self.stopping = threading.Event()
        super().__init__((host, port), _Handler)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="devhost-http", daemon=True)
        thread.start()
        return thread

    def stop_accepting(self) -> None:
        """Stop the accept loop and close the listening socket; running requests continue."""
        self.stopping.set()
        self.shutdown()
        self.socket.close()
