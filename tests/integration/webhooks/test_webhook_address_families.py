"""A dual-stack receiver is reached over IPv4 from an instance without IPv6 (review44p; the unit side is
tests/unit/webhooks/test_webhook_address_order.py): through check_url and post, over a real socket, with IPv6
unreachable as on App Service (connect() fails with ENETUNREACH). Before, the three IPv6 addresses sorted first
were the only ones dialled and the delivery failed "could not connect", attempt after attempt."""

from __future__ import annotations

import errno
import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from shared.config.settings import get_settings
from shared.core import webhooks as core
from shared.core.webhooks import check_url
from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import post


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_dual_stack_receiver_is_reached_over_ipv4(receiver: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    # The receiver's DNS answer as glibc gives it on a host without IPv6: IPv4 first (RFC 6724), three IPv6 after.
    # As text, "100::…" sorts before "127.0.0.1" as "2600:…" does before "52.…" (the receiver is local here, so
    # WEBHOOK_ALLOW_PRIVATE admits these addresses; IPv6 is unreachable below either way).
    v6 = ["100::1", "100::2", "100::3"]
    infos = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", receiver))]
    infos += [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, receiver, 0, 0)) for a in v6]
    resolve = socket.getaddrinfo
    monkeypatch.setattr(core.socket, "getaddrinfo",
                        lambda host, *args, **kw: infos if host == "hooks.example" else resolve(host, *args, **kw))
    dialled: list[str] = []
    real = socket.create_connection

    def connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        dialled.append(address[0])
        if ":" in address[0]:
            raise OSError(errno.ENETUNREACH, "Network is unreachable")  # no outbound IPv6 here
        return real(address, *args, **kwargs)

    monkeypatch.setattr(runtime.socket, "create_connection", connect)
    url = f"http://hooks.example:{receiver}/h"
    outcome = post(url, check_url(url, allow_private=True), b"{}", {"Content-Type": "application/json"})
    assert outcome.ok and outcome.detail == "HTTP 204", (outcome, dialled)
    assert "127.0.0.1" in dialled
