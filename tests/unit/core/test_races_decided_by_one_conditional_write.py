"""Races decided by one conditional write each, on the fake and on Azurite: the lifecycle's invariants."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Any

from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import LostClaim
from shared.core.jobs import JobError, Status
from shared.core.lifecycle import Ending, Lifecycle, StoredResult
from shared.runtime.worker import JobLease
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, executions, job, reaper, submit, worker


def _together(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` in ``n`` threads released at the same instant; returns results (or exceptions)."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as err:
            out[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _text(b: Backend) -> str:
    from tests.support.backends import _decode

    client = b.raw_queue(get_settings().jobs_queue)
    return _decode(next(iter(client.peek_messages(max_messages=1))).content)


def test_duplicate_deliveries_run_the_pipeline_once(backend: Backend) -> None:
    j = submit(backend).job
    text = _text(backend)
    outcomes = _together(4, lambda _: worker(backend).handle(text, 1))
    assert sorted(o for o in outcomes if not str(o).startswith("noop")) == ["succeeded"], outcomes
    assert executions(j.id) == 1 and job(backend, j.id).attempts == 1


def test_a_cancel_racing_heartbeats_is_never_lost(backend: Backend) -> None:
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert claimed.status == "running"

    def beat(i: int) -> None:
        if i == 0:
            life.cancel(job(backend, j.id))
            return
        lease = JobLease(life, claimed)
        for _ in range(10):
            lease.renew(None)

    outcomes = _together(3, beat)
    # The cancel itself must not give up (it used to lose 8 lockstep rounds to the heartbeats).
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    renewed = life.renew(claimed, None)
    final = renewed.row
    assert renewed.applied and final.cancel_requested and final.status == Status.RUNNING and final.owner == claimed.owner
    cancelled = life.finish(final, Ending(Status.RETRYING, JobError.of("E", "x"))).row
    assert cancelled.status == Status.CANCELLED  # a cancelled job is not retried


def test_two_reapers_requeue_a_stale_job_once(backend: Backend) -> None:
    j = submit(backend).job
    client = backend.raw_queue(get_settings().jobs_queue)
    for m in list(client.receive_messages(messages_per_page=32, max_messages=32)):
        client.delete_message(m, pop_receipt=m.pop_receipt)
    assert Lifecycle(backend.stores).claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).applied
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    reports = _together(3, lambda _: reaper(backend).run())
    assert sum(len(r.requeued_stale) for r in reports) == 1, [r.summary() for r in reports]
    assert backend.depth() == 1
    again = job(backend, j.id)
    assert again.status == Status.RETRYING and again.requeues == 1


def test_a_renewal_after_the_reaper_took_the_job_loses_the_claim(backend: Backend) -> None:
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert claimed.status == "running"
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 1)
    assert reaper(backend).run().requeued_stale == [j.id]
    try:
        JobLease(life, claimed).renew(None)
    except LostClaim:
        pass
    else:
        raise AssertionError("a zombie renewed a job the reaper had handed on")
    assert not life.finish(claimed, Ending(Status.SUCCEEDED)).applied  # and its late outcome is discarded
    assert not life.renew(claimed, None).applied  # the lifecycle's answer the lease turns into LostClaim
    assert job(backend, j.id).status == Status.RETRYING


def test_exactly_one_finisher_fans_in(backend: Backend) -> None:
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert claimed.status == "running"
    n = 6
    life.create_chunks(TENANT, j.id, "s", [
        Chunk(TENANT, j.id, "s", i, ChunkStatus.QUEUED, 1, "m:f", of=n, plan="p") for i in range(n)
    ])
    waiting = life.suspend(claimed, "s")
    assert waiting.applied and waiting.row.status == Status.WAITING
    running = [life.claim(backend.stores.chunks.get(TENANT, j.id, "s", i), 1) for i in range(n)]
    assert all(c.applied for c in running)
    before = backend.depth()

    def finish(i: int) -> str:
        chunk = running[i].row
        life.finish(chunk, Ending(Status.SUCCEEDED, result=StoredResult(f"o{i}", 0)))
        return life.refill_or_fan_in(TENANT, j.id, "s")

    outcomes = _together(n, finish)
    assert outcomes.count("fired") == 1, outcomes
    assert backend.depth() == before + 1  # one resume message
    fired = job(backend, j.id)
    assert fired.fan_in_at is not None and fired.fan_ins == 1


def test_the_last_delivery_fails_a_job_it_holds(backend: Backend) -> None:
    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)]).job
    assert j.input_blob
    # The worker can read and claim, then breaks before it can run (the input blob cannot be read).
    backend.faults.arm("blob", "refuse", method="GET", count=1000)
    outcome = backend.deliver(lambda text, _n: worker(backend).handle(text, 5))
    assert outcome is not None and outcome.startswith("error:"), outcome
    backend.faults.disarm()
    failed = job(backend, j.id)
    assert failed.status == Status.FAILED and failed.error is not None and failed.error.type == "PoisonMessage"
