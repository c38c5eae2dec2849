"""Storage and queue operations per webhook delivery (Azure's bill), before and after webhooks45.

* A delivery's attempts cost what they cost before: the circuit is in memory (no operation), and an attempt it
  does not let through costs less than a tried one (no secrets read).
* A job in flight: its index row was read-and-written by the sweep every 5 minutes (24 operations an hour of the
  job's life); now one look sets it in flight (a job read, the row's conditional write, the job read again) and the
  terminal write makes it due (one upsert, just before it since platform46): 4 in all, whatever the job's length. A
  job that ends before the sweep's first look (5 minutes) pays the one upsert more.
* The day's first run: once the heal is recorded done (two clean days, platform46) it costs what any idle run costs,
  2; before, the heal's cross-partition query of the table, its query of the index's keys and the cursor's write
  came on top (5), and the query grew with the table on Azure (a page per 1,000 rows scanned).

On the fake here (its own count), on Azurite in the twin (the clients' response meter).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from shared.core.jobs import Status
from shared.core.lifecycle import Ending, Lifecycle
from shared.core.webhooks import WebhookMessage, delivery_id
from shared.runtime import webhooks as runtime
from shared.runtime.webhook_circuit import HOST_FAILURES, NOT_TRIED
from shared.runtime.webhooks import HEAL_CLEAN_RUNS, HEAL_EVERY, DeliveryOutcome, WebhookSender
from tests.support.backends import Backend
from tests.support.webhooks import finished_job, public_dns, row


def _count(backend: Backend, call: object) -> tuple[int, Counter[str]]:
    before = backend.ops()
    assert callable(call)
    call()
    diff = backend.ops() - before
    diff.pop("queue:put-queue", None)  # a queue's creation on first use, not the delivery's
    return sum(diff.values()), diff


def _sender(backend: Backend, ok: bool) -> WebhookSender:
    return WebhookSender(backend.stores, transport=lambda *a: DeliveryOutcome(ok, "HTTP 200" if ok else "failed: HTTP 500"))


def test_an_attempt_costs_the_same_and_one_not_tried_costs_less(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    public_dns(monkeypatch)
    good = finished_job(backend, index=False)
    n_ok, _ = _count(backend, lambda: _sender(backend, True).handle(
        WebhookMessage(good.tenant, good.id, delivery_id(good), 1, 0).encode()))
    # A job read, the secrets read, the conditional write, the index row's delete: as before.
    assert n_ok == 4
    failing = _sender(backend, False)
    jobs = [finished_job(backend, index=False) for _ in range(HOST_FAILURES + 1)]
    counts = []
    for job in jobs:
        n, _ = _count(backend, lambda job=job: failing.handle(
            WebhookMessage(job.tenant, job.id, delivery_id(job), 1, runtime.time.time()).encode()))
        counts.append(n)
    # Tried: a job read, the secrets read, the conditional write, the next attempt's send.
    assert counts[:HOST_FAILURES] == [4] * HOST_FAILURES
    # Not tried (the host failed 3 times in a row): no secrets read.
    assert row(backend, jobs[-1]).callback_error == NOT_TRIED and counts[-1] == 3


def test_a_job_in_flight_costs_the_sweep_three_operations_not_24_an_hour(backend: Backend) -> None:
    sender = WebhookSender(backend.stores)
    sender.sweep()  # a process's first run heals the index: not the job's cost
    job = finished_job(backend, status=Status.RUNNING, ago=timedelta(0))
    idle = 2  # every run: the cursor row's read and one query of the due rows
    on_the_job = []
    for _ in range(12):  # an hour of 5-minute sweeps while the job runs
        backend.clock.advance(300.5)
        n, _ = _count(backend, sender.sweep)
        on_the_job.append(n - idle)
    # Before webhooks45: [2] * 12 (a job read and the row's write every run), 24 an hour.
    assert on_the_job == [3] + [0] * 11, on_the_job
    claimed = backend.stores.jobs.get(job.tenant, job.id, with_input=True)
    life = Lifecycle(backend.stores)
    n_end, diff_end = _count(backend, lambda: life.finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED)))
    # The row made due (one upsert, just before the write), the terminal write (one) and the first message's send
    # (one); before webhooks45: 2.
    assert diff_end["queue:send"] == 1 and n_end == 3, diff_end
    backend.clock.advance(runtime.window(0).total_seconds() + 1)
    # Its first delivery lost: the next run looks at it (a job read), re-sends it and writes the row (2 more).
    n, diff = _count(backend, sender.sweep)
    assert n - idle == 3 and diff["queue:send"] == 1


def test_the_days_first_run_costs_the_idle_two_once_the_heal_is_recorded(backend: Backend) -> None:
    sender = WebhookSender(backend.stores)
    finished_job(backend, webhook="delivered", attempts=1, index=False)  # a settled webhook: the heal's scan reads it
    first, _ = _count(backend, sender.sweep)
    # The cursor row, the index's keys, the table scan, the cursor's write, the due rows: as before platform46.
    assert first == 5, first
    for _ in range(HEAL_CLEAN_RUNS - 1):
        backend.clock.advance(HEAL_EVERY.total_seconds() + 1)
        sender.sweep()
    backend.clock.advance(HEAL_EVERY.total_seconds() + 1)
    n, diff = _count(backend, sender.sweep)
    assert n == 2, diff  # the cursor row and the due rows' query: no scan, whatever the table holds
