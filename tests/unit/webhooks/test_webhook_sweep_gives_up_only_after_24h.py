"""The sweep never fails a webhook whose message is only late, and a settle that did not apply changes nothing else.

Found by review45w. Before:

* The sweep failed a webhook for good after 6 re-sends in a row without an attempt recorded, whatever its age:
  for a first delivery (window 5 min) that was about half an hour after its job ended. A message that is
  merely behind others in the callbacks queue (a burst of completions to slow receivers: 4 messages at a time
  per instance, each up to 15 s) is not lost, yet its webhook was ``failed`` before it had been tried once,
  and the delivery, when its turn came, was dropped (``already-failed``): accepted, never delivered, far inside
  the 24 hours the docs promise. Now a webhook is failed as lost only once its 24 hours are over; the re-sends
  space out (the window doubles after each, up to an hour), so a message lost for good still costs a bounded
  number of them.
* A settle (delivered, refused, dead letter) or the sweep's "lost" verdict whose record did not apply, because
  a later attempt had been recorded in the meantime, still removed the webhook's index row (and copied the
  message to the poison queue, or counted the webhook as failed): the webhook went on retrying with no index
  row, so a message of it lost later was found only by the daily heal.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from shared.core.jobs import Job
from shared.core.lifecycle import Lifecycle
from shared.core.webhooks import WebhookMessage, WebhookStatus, delivery_id
from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import DeliveryOutcome, WebhookSender
from shared.storage.webhook_store import WebhookStore, index_key
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job, public_dns, row

SWEEP_EVERY = 300.0  # the timer's schedule (0 */5 * * * *)


def _indexed(backend: Backend, job: Job) -> bool:
    return index_key(job.tenant, job.id) in WebhookStore.of(backend.stores).keys()


def test_a_first_delivery_held_up_in_a_backlog_is_delivered_not_failed(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    job = finished_job(backend, ago=timedelta(seconds=1))
    # The first attempt's message, as the terminal write sent it, waits behind a backlog for 90 minutes.
    first = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, job.finished_at.timestamp()).encode()
    rec = Recorder()
    sender = rec.sender(backend, clock=lambda: backend.clock.now().timestamp())
    for _ in range(18):
        backend.clock.advance(SWEEP_EVERY)
        report = sender.sweep()
        assert report.failed == [], "a webhook not yet 24 h old is failed as lost"
    assert row(backend, job).callback_status == WebhookStatus.PENDING
    resent = len(rec.sent)
    assert 1 <= resent <= 6, f"{resent} re-sends in 90 minutes: they space out"
    assert sender.handle(first) == "delivered"
    assert row(backend, job).callback_status == WebhookStatus.DELIVERED and len(rec.calls) == 1


def test_a_webhook_whose_messages_stay_lost_is_failed_once_its_24_hours_are_over(backend: Backend) -> None:
    job = finished_job(backend, ago=timedelta(seconds=1))
    rec = Recorder()
    sender = rec.sender(backend, clock=lambda: backend.clock.now().timestamp())
    step = 2 * SWEEP_EVERY  # every other run, to keep the test short; the spacing is in the window, not the step
    failed_at = None
    for n in range(int(26 * 3600 / step)):
        backend.clock.advance(step)
        if sender.sweep().failed:
            failed_at = (n + 1) * step
            break
    assert failed_at is not None, "never failed: every delivery must end"
    assert 24 * 3600 <= failed_at <= 25 * 3600 + step
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.FAILED and "lost" in (stored.callback_error or "")
    assert not _indexed(backend, job)
    assert runtime.MAX_SWEEPS <= len(rec.sent) <= 30, f"{len(rec.sent)} re-sends in 24 h"


def test_a_lost_verdict_that_loses_to_a_recorded_attempt_keeps_the_index_row(backend: Backend) -> None:
    """The sweep reads the job, finds it lost (its 24 h over, 6 re-sends unrecorded) and records it failed; the
    re-sent attempt lands first (recorded between the sweep's read and its write): the webhook goes on, indexed."""
    job = finished_job(backend, ago=timedelta(seconds=1))
    sender = Recorder().sender(backend)
    key = index_key(job.tenant, job.id)
    for _ in range(400):  # up to the point where the next look fails it
        ix = next((r for r in WebhookStore.of(backend.stores).due(backend.clock.now() + timedelta(days=3), "", 10)
                   if r.key == key), None)
        assert ix is not None, "failed as lost before its 24 hours were over"
        if ix.sweeps >= runtime.MAX_SWEEPS and ix.due_at - job.finished_at >= timedelta(hours=24):
            break
        backend.clock.advance(2 * SWEEP_EVERY)
        sender.sweep()
    else:
        pytest.fail("never due to be failed")
    backend.clock.advance(ix.due_at.timestamp() - backend.clock.now().timestamp() + 1)
    jobs = backend.stores.jobs
    real_get = jobs.get

    def get_then_an_attempt_lands(tenant: str, job_id: str, **kw: object) -> Job:
        got = real_get(tenant, job_id, **kw)  # type: ignore[arg-type]
        if job_id == job.id:
            monkeypatch_undo()
            fresh = real_get(tenant, job_id, with_input=True)
            assert Lifecycle(backend.stores).record_callback(fresh, WebhookStatus.RETRYING, 1, "failed: HTTP 500")
        return got

    def monkeypatch_undo() -> None:
        jobs.get = real_get  # type: ignore[method-assign]

    jobs.get = get_then_an_attempt_lands  # type: ignore[method-assign]
    try:
        report = sender.sweep()
    finally:
        monkeypatch_undo()
    assert report.failed == []
    stored_job = row(backend, job)
    assert stored_job.callback_status == WebhookStatus.RETRYING and stored_job.callback_attempts == 1
    assert _indexed(backend, job), "a webhook still retrying lost its index row"


def test_a_late_delivered_settle_that_did_not_apply_keeps_the_index_row(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two messages of attempt 2 (a late one and the sweep's re-send): one fails and queues attempt 3, which is
    recorded too; the other's POST then succeeds, but its record (attempt 2) no longer applies. The webhook is still
    retrying (attempt 4 queued), so its index row must stay: the sweep is what finds attempt 4 if it is lost."""
    public_dns(monkeypatch)
    job = finished_job(backend, attempts=1, webhook="retrying", index=True)
    rec = Recorder(answers=[False, False])
    fast = rec.sender(backend)
    started = time.time()
    msg2 = WebhookMessage(job.tenant, job.id, delivery_id(job), 2, started).encode()

    def slow_ok(url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
        # While this POST is in flight, the twin message of attempt 2 fails, and so does attempt 3.
        assert fast.handle(msg2) == "retrying"
        assert fast.handle(rec.sent[-1][0].encode()) == "retrying"
        return DeliveryOutcome(True, "HTTP 200")

    slow = WebhookSender(backend.stores, transport=slow_ok, send=rec.send)
    assert slow.handle(msg2) != "delivered"
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.RETRYING and stored.callback_attempts == 3
    assert _indexed(backend, job), "a webhook still retrying lost its index row"
    assert backend.depth(f"{_callbacks()}-poison") == 0


def test_a_refusal_that_did_not_apply_is_not_a_dead_letter(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, for a send-time refusal (the host turned private) whose record lost to a later attempt."""
    job = finished_job(backend, attempts=1, webhook="retrying", index=True)
    msg2 = WebhookMessage(job.tenant, job.id, delivery_id(job), 2, time.time()).encode()
    rec = Recorder(answers=[False, False])

    def resolve(host: str, port: int) -> list[str]:
        # The lookup of this attempt; meanwhile attempt 2's twin fails and is recorded, and so is attempt 3 (and
        # the DNS answer has turned private).
        monkeypatch.setattr(runtime_core, "_resolve", lambda h, p: ["93.184.216.34"])
        assert rec.sender(backend).handle(msg2) == "retrying"
        assert rec.sender(backend).handle(rec.sent[-1][0].encode()) == "retrying"
        return ["10.0.0.5"]

    from shared.core import webhooks as runtime_core

    monkeypatch.setattr(runtime_core, "_resolve", resolve)
    assert rec.sender(backend).handle(msg2) != "refused"
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.RETRYING and stored.callback_attempts == 3
    assert _indexed(backend, job)
    assert backend.depth(f"{_callbacks()}-poison") == 0


def _callbacks() -> str:
    from shared.config.settings import get_settings

    return get_settings().callbacks_queue


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
@pytest.mark.parametrize("answer", [True, False])
def test_a_record_whose_answer_is_lost_is_decided_by_re_reading(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, mode: str, answer: bool
) -> None:
    """The outcome's write commits and its answer is lost (or the SDK's retry of it comes back 412): the sender
    re-reads, sees its own write, and goes on as if the answer had arrived: one next attempt queued (not none,
    which would wait for the sweep; not two), or delivered and out of the index."""
    public_dns(monkeypatch)
    job = finished_job(backend, ago=timedelta(seconds=1))
    rec = Recorder(answers=[answer])
    status = "delivered" if answer else "retrying"
    rule = backend.faults.arm("table", mode, contains=f'"callback_status":"{status}"', count=1)
    msg = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, time.time()).encode()
    assert rec.sender(backend).handle(msg) == status
    assert rule.hits == 1
    stored = row(backend, job)
    assert (stored.callback_status, stored.callback_attempts) == (WebhookStatus(status), 1)
    assert [m.attempt for m, _ in rec.sent] == ([] if answer else [2])
    assert _indexed(backend, job) is (not answer)
    assert rec.sender(backend).handle(msg) in ("already-delivered", "stale-attempt") and len(rec.calls) == 1
