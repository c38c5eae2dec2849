"""The webhook sender's decisions on the in-memory fake: dedupe, send-time SSRF re-check, backoff, dead letter."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.config.settings import get_settings
from shared.core import webhooks as core
from shared.core.jobs import Job, Status
from shared.core.webhooks import UnsafeUrl, WebhookMessage, check_url, delivery_id, sign
from shared.runtime.webhooks import WebhookSender
from tests.support.backends import fake_backend
from tests.support.webhooks import Recorder

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("WEBHOOK_SECRET", "s3cret")
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "false")
    monkeypatch.setenv("DEFAULT_TENANT", "local")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _public_resolver(monkeypatch: pytest.MonkeyPatch, address: str = "93.184.216.34") -> None:
    monkeypatch.setattr(core, "_resolve", lambda host, port: [address])


def _job(backend: Any, status: Status = Status.SUCCEEDED) -> Job:
    job = Job(tenant="local", id="a" * 28, pipeline="echo", status=status, params={}, created_at=NOW,
              available_at=NOW, max_attempts=3, finished_at=NOW, callback_url="https://hooks.example.com/x",
              callback_status="pending")
    return backend.stores.jobs.create(job)


def test_signature_format() -> None:
    mac = __import__("hmac").new
    assert sign(["k"], 1700000000, "job.succeeded", "d1", b"{}") == (
        "t=1700000000,v1=" + mac(b"k", b"1700000000.job.succeeded.d1.{}", "sha256").hexdigest()
    )
    assert sign(["k", "k2"], 1, "e", "d", b"").count(",v1=") == 2


def test_url_policy() -> None:
    def resolve(host: str, port: int) -> list[str]:
        return {"ok.example": ["93.184.216.34"], "rebind.example": ["93.184.216.34", "10.0.0.1"],
                "mapped.example": ["::ffff:127.0.0.1"]}[host]

    assert check_url("https://ok.example/h", allow_private=False, resolve=resolve) == ["93.184.216.34"]
    for bad in ("https://rebind.example/h", "https://mapped.example/h", "http://ok.example/h",
                "https://user@ok.example/h", "javascript:alert(1)", "https://" + "a" * 3000):
        with pytest.raises(UnsafeUrl):
            check_url(bad, allow_private=False, resolve=resolve)
    assert check_url("http://rebind.example/h", allow_private=True, resolve=resolve)


def test_delivered_once_then_duplicates_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    _public_resolver(monkeypatch)
    backend = fake_backend()
    job = _job(backend)
    rec = Recorder([True])
    sender = WebhookSender(backend.stores, transport=rec.transport, send=rec.send)
    msg = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, 1000.0).encode()
    assert sender.handle(msg) == "delivered"
    assert sender.handle(msg) == "already-delivered"
    assert len(rec.calls) == 1
    _url, addresses, body, headers = rec.calls[0]
    assert addresses == ["93.184.216.34"] and headers["Thematiq-Event"] == "job.succeeded"
    t = int(headers["Thematiq-Signature"].split(",")[0][2:])
    assert headers["Thematiq-Signature"] == sign(["s3cret"], t, "job.succeeded", delivery_id(job), body)
    row = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert (row.callback_status, row.callback_attempts) == ("delivered", 1)


def test_failure_backs_off_and_gives_up_after_24h(monkeypatch: pytest.MonkeyPatch) -> None:
    _public_resolver(monkeypatch)
    backend = fake_backend()
    job = _job(backend, Status.FAILED)
    rec = Recorder([False, False, False])
    clock = [1000.0]
    sender = WebhookSender(backend.stores, transport=rec.transport, send=rec.send, clock=lambda: clock[0])
    monkeypatch.setattr(WebhookSender, "_poison", lambda self, msg: None)
    first = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, 1000.0)
    assert sender.handle(first.encode()) == "retrying"
    nxt, delay = rec.sent[-1]
    assert nxt.attempt == 2 and nxt.first_at == 1000.0 and 1.5 <= delay <= 2.5
    row = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert row.callback_status == "retrying" and row.callback_error == "failed: HTTP 500"
    clock[0] = 1000.0 + 25 * 3600
    assert sender.handle(nxt.encode()) == "dead-letter"
    row = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert row.callback_status == "failed" and "24 h" in (row.callback_error or "")
    assert sender.handle(nxt.encode()) == "already-failed"


def test_url_is_rechecked_at_send_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Public at submission, private now (DNS rebinding): never called, dead letter on the job.
    _public_resolver(monkeypatch, "10.0.0.7")
    monkeypatch.setattr(WebhookSender, "_poison", lambda self, msg: None)
    backend = fake_backend()
    job = _job(backend)
    rec = Recorder([])
    sender = WebhookSender(backend.stores, transport=rec.transport, send=rec.send)
    assert sender.handle(WebhookMessage(job.tenant, job.id, delivery_id(job)).encode()) == "refused"
    assert rec.calls == []
    row = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert row.callback_status == "failed" and "non-public" in (row.callback_error or "")


def test_terminal_hook_enqueues_only_for_jobs_with_a_callback() -> None:
    sent: list[WebhookMessage] = []
    backend = fake_backend()
    job = _job(backend)
    core.job_ended(job, sent.append)
    core.job_ended(job.with_changes(callback_url=None), sent.append)
    core.job_ended(job.with_changes(status=Status.RUNNING), sent.append)
    assert [m.delivery for m in sent] == [delivery_id(job)]


def test_bad_messages_are_dropped() -> None:
    sender = WebhookSender(fake_backend().stores, transport=Recorder([]).transport, send=lambda m, d: None)
    assert sender.handle("not json") == "bad-message"
    assert sender.handle('{"t": "t1", "j": "' + "b" * 28 + '", "d": "x"}') == "job-gone"
