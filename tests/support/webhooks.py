"""Helpers of the webhook scenarios: finished jobs with a webhook, a recording transport, a public resolver."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from shared.core import webhooks as core
from shared.core.jobs import Job, Status, new_job_id, utcnow
from shared.core.webhooks import WebhookMessage
from shared.runtime.webhooks import DeliveryOutcome, WebhookSender
from shared.storage.webhook_store import IndexRow, WebhookStore
from tests.support.backends import Backend

PUBLIC = "93.184.216.34"


def public_dns(monkeypatch: pytest.MonkeyPatch, address: str = PUBLIC) -> None:
    monkeypatch.setattr(core, "_resolve", lambda host, port: [address])


def finished_job(backend: Backend, tenant: str = "local", *, ago: timedelta = timedelta(minutes=30),
                 status: Status = Status.SUCCEEDED, attempts: int = 0, webhook: str = "pending",
                 url: str = "https://hooks.example.com/x", index: bool = True) -> Job:
    """A finished job whose webhook stands at ``webhook`` after ``attempts`` (indexed, as submission does)."""
    now = utcnow()
    job_id = new_job_id()
    if index:
        WebhookStore.of(backend.stores).put_index_row(IndexRow(tenant, job_id, due_at=now - ago + core.SWEEP_AFTER))
    job = Job(tenant=tenant, id=job_id, pipeline="echo", status=status, params={}, created_at=now - ago,
              available_at=now - ago, max_attempts=3, finished_at=now - ago, callback_url=url,
              callback_status=webhook, callback_attempts=attempts)
    return backend.stores.jobs.create(job)


@dataclass
class Recorder:
    """A transport that answers from ``answers`` (True: 2xx) and a ``send`` that keeps the messages."""

    answers: list[bool] = field(default_factory=list)
    calls: list[tuple[str, list[str], bytes, dict[str, str]]] = field(default_factory=list)
    sent: list[tuple[WebhookMessage, float]] = field(default_factory=list)

    def transport(self, url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
        self.calls.append((url, addresses, body, headers))
        ok = self.answers.pop(0) if self.answers else True
        return DeliveryOutcome(ok, "HTTP 200" if ok else "failed: HTTP 500")

    def send(self, msg: WebhookMessage, delay: float) -> None:
        self.sent.append((msg, delay))

    def sender(self, backend: Backend, **kw: Any) -> WebhookSender:
        return WebhookSender(backend.stores, transport=self.transport, send=self.send, **kw)


def row(backend: Backend, job: Job) -> Job:
    return backend.stores.jobs.get(job.tenant, job.id, with_input=True)


def later(minutes: float) -> datetime:
    return utcnow() + timedelta(minutes=minutes)
