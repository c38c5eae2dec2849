"""devhost answers a request whose body length cannot be read with a 400, as Kestrel does (review44p).

Before, ``Content-Length: abc`` (or a chunk size that is not hex) raised out of the request handler, so the client
got no answer at all, only a closed connection and a traceback in the host log; ``Content-Length: -1`` made the
handler read until the client closed the connection, holding one of the host's request threads for as long. Two
Content-Length headers that disagree are refused too (RFC 9112 6.3). The function is never invoked: the routes
answer before any body is read by the worker.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from devhost.functions import FunctionSpec
from devhost.http_server import DevHttpServer, HttpFunction
from devhost.routes import Route

#: A client that got no answer within this gives up (the handler that waits for a body never answers).
WAIT_SECONDS = 10.0


@pytest.fixture
def port() -> Iterator[int]:
    spec = FunctionSpec("echo", "id", {"type": "httpTrigger", "route": "echo", "authLevel": "anonymous"})
    server = DevHttpServer(0, [HttpFunction(spec, Route.parse("echo"), frozenset({"POST"}), "anonymous")], "api")
    thread = server.start()
    try:
        yield server.server_address[1]
    finally:
        server.stop_accepting()
        server.server_close()
        thread.join(5)


def _status(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as conn:
        conn.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
        try:
            return conn.recv(4096).split(b"\r\n", 1)[0]
        except TimeoutError:
            return b"(no answer)"


@pytest.mark.parametrize("head", [
    b"Content-Length: abc\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: +5\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
], ids=["not-a-number", "negative", "signed", "two-lengths", "chunk-size-not-hex"])
def test_a_body_length_that_cannot_be_read_is_a_400(port: int, head: bytes) -> None:
    assert _status(port, head) == b"HTTP/1.1 400 Bad Request"
