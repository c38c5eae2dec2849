"""A webhook sender killed with SIGKILL between its steps loses no delivery (docs/webhooks.md "at least once").

Each case runs the production sender (``shared.platform.current().webhook_sender``, built from the settings, on
Azurite) in a child process that kills itself with SIGKILL at one point of ``WebhookSender.handle``: the kill
comes from the code path, never from a timer, so the test does not depend on timing. The receiver is a real
HTTP server on loopback (``WEBHOOK_ALLOW_PRIVATE=true``, as in local development).

* Killed after the receiver answered 2xx, before the outcome was recorded: the message is delivered again (the
  host's visibility timeout) and POSTed again with the same ``Thematiq-Delivery``, then recorded once,
  ``delivered``; the index row goes.
* Killed after a failed attempt was recorded, before the next attempt was queued: the message delivered again
  is ``stale-attempt``, no next message exists, and the sweep re-sends the attempt once its window has passed.
* A worker killed after the write that made its job terminal, before the webhook's first message was queued: the
  index row written at submission is there, and the sweep sends the first attempt once its window has passed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from shared.config.settings import get_settings
from shared.core.webhooks import WebhookMessage, WebhookStatus, delivery_id
from shared.runtime import webhooks as runtime
from shared.storage.webhook_store import WebhookStore, index_key
from tests.support.backends import Backend
from tests.support.webhooks import finished_job, row
from tests.unit.webhooks.conftest import SECRET
from thematiq_client import webhooks

ROOT = Path(__file__).resolve().parents[3]

#: The sender, killed at ``sys.argv[2]``: after-post (the receiver answered, nothing recorded yet) or before-next
#: (a failed attempt recorded, its successor not yet queued); "none" runs to the end and prints the outcome.
CHILD = r"""
import os, signal, sys
from shared import platform

sender = platform.current().webhook_sender
where = sys.argv[2]
transport, send = sender.transport, sender.send

def killed_after_post(*args):
    outcome = transport(*args)
    if where == "after-post":
        os.kill(os.getpid(), signal.SIGKILL)
    return outcome

def killed_before_next(message, delay):
    if where == "before-next":
        os.kill(os.getpid(), signal.SIGKILL)
    send(message, delay)

sender.transport, sender.send = killed_after_post, killed_before_next
print(sender.handle(sys.argv[1]), flush=True)
"""


#: A worker that finishes a running job (``succeeded``) and is killed as it queues the job's webhook.
FINISHER = r"""
import os, signal, sys
from shared import platform
from shared.core.jobs import Status
from shared.core.lifecycle import Ending, Lifecycle
from shared.core.webhooks import WebhookMessage

stores = platform.current().stores
send = stores.messages.send

def killed_on_the_webhook(message, *args, **kwargs):
    if isinstance(message, WebhookMessage):
        os.kill(os.getpid(), signal.SIGKILL)
    return send(message, *args, **kwargs)

stores.messages.send = killed_on_the_webhook
job = stores.jobs.get(sys.argv[1], sys.argv[2], with_input=True)
Lifecycle(stores).finish(job.with_changes(owner=None), Ending(Status.SUCCEEDED))
print("not killed", flush=True)
"""


class _Receiver:
    def __init__(self) -> None:
        self.answers: list[int] = []
        self.got: list[tuple[bytes, dict[str, str]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.got.append((body, dict(self.headers.items())))
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def deliveries(self) -> list[str]:
        """The delivery id of each POST received, each signature checked as a receiver would."""
        for body, headers in self.got:
            webhooks.verify(SECRET, body, headers)
        return [headers["Thematiq-Delivery"] for _body, headers in self.got]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Receiver]:
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    r = _Receiver()
    try:
        yield r
    finally:
        r.close()


def _run(message: str, where: str, program: str = CHILD) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", program, message, where], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _indexed(backend: Backend, tenant: str, job_id: str) -> bool:
    return index_key(tenant, job_id) in WebhookStore.of(backend.stores).keys()


def test_killed_after_the_receivers_2xx_the_delivery_is_sent_again_and_recorded_once(
    backend: Backend, receiver: _Receiver
) -> None:
    job = finished_job(backend, url=receiver.url)
    message = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, job.finished_at.timestamp()).encode()
    killed = _run(message, "after-post")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert receiver.deliveries() == [delivery_id(job)], "the receiver had the delivery before the kill"
    assert row(backend, job).callback_status == WebhookStatus.PENDING and _indexed(backend, job.tenant, job.id)
    # The host delivers the message again once its visibility timeout has passed.
    again = _run(message, "none")
    assert again.returncode == 0 and again.stdout.strip() == "delivered", again.stderr[-2000:]
    assert receiver.deliveries() == [delivery_id(job)] * 2, "at least once: the same delivery id twice"
    stored = row(backend, job)
    assert (stored.callback_status, stored.callback_attempts) == (WebhookStatus.DELIVERED, 1)
    assert not _indexed(backend, job.tenant, job.id)
    assert _run(message, "none").stdout.strip() == "already-delivered" and len(receiver.got) == 2


def test_killed_between_a_recorded_failure_and_the_next_send_the_sweep_sends_it(
    backend: Backend, receiver: _Receiver
) -> None:
    receiver.answers = [500]
    job = finished_job(backend, url=receiver.url)
    message = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, job.finished_at.timestamp()).encode()
    callbacks = get_settings().callbacks_queue
    killed = _run(message, "before-next")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    stored = row(backend, job)
    assert (stored.callback_status, stored.callback_attempts) == (WebhookStatus.RETRYING, 1)
    assert backend.peek(callbacks) == [], "the next attempt was never queued"
    again = _run(message, "none")
    assert again.returncode == 0 and again.stdout.strip() == "stale-attempt", again.stderr[-2000:]
    # The sweep: its first look starts the window, the next one after it re-sends attempt 2.
    sweeper = runtime.WebhookSender(backend.stores)  # its re-sends go through the stores' port: the callbacks queue
    assert sweeper.sweep().resent == []
    backend.clock.advance(runtime.window(1).total_seconds() + 1)
    assert sweeper.sweep().resent == [job.id]
    [text] = backend.peek(callbacks)
    assert json.loads(text)["a"] == 2
    assert backend.deliver(lambda t, _n: _run(t, "none").stdout.strip(), callbacks) == "delivered"
    assert receiver.deliveries() == [delivery_id(job)] * 2
    stored = row(backend, job)
    assert (stored.callback_status, stored.callback_attempts) == (WebhookStatus.DELIVERED, 2)
    assert not _indexed(backend, job.tenant, job.id)


def test_a_worker_killed_between_the_terminal_write_and_the_webhooks_send_the_sweep_sends_it(
    backend: Backend, receiver: _Receiver
) -> None:
    from shared.core.jobs import Status

    job = finished_job(backend, status=Status.RUNNING, url=receiver.url)  # indexed at submission, as the API does
    callbacks = get_settings().callbacks_queue
    killed = _run(job.tenant, job.id, FINISHER)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout + killed.stderr)[-2000:]
    stored = row(backend, job)
    assert stored.status == Status.SUCCEEDED and stored.callback_status == WebhookStatus.PENDING
    assert backend.peek(callbacks) == [], "the first attempt was never queued"
    assert _indexed(backend, job.tenant, job.id)
    sweeper = runtime.WebhookSender(backend.stores)
    sweeper.sweep()  # its first look at the finished job: the first attempt was due at the end
    backend.clock.advance(runtime.window(0).total_seconds() + 1)
    assert job.id in sweeper.sweep().resent + sweeper.sweep().resent
    assert backend.deliver(lambda t, _n: _run(t, "none").stdout.strip(), callbacks) == "delivered"
    assert receiver.deliveries() == [delivery_id(stored)]
    assert row(backend, job).callback_status == WebhookStatus.DELIVERED
