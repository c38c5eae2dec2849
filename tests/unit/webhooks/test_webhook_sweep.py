"""The webhook sweep on the fake and on Azurite: it finds every lost delivery, fairly, and ends what stays lost."""

from __future__ import annotations

import base64
import time
from datetime import timedelta

import pytest

from shared.core.webhooks import WebhookMessage, WebhookStatus, delivery_id
from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import MAX_SWEEPS
from shared.storage.webhook_store import IndexRow, WebhookStore, index_key
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job, public_dns, row


def test_a_lost_first_delivery_is_sent_again_by_the_next_sweep(backend: Backend) -> None:
    job = finished_job(backend)
    rec = Recorder()
    report = rec.sender(backend).sweep()
    assert report.resent == [job.id]
    [(msg, delay)] = rec.sent
    assert (msg.job_id, msg.attempt, msg.delivery, delay) == (job.id, 1, delivery_id(job), 0.0)
    # Just re-sent: the next sweep leaves it alone until its window has passed again.
    assert rec.sender(backend).sweep().resent == []


def test_one_tenants_stuck_webhooks_do_not_starve_another_tenants_lost_one(backend: Backend) -> None:
    for _ in range(100):
        finished_job(backend, "a-stuck")
    lost = finished_job(backend, "b-other")
    rec = Recorder()
    report = rec.sender(backend).sweep()
    assert lost.id in report.resent, "the other tenant's lost webhook is re-sent on this very sweep"
    assert sum(1 for m, _ in rec.sent if m.tenant == "a-stuck") <= runtime.SWEEP_PER_TENANT
    # The stuck tenant's other rows get their turn on the following sweeps, its share at a time.
    backend.clock.advance(1)
    second = rec.sender(backend).sweep()
    assert len(second.resent) == runtime.SWEEP_PER_TENANT and lost.id not in second.resent


def test_the_budget_carries_on_where_the_last_sweep_stopped(backend: Backend) -> None:
    tenants = [f"t{i:02d}" for i in range(6)]
    jobs = {t: finished_job(backend, t) for t in tenants}
    rec = Recorder()
    first = rec.sender(backend).sweep(budget=3)
    assert len(first.resent) == 3
    second = rec.sender(backend).sweep(budget=3)
    assert sorted(first.resent + second.resent) == sorted(j.id for j in jobs.values())


def test_a_retry_whose_message_is_lost_is_sent_again_then_failed_after_the_cap(backend: Backend) -> None:
    # Attempt 1 was recorded (retrying); attempt 2's message then failed on every delivery and was poisoned.
    job = finished_job(backend, attempts=1, webhook="retrying")
    rec = Recorder()
    sender = rec.sender(backend)
    sender.sweep()  # the first look at a retrying row: its window starts now
    assert rec.sent == []
    for n in range(MAX_SWEEPS):
        backend.clock.advance(runtime.resend_window(1, n).total_seconds() + 1)  # the re-sends space out
        assert sender.sweep().resent == [job.id], f"re-send {n + 1}"
        assert rec.sent[-1][0].attempt == 2
    # Six re-sends unrecorded, but the webhook's 24 hours are not over: re-sent again, not failed (review45w).
    backend.clock.advance(runtime.resend_window(1, MAX_SWEEPS).total_seconds() + 1)
    assert sender.sweep().resent == [job.id]
    backend.clock.advance(runtime.DEADLINE_SECONDS)
    report = sender.sweep()
    assert report.failed == [job.id]
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.FAILED and "lost" in (stored.callback_error or "")
    assert list(WebhookStore.of(backend.stores).due(stored.finished_at + timedelta(days=2), "", 10)) == [], \
        "a failed webhook leaves the index"


def test_progress_resets_the_count_of_lost_sends(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    public_dns(monkeypatch)
    job = finished_job(backend)
    rec = Recorder(answers=[False])
    sender = rec.sender(backend)
    assert sender.sweep().resent == [job.id]
    msg, _ = rec.sent[-1]
    assert sender.handle(msg.encode()) == "retrying"  # an attempt recorded: the webhook is alive again
    backend.clock.advance(runtime.window(0).total_seconds() + 1)
    sender.sweep()
    assert sender.handle(rec.sent[-1][0].encode()) == "delivered"
    assert row(backend, job).callback_status == WebhookStatus.DELIVERED


def test_settled_and_vanished_jobs_leave_the_index(backend: Backend) -> None:
    done = finished_job(backend, webhook="delivered", attempts=1)
    gone = finished_job(backend)
    backend.stores.jobs.delete(row(backend, gone))
    report = Recorder().sender(backend).sweep()
    assert report.removed == 2 and report.resent == []
    store = WebhookStore.of(backend.stores)
    assert {r.key for r in store.due(backend.clock.now() + timedelta(days=1), "", 10)} \
        .isdisjoint({index_key(done.tenant, done.id), index_key(gone.tenant, gone.id)})


def test_a_duplicate_message_of_a_recorded_attempt_does_not_double_the_chain(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    job = finished_job(backend, index=False)
    rec = Recorder(answers=[False, False])
    sender = rec.sender(backend)
    msg = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, time.time()).encode()
    assert sender.handle(msg) == "retrying"
    assert sender.handle(msg) == "stale-attempt"
    assert [m.attempt for m, _ in rec.sent] == [2] and len(rec.calls) == 1


def test_a_webhook_written_before_the_index_is_found_by_the_daily_heal(backend: Backend) -> None:
    old = finished_job(backend, index=False)  # a row from before the index existed: pending, its message lost
    rec = Recorder()
    sender = rec.sender(backend)
    first = sender.sweep()
    assert first.healed == 1
    backend.clock.advance(1)
    assert old.id in first.resent + sender.sweep().resent
    # Healed once a day, not on every 5-minute run.
    finished_job(backend, "other", index=False)
    backend.clock.advance(600)
    assert sender.sweep().healed == 0
    backend.clock.advance(runtime.HEAL_EVERY.total_seconds())
    assert sender.sweep().healed == 1


def test_a_submission_with_a_webhook_is_indexed_before_its_job_row(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from shared.api.service import JobService
    from shared.core.errors import StorageUnavailable

    public_dns(monkeypatch)
    service = JobService(backend.stores)
    body = json.dumps({"pipeline": "echo", "input": {"x": 1}, "callback": {"url": "https://hooks.example.com/h"}})
    store = WebhookStore.of(backend.stores)
    # The job's insert is refused: the index row, written first, is there with no job; the sweep removes it.
    backend.faults.arm("table", "refuse", contains='"kind":"job"', count=1000)
    with pytest.raises(StorageUnavailable):
        service.submit("local", body.encode(), None)
    backend.faults.disarm()
    assert len(store.keys()) == 1
    backend.clock.advance(runtime.window(0).total_seconds() + 1)
    assert Recorder().sender(backend).sweep().removed == 1 and set(store.keys()) == set()
    # Accepted: indexed, and the stored URL is the normalised one.
    job = service.submit("local", body.replace("com/h", "com/café").encode(), None).job
    assert job.callback_url == "https://hooks.example.com/caf%C3%A9"
    assert set(store.keys()) == {index_key("local", job.id)}


def test_a_finished_jobs_webhook_goes_through_the_stores_message_port(backend: Backend) -> None:
    """The terminal write's delivery and the sender's next attempt reach the callbacks queue of the stores the
    lifecycle was given (the fake's own queue, or Azurite's), with the queue faults the other queues obey."""
    from shared.config.settings import get_settings
    from shared.core.jobs import Status
    from shared.core.lifecycle import Ending, Lifecycle
    from tests.support.scenarios import drain

    job = finished_job(backend, status=Status.RUNNING)  # running, with a webhook: its worker finishes it now
    life = Lifecycle(backend.stores)
    claimed = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert life.finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED)).applied
    callbacks = get_settings().callbacks_queue
    queue = backend.raw_queue(callbacks)
    (got,) = list(queue.receive_messages(max_messages=32, visibility_timeout=60))
    text = got.content if isinstance(got.content, str) else got.content.decode()
    msg = WebhookMessage.decode(base64.b64decode(text).decode())  # base64, as the queue trigger expects
    assert (msg.job_id, msg.attempt) == (job.id, 1) and msg.first_at > 0
    queue.delete_message(got, pop_receipt=got.pop_receipt)
    # The same port takes the faults: a refused send does not undo the terminal write (the sweep re-sends).
    other = finished_job(backend, status=Status.RUNNING)
    rule = backend.faults.arm("queue", "refuse", method="POST", count=100)
    row = backend.stores.jobs.get(other.tenant, other.id, with_input=True)
    assert life.finish(row.with_changes(owner=None), Ending(Status.FAILED)).applied
    backend.faults.disarm()
    assert rule.hits >= 1 and drain(backend, callbacks) == 0


def test_a_tenants_newer_in_flight_jobs_do_not_starve_its_own_older_lost_webhook(backend: Backend) -> None:
    """More due rows than its share in one tenant are looked at in turn, run after run.

    Job ids sort newest first, so a tenant that keeps 10 or more jobs with webhooks queued or running (each due
    again every 5 minutes) took its whole share with them on every run, and its older lost webhook was never
    re-sent. Each tenant's turn now continues where its last one stopped (found by an independent review).
    """
    from shared.core.jobs import Job, Status, new_job_id, utcnow
    from shared.storage.webhook_store import IndexRow

    lost = finished_job(backend, "a")  # older: a higher key
    now = utcnow()
    store = WebhookStore.of(backend.stores)
    for i in range(runtime.SWEEP_PER_TENANT + 2):  # newer jobs with webhooks, still queued
        jid = new_job_id(int(now.timestamp() * 1000) + 1000 + i)
        store.put_index_row(IndexRow("a", jid, due_at=now))
        backend.stores.jobs.create(Job(tenant="a", id=jid, pipeline="echo", status=Status.QUEUED, params={},
                                       created_at=now, available_at=now, max_attempts=3,
                                       callback_url="https://hooks.example.com/x", callback_status="pending"))
    rec = Recorder()
    resent: list[str] = []
    for _ in range(3):  # fifteen minutes of 5-minute sweeps
        backend.clock.advance(300.5)
        resent += rec.sender(backend).sweep().resent
    assert lost.id in resent, "the tenant's own lost webhook was never looked at"


def test_one_unreadable_job_row_does_not_stop_the_sweep_for_the_rows_after_it(backend: Backend) -> None:
    """A job row whose webhook status no version of the code knows is skipped and counted, not fatal."""
    bad = finished_job(backend, "a-bad", webhook="bogus")
    lost = finished_job(backend, "b-after")  # a later key than the bad one
    report = Recorder().sender(backend).sweep()
    assert lost.id in report.resent
    assert bad.id not in report.resent and report.errors >= 1


def test_due_rows_past_a_short_service_page_are_still_read(backend: Backend) -> None:
    """A filtered query may answer a short (even empty) page with a continuation token (the service stops a request
    after 1,000 rows scanned): the rows after it are due too and must not wait for a sweep that never reaches them."""
    store = WebhookStore.of(backend.stores)
    now = backend.clock.now()
    later = [IndexRow("tenant-a", f"{i:028x}", due_at=now + timedelta(days=1)) for i in range(6)]
    due = [IndexRow("tenant-b", f"{i:028x}", due_at=now - timedelta(minutes=1)) for i in range(3)]
    for r in later + due:
        store.put_index_row(r)
    if backend.fake is not None:
        backend.fake.rows_per_scan = 2  # each request looks at 2 rows: the not-due ones give short, empty pages
    assert [r.key for r in store.due(now, "", 10)] == [r.key for r in due]
