"""Jobs in flight take none of the webhook sweep's share (webhooks45, docs/webhooks.md "Known limits").

Each queued, parked or running job with a webhook used to be looked at every 5 minutes, each look one of its
tenant's 10 a run: a tenant with many jobs in flight had a finished job's lost message wait until the sweep had
cycled through all of them (3.5 days at 10,000). Now the first look at a job in flight sets its index row never
due (``IN_FLIGHT_DUE``) and the job's terminal write makes it due; rows from before (due every 5 minutes) move at
their next look, and the daily heal makes due a finished job's row whose "due" write was lost. On the fake here,
on Azurite in the twin (tests/integration/webhooks/test_webhook_sweep_in_flight_on_azurite.py).
"""

from __future__ import annotations

from datetime import timedelta

from shared.core.jobs import Job, Status, new_job_id
from shared.core.lifecycle import Ending, Lifecycle
from shared.core.webhooks import IN_FLIGHT_DUE
from shared.runtime import webhooks as runtime
from shared.storage.webhook_store import IndexRow, WebhookStore, index_key
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job

IN_FLIGHT = 3 * runtime.SWEEP_PER_TENANT  # three runs' worth of one tenant's share


def _in_flight(backend: Backend, tenant: str, n: int, status: Status = Status.RUNNING) -> list[Job]:
    """``n`` jobs with a webhook still in flight, indexed as submission (or a host from before) left them: due."""
    now = backend.clock.now()
    store = WebhookStore.of(backend.stores)
    jobs = []
    for i in range(n):
        jid = new_job_id(int(now.timestamp() * 1000) - 1000 - i)
        store.put_index_row(IndexRow(tenant, jid, due_at=now))
        jobs.append(backend.stores.jobs.create(Job(
            tenant=tenant, id=jid, pipeline="echo", status=status, params={}, created_at=now, available_at=now,
            max_attempts=3, callback_url="https://hooks.example.com/x", callback_status="pending")))
    return jobs


def _sweep_every_5_minutes(backend: Backend, sender: runtime.WebhookSender, runs: int) -> list[runtime.SweepReport]:
    reports = []
    for _ in range(runs):
        backend.clock.advance(300.5)
        reports.append(sender.sweep())
    return reports


def _finish_with_the_send_lost(backend: Backend, job: Job) -> None:
    """The worker finishes the job; the webhook's first message is never queued (the queue refuses it)."""
    claimed = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    backend.faults.arm("queue", "refuse", method="POST", count=100)
    try:
        assert Lifecycle(backend.stores).finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED)).applied
    finally:
        backend.faults.disarm()


def test_a_tenants_jobs_in_flight_do_not_delay_its_finished_jobs_lost_message(backend: Backend) -> None:
    jobs = _in_flight(backend, "busy", IN_FLIGHT)
    rec = Recorder()
    sender = rec.sender(backend)
    # Every row of a job in flight is looked at once (as rows from before webhooks45 are: due every 5 minutes).
    looked = sum(r.looked for r in _sweep_every_5_minutes(backend, sender, IN_FLIGHT // runtime.SWEEP_PER_TENANT))
    assert looked == IN_FLIGHT
    # From then on they are never due: the runs look at nothing (before: 10 of them a run, again and again).
    assert [r.looked for r in _sweep_every_5_minutes(backend, sender, 2)] == [0, 0]
    # One of them ends and its first message is lost: it is the tenant's only due row, re-sent by the first run
    # after its window (5 minutes), whatever the tenant has in flight.
    ended = jobs[IN_FLIGHT // 2]
    _finish_with_the_send_lost(backend, ended)
    [report] = _sweep_every_5_minutes(backend, sender, 1)
    assert report.resent == [ended.id] and report.looked == 1
    assert [(m.job_id, m.attempt) for m, _ in rec.sent] == [(ended.id, 1)]


def test_a_row_from_before_moves_at_its_next_look_and_a_parked_job_counts_as_in_flight(backend: Backend) -> None:
    [queued] = _in_flight(backend, "t", 1, Status.QUEUED)
    store = WebhookStore.of(backend.stores)
    assert store.keys()[index_key("t", queued.id)] != IN_FLIGHT_DUE  # due every 5 minutes, as written before
    backend.clock.advance(1)
    assert Recorder().sender(backend).sweep().looked == 1
    assert store.keys()[index_key("t", queued.id)] == IN_FLIGHT_DUE


def test_a_job_that_ends_between_the_sweeps_read_and_its_write_is_still_due(backend: Backend) -> None:
    """The sweep reads the job (running), the job ends and its row is made due, then the sweep writes "in flight":
    the sweep's second read (write, then read) sees the job ended and makes the row due again."""
    [job] = _in_flight(backend, "t", 1)
    sender = Recorder().sender(backend)
    write = sender.index.write_index_row
    raced: list[bool] = []

    def write_after_the_job_ended(row: IndexRow | None, fields: dict[str, object]) -> IndexRow:
        if fields.get("due_at") == IN_FLIGHT_DUE and not raced:
            raced.append(True)
            _finish_with_the_send_lost(backend, job)  # lands between the sweep's read and this write
        return write(row, fields)

    sender.index.write_index_row = write_after_the_job_ended  # type: ignore[method-assign]
    backend.clock.advance(1)
    sender.sweep()
    assert raced
    due_at = WebhookStore.of(backend.stores).keys()[index_key("t", job.id)]
    assert due_at is not None and due_at < backend.clock.now() + timedelta(hours=1)
    backend.clock.advance(runtime.window(0).total_seconds() + 1)
    assert Recorder().sender(backend).sweep().resent == [job.id]


def test_the_daily_heal_makes_due_a_finished_jobs_row_left_in_flight(backend: Backend) -> None:
    """A terminal write whose "due" write was lost (or made by a host from before webhooks45 after the sweep set
    the row in flight) leaves a finished job's row never due: the daily heal finds it."""
    job = finished_job(backend, "t", index=False)
    store = WebhookStore.of(backend.stores)
    store.put_index_row(IndexRow("t", job.id, due_at=IN_FLIGHT_DUE))
    rec = Recorder()
    report = rec.sender(backend).sweep()  # the first run of a process heals
    assert report.healed == 1
    backend.clock.advance(1)
    assert rec.sender(backend).sweep().resent == [job.id]


def test_the_terminal_write_makes_the_row_due_before_the_message_goes(backend: Backend) -> None:
    """The order matters: a row made due after the first delivery settled (and removed it) would be a stray."""
    [job] = _in_flight(backend, "t", 1)
    store = WebhookStore.of(backend.stores)
    store.put_index_row(IndexRow("t", job.id, due_at=IN_FLIGHT_DUE))
    order: list[str] = []
    mark = store.mark_due
    claimed = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    import shared.core.webhooks as core

    def factory(stores: object) -> core.MarkDue:
        def marked(tenant: str, job_id: str, due_at: object) -> None:
            order.append("due")
            mark(tenant, job_id, due_at)  # type: ignore[arg-type]
        return marked

    saved = list(core._MARK_DUE)
    core.register_index(factory)
    send = backend.stores.messages.send

    def sent(message: object, delay: object = None) -> None:
        order.append("send")
        send(message, delay)  # type: ignore[arg-type]

    try:
        backend.stores.messages.send = sent  # type: ignore[method-assign]
        assert Lifecycle(backend.stores).finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED)).applied
    finally:
        core._MARK_DUE[:] = saved
        backend.stores.messages.send = send  # type: ignore[method-assign]
    assert order == ["due", "send"]
    due_at = store.keys()[index_key("t", job.id)]
    assert due_at is not None and due_at < backend.clock.now() + timedelta(hours=1)
