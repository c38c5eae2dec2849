"""A real dev host (``python -m devhost``) on Azurite for the client and webhook tests, and a webhook receiver."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from devhost.process import HostProcess
from tests.conftest import unique_names
from thematiq_client import Client, webhooks

SECRET = "whsec-" + secrets.token_hex(16)


def _env(azurite: str, **extra: str) -> dict[str, str]:
    suffix = secrets.token_hex(4)
    return {
        "AzureWebJobsStorage": azurite,
        "DEFAULT_TENANT": "local",
        "DEVHOST_FUNCTION_KEY": secrets.token_urlsafe(16),
        "DEVHOST_MASTER_KEY": secrets.token_urlsafe(16),
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.2",
        "HEARTBEAT_SECONDS": "0.5",
        "CANCEL_GRACE_SECONDS": "1",
        "LLM_PROVIDER": "none",
        "WEBHOOK_SECRET": SECRET,
        **unique_names(),
        "CALLBACKS_QUEUE": f"callbacks-{suffix}",
        **extra,
    }


@pytest.fixture(scope="session")
def client_host(azurite: str) -> Iterator[HostProcess]:
    host = HostProcess(env=_env(azurite, WEBHOOK_ALLOW_PRIVATE="true")).start()
    try:
        yield host
    finally:
        host.stop(timeout=15)


@pytest.fixture
def client(client_host: HostProcess) -> Client:
    return Client(client_host.url + "/api", key=client_host.env["DEVHOST_FUNCTION_KEY"])


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    at: float
    #: The request target as it arrived (path and query, percent-encoded).
    path: str = ""


@dataclass
class Receiver:
    """A local webhook receiver; ``answers`` are the statuses it gives in turn (then 200)."""

    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)

    def wait_for(self, check: Callable[[list[Delivery]], bool], timeout: float = 60) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while not check(self.deliveries):
            assert time.monotonic() < deadline, f"receiver got {len(self.deliveries)} deliveries"
            time.sleep(0.1)
        return list(self.deliveries)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.deliveries.append(Delivery({k.lower(): v for k, v in self.headers.items()}, body, time.time(), self.path))
            status = state.answers.pop(0) if state.answers else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/thematiq?x=1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def verify(delivery: Delivery, secret: str = SECRET, tolerance: float = 300) -> dict[str, Any]:
    """What docs/webhooks.md tells receivers to do: ``thematiq_client.webhooks.verify`` (signature, age, parse)."""
    try:
        return webhooks.verify([secret], delivery.body, delivery.headers, tolerance=tolerance)
    except webhooks.WebhookVerificationError as err:
        raise AssertionError(str(err)) from err
