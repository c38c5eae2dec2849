"""The webhook sweep needs no daily scan of the table (platform46, docs/webhooks.md "Delivery").

Until platform46 a job's terminal write made its webhook-index row due *after* it landed, so a process that died
in between (or whose "due" write failed) left a finished job's row never due (``IN_FLIGHT_DUE``, set by the sweep
while the job ran), and only the sweep's daily heal found it: one cross-partition query of the jobs table, which
Azure pages per 1,000 rows scanned. Now the row is made due *before* the terminal write (``webhooks.job_ending``),
the sweep's "in flight" write is conditional on the row it read (a mark made since wins), and a row whose job
announced its end but is still in flight is looked at again hourly for 24 h instead of never. The heal runs only
until two heals in a row found nothing (the rows of the code before), then never again.

On the fake here, on Azurite in the twin (``tests/integration/webhooks/test_webhook_heal_bounded_on_azurite.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

import shared.core.webhooks as core
from shared.core.jobs import Job, Status, new_job_id
from shared.core.lifecycle import Ending, Lifecycle
from shared.core.webhooks import IN_FLIGHT_DUE
from shared.runtime import webhooks as runtime
from shared.storage.webhook_store import IndexRow, WebhookStore
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job


def _running(backend: Backend, tenant: str = "t") -> Job:
    """A running job with a webhook, indexed as submission left it (due)."""
    now = backend.clock.now()
    jid = new_job_id(int(now.timestamp() * 1000) - 1000)
    WebhookStore.of(backend.stores).put_index_row(IndexRow(tenant, jid, due_at=now))
    return backend.stores.jobs.create(Job(
        tenant=tenant, id=jid, pipeline="echo", status=Status.RUNNING, params={}, created_at=now, available_at=now,
        max_attempts=3, callback_url="https://hooks.example.com/x", callback_status="pending"))


def _healed_for_good(backend: Backend, sender: runtime.WebhookSender) -> None:
    """Run the daily heals until they are recorded done (two in a row that found nothing)."""
    for _ in range(runtime.HEAL_CLEAN_RUNS):
        sender.sweep()
        backend.clock.advance(runtime.HEAL_EVERY.total_seconds() + 1)
    assert WebhookStore.of(backend.stores).cursor().heal_done_at is not None


@contextmanager
def _dies_after_the_terminal_write(backend: Backend) -> Iterator[None]:
    """The process dies right after the write that made the job terminal: nothing after it happens (no message)."""
    saved = core.job_ended
    core.job_ended = lambda job, send: None  # type: ignore[assignment]
    try:
        yield
    finally:
        core.job_ended = saved


def _finish(backend: Backend, job: Job) -> None:
    claimed = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    assert Lifecycle(backend.stores).finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED)).applied


def _stored(backend: Backend, job: Job) -> IndexRow:
    got = WebhookStore.of(backend.stores).index_row(job.tenant, job.id)
    assert got is not None
    return got


def _resent_within(backend: Backend, sender: runtime.WebhookSender, job: Job, runs: int) -> int | None:
    """The 5-minute run (1-based) that re-sends ``job``'s lost message, within ``runs``; None if none does."""
    for n in range(1, runs + 1):
        backend.clock.advance(300.5)
        if job.id in sender.sweep().resent:
            return n
    return None


def test_a_crash_right_after_the_terminal_write_is_found_by_the_5_minute_sweep(backend: Backend) -> None:
    rec = Recorder()
    sender = rec.sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    backend.clock.advance(1)
    assert sender.sweep().looked == 1 and _stored(backend, job).due_at == IN_FLIGHT_DUE  # in flight: never due
    with _dies_after_the_terminal_write(backend):
        _finish(backend, job)
    # Before platform46 the row stayed never due and only the daily heal (a scan of the table) found it.
    assert _resent_within(backend, sender, job, 3) is not None
    assert [m.job_id for m, _ in rec.sent] == [job.id]


def test_a_mark_between_the_sweeps_read_and_its_in_flight_write_wins(backend: Backend) -> None:
    """The sweep reads the row and the job (running); the job's end is announced (the row made due), then the
    sweep's "in flight" write, then the terminal write lands after the sweep's second read of the job, and the
    process dies. The conditional write lost to the mark, so the row is still due."""
    rec = Recorder()
    sender = rec.sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    write = sender.index.write_index_row
    marked: list[bool] = []

    def mark_first(row: IndexRow | None, fields: dict[str, object]) -> IndexRow:
        if not marked:
            marked.append(True)
            WebhookStore.of(backend.stores).mark_due(job.tenant, job.id, backend.clock.now() + core.SWEEP_AFTER)
        return write(row, fields)

    sender.index.write_index_row = mark_first  # type: ignore[method-assign]
    backend.clock.advance(1)
    report = sender.sweep()
    assert marked and report.errors == 0
    assert _stored(backend, job).due_at < backend.clock.now() + timedelta(hours=1)
    # The terminal write lands now (its mark was the one above), and nothing after it.
    saved = core.job_ending
    core.job_ending = lambda *a: None  # type: ignore[assignment]
    try:
        with _dies_after_the_terminal_write(backend):
            _finish(backend, job)
    finally:
        core.job_ending = saved
    sender.index.write_index_row = write  # type: ignore[method-assign]
    assert _resent_within(backend, sender, job, 3) is not None


def test_a_writer_stalled_past_the_rows_5_minutes_is_looked_at_hourly_not_never(backend: Backend) -> None:
    rec = Recorder()
    sender = rec.sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    backend.clock.advance(1)
    sender.sweep()  # in flight
    # The end is announced, then the writer stalls: the sweep finds the row due and the job still running.
    WebhookStore.of(backend.stores).mark_due(job.tenant, job.id, backend.clock.now() + core.SWEEP_AFTER)
    backend.clock.advance(core.SWEEP_AFTER.total_seconds() + 1)
    assert sender.sweep().looked == 1
    parked = _stored(backend, job).due_at
    assert abs(parked - (backend.clock.now() + core.ENDING_RECHECK)) < timedelta(minutes=1), parked  # not never
    saved = core.job_ending
    core.job_ending = lambda *a: None  # type: ignore[assignment]
    try:
        with _dies_after_the_terminal_write(backend):
            _finish(backend, job)  # the stalled terminal write lands, and the process dies
    finally:
        core.job_ending = saved
    n = _resent_within(backend, sender, job, 20)
    assert n is not None and n <= 14, n  # the hourly look, then its window


def test_an_announced_end_that_never_lands_is_looked_at_for_24_hours_then_never(backend: Backend) -> None:
    sender = Recorder().sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    WebhookStore.of(backend.stores).mark_due(job.tenant, job.id, backend.clock.now() + core.SWEEP_AFTER)
    looks = 0
    for _ in range(26 * 12):  # 26 hours of 5-minute runs
        backend.clock.advance(300.5)
        looks += sender.sweep().looked
    assert looks <= 25, looks  # hourly while the announcement is under 24 h old
    assert _stored(backend, job).due_at == IN_FLIGHT_DUE


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_an_in_flight_write_whose_answer_is_lost_is_decided_by_re_reading(backend: Backend, mode: str) -> None:
    sender = Recorder().sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    rule = backend.faults.arm("table", mode, method="MERGE", contains="3000-01-01", count=1)
    backend.clock.advance(1)
    report = sender.sweep()
    assert rule.hits == 1 and report.errors == 0 and report.looked == 1
    assert _stored(backend, job).due_at == IN_FLIGHT_DUE
    backend.clock.advance(300.5)
    assert sender.sweep().looked == 0


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_a_mark_whose_answer_is_lost_still_ends_the_job_once_with_its_row_due(backend: Backend, mode: str) -> None:
    rec = Recorder()
    sender = rec.sender(backend)
    _healed_for_good(backend, sender)
    job = _running(backend)
    backend.clock.advance(1)
    sender.sweep()  # in flight
    rule = backend.faults.arm("table", mode, contains='"ending_at"', count=1)
    with _dies_after_the_terminal_write(backend):
        _finish(backend, job)
    assert rule.hits == 1
    assert backend.stores.jobs.get(job.tenant, job.id).status == Status.SUCCEEDED
    assert _stored(backend, job).due_at < backend.clock.now() + timedelta(hours=1)
    assert _resent_within(backend, sender, job, 3) is not None


def test_the_heal_stops_after_two_clean_days_and_the_sweep_then_never_scans(backend: Backend) -> None:
    sender = Recorder().sender(backend)
    old = finished_job(backend, index=False)  # a webhook from before the index: the heal finds it
    assert sender.sweep().healed == 1
    backend.clock.advance(runtime.HEAL_EVERY.total_seconds() + 1)
    sender.sweep()  # delivered or re-sent; nothing new to heal: clean 1
    finished_job(backend, "other", index=False)  # a host of the code before leaves another: the count starts again
    backend.clock.advance(runtime.HEAL_EVERY.total_seconds() + 1)
    assert sender.sweep().healed == 1
    store = WebhookStore.of(backend.stores)
    assert store.cursor().heal_done_at is None
    for _ in range(runtime.HEAL_CLEAN_RUNS):
        backend.clock.advance(runtime.HEAL_EVERY.total_seconds() + 1)
        assert sender.sweep().healed == 0
    assert store.cursor().heal_done_at is not None
    # From then on no run scans the table: the first run of a day costs what any run costs.
    scans: list[str] = []
    scan = backend.stores.jobs.scan

    def counted(query: str, params: dict[str, object]) -> Iterator[Job]:
        scans.append(query)
        return scan(query, params)  # type: ignore[arg-type]

    backend.stores.jobs.scan = counted  # type: ignore[method-assign]
    try:
        finished_job(backend, "late", index=False)  # not looked for any more (the deploy note in docs/webhooks.md)
        for _ in range(3):
            backend.clock.advance(runtime.HEAL_EVERY.total_seconds() + 1)
            assert sender.sweep().healed == 0
    finally:
        backend.stores.jobs.scan = scan  # type: ignore[method-assign]
    assert scans == [] and old.id
