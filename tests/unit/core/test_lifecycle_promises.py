"""Findings of an independent review of the job life cycle, each a test that failed before its fix.

Each asserts what docs/architecture.md promises, on the in-memory fake and on Azurite.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.jobs import Status
from shared.core.lifecycle import Ending, Lifecycle, StageCheck, StoredResult
from shared.core.messages import JobMessage
from shared.core.names import result_blob_name
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, chunk_worker, drain, executions, job, reaper, submit, worker


def test_the_last_delivery_does_not_fail_a_job_whose_result_is_stored(backend: Backend) -> None:
    """Review finding 2: the last delivery failed a job whose result was already stored."""
    j = submit(backend).job
    # The pipeline succeeds and its result blob is stored; recording "succeeded" fails (Contended / 503s).
    backend.faults.arm("table", "refuse", method="MERGE", contains='"status":"succeeded"', count=1000)
    out = backend.deliver(lambda text, _n: worker(backend).handle(text, 5))  # the last allowed delivery
    assert out is not None and out.startswith("error:"), out
    backend.faults.disarm()
    assert executions(j.id) == 1  # the pipeline finished; its result was kept (blob and/or row)
    row = job(backend, j.id)
    assert row.status != Status.FAILED, (
        f"job failed ({row.error}) although attempt 1 finished and its result is stored"
    )


def test_a_claim_whose_answer_is_lost_and_cannot_be_read_back_is_released(backend: Backend) -> None:
    """Review finding 3: a claim that committed but could not be confirmed was never released and burned the attempt."""
    j = submit(backend).job
    jobs_store = backend.stores.jobs
    jobs_store.update(job(backend, j.id), max_attempts=1)  # its last attempt (any attempt burns the same way)
    drain(backend)  # the first message carried the row's old ETag: send a plain one
    Lifecycle(backend.stores).send(JobMessage(TENANT, j.id, 1))
    # The claim commits and its answer is lost; the reads that would decide it fail too (3 reads x 3 tries).
    claim = backend.faults.arm("table", "drop", method="MERGE", contains='"status":"running"', count=1)
    backend.faults.arm("table", "refuse", method="GET", count=9, after=claim)
    first = backend.deliver(worker(backend).handle)
    backend.faults.disarm()
    assert first == "error:ClaimUnresolved", first
    # The claim was given back by owner: the host's redelivery claims and runs it.
    assert backend.deliver(worker(backend).handle) == "succeeded"
    final = job(backend, j.id)
    assert final.status == Status.SUCCEEDED and final.attempts == 1 and executions(j.id) == 1


def test_a_released_resume_with_a_stored_result_finishes_from_the_blob_without_a_rerun(backend: Backend) -> None:
    """Review finding 4: a resumed attempt released with a stored result ran its pipeline again."""
    j = submit(backend).job
    drain(backend)  # the submission's message: this test drives the claim itself
    life = Lifecycle(backend.stores)
    claim = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claim.applied
    claimed = claim.row
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", of=1, plan="p")])
    assert life.suspend(claimed, "s").applied
    chunk = life.claim(backend.stores.chunks.get(TENANT, j.id, "s", 0), 1)
    assert chunk.applied
    assert life.finish(chunk.row, Ending(Status.SUCCEEDED, result=StoredResult("o0", 0))).applied
    assert life.refill_or_fan_in(TENANT, j.id, "s") == StageCheck.FIRED
    fired = backend.stores.jobs.get(TENANT, j.id, with_input=True)
    # A worker takes the resume, the attempt finishes and stores its result, then the outcome write fails:
    resume = life.resume(fired, 1)
    assert resume.applied
    resumed = resume.row
    name = result_blob_name(TENANT, j.id, 1)
    backend.stores.blobs.put(name, b'{"echo": [1]}', "application/json")
    assert life.release(resumed, fired, StoredResult(name, 13)).applied
    released = job(backend, j.id)
    assert released.status == Status.WAITING and released.result_blob == name
    outcome = backend.deliver(worker(backend).handle)  # the host redelivers the resume message
    assert executions(j.id) == 0, f"redelivery {outcome!r} ran the pipeline again despite {name}"


def test_queued_chunks_behind_a_backlog_are_not_resent_as_lost(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 5 (issue 11 case h, for chunks): the chunks' lost-message pass flooded a backlog."""
    from shared.config import settings as settings_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    n = 5
    life.create_chunks(TENANT, j.id, "s", [
        Chunk(TENANT, j.id, "s", i, ChunkStatus.PENDING, 1, "m:f", of=n, plan="p") for i in range(n)
    ])
    # Queued as refill_or_fan_in does: queued, with queued_at, and each chunk's message sent (behind a backlog).
    assert life._queue_pending(backend.stores.chunks.list_stage(TENANT, j.id, "s"), n) == n
    chunks_queue = get_settings().chunks_queue
    resent = 0
    for _ in range(3):  # three reaper periods while the backlog drains slowly
        backend.clock.advance(1.5)
        resent += len(reaper(backend).run().chunks_requeued)
    depth = len(list(backend.raw_queue(chunks_queue).peek_messages(max_messages=32)))
    assert resent == 0, f"{resent} duplicate chunk messages for {n} chunks whose messages were queued (depth {depth})"


def test_a_job_whose_input_can_never_be_read_still_ends(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 6: an input read before the claim could fail every delivery for ever."""
    import secrets

    from shared.config import settings as settings_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)]).job
    assert j.input_blob
    backend.stores.blobs.delete_prefix(j.input_blob)  # the claim-checked input is gone (or unreadable)
    outcomes: list[str | None] = []
    for _cycle in range(2):
        for _ in range(5):  # host.json maxDequeueCount
            outcomes.append(backend.deliver(worker(backend).handle))
        drain(backend)  # the host moves the message to the poison queue
        backend.clock.advance(1.5)
        outcomes.append(f"reaper requeued {reaper(backend).run().requeued_lost}")
    final = job(backend, j.id)
    assert final.status.terminal, f"still {final.status} after {outcomes}"


@pytest.mark.parametrize("claim_checked", [False, True], ids=["inline-input", "claim-checked-input"])
def test_jobs_deferred_by_admission_control_are_not_reenqueued_as_lost(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, claim_checked: bool
) -> None:
    """Review finding 8: admission deferral defeated the lost-message pass's backlog check.

    A claim-checked input is judged after the claim, which is released before the deferral: the due time is
    moved on from the released row (review37a: it was asked of the claimed row, which no longer applied).
    """
    import secrets

    if backend.name != "fake":
        pytest.skip("moves the platform's clock far past Azurite's message timestamps")
    from shared.config import settings as settings_mod
    from shared.runtime.admission import MemoryBudget

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    # The host's memory stays full for a while (every worker's budget: each worker(backend) is built anew).
    monkeypatch.setattr(MemoryBudget, "try_reserve", lambda _self, _mb: None)
    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)] if claim_checked else None).job
    assert bool(j.input_blob) == claim_checked
    delay = get_settings().admission_delay_seconds + 1
    requeued: list[str] = []
    for _period in range(4):
        for _ in range(2):
            while backend.deliver(worker(backend).handle) is not None:  # every copy is deferred again
                pass
            backend.clock.advance(delay)
        requeued += reaper(backend).run().requeued_lost
    depth = backend.depth()
    assert requeued == [] and depth == 1, (
        f"the reaper re-enqueued {j.id} {len(requeued)} times while its message was being deferred; "
        f"{depth} copies of it now circulate"
    )


def test_chunks_deferred_by_admission_control_are_not_resent_as_lost(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk is judged for memory after its claim, which is released before the deferral: its due time
    (``queued_at``) moves on too, as a job's does, or every reaper period re-sends it as lost (review37a)."""
    import gzip

    if backend.name != "fake":
        pytest.skip("moves the platform's clock far past Azurite's message timestamps")
    from shared.config import settings as settings_mod
    from shared.runtime.admission import MemoryBudget

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.PENDING, 1, "m:f", of=1,
                                                 plan="p", input_inline=gzip.compress(b"[1]"))])
    assert life.suspend(claimed.row, "s").applied  # waiting; the chunk is queued and its message sent
    monkeypatch.setattr(MemoryBudget, "try_reserve", lambda _self, _mb: None)  # the host's memory stays full
    chunks_queue = get_settings().chunks_queue
    delay = get_settings().admission_delay_seconds + 1
    resent: list[str] = []
    outcomes: list[str | None] = []
    for _period in range(4):
        for _ in range(2):
            while (outcome := backend.deliver(chunk_worker(backend).handle, chunks_queue)) is not None:
                outcomes.append(outcome)  # every copy is deferred again
            backend.clock.advance(delay)
        resent += reaper(backend).run().chunks_requeued
    depth = backend.depth(chunks_queue)
    assert set(outcomes) == {"deferred"}, outcomes
    assert resent == [] and depth == 1, (
        f"the reaper re-sent the chunk {len(resent)} times while it was being deferred; {depth} copies circulate"
    )


def test_an_unreadable_chunk_row_does_not_stop_chunk_recovery(backend: Backend) -> None:
    """Review finding 10 (issue 11 case g, for chunks): one unreadable chunk row stopped chunk recovery for every tenant."""
    from datetime import timedelta

    from shared.core.jobs import utcnow

    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claim = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claim.applied
    claimed = claim.row
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", of=1, plan="p")])
    assert life.suspend(claimed, "s").applied  # the job waits for its map stage
    assert life.claim(backend.stores.chunks.get(TENANT, j.id, "s", 0), 1).applied  # its worker dies
    table = backend.stores.chunks.table  # type: ignore[attr-defined]
    table.create_entity({"PartitionKey": "other-tenant", "RowKey": "0~c~s~00000", "kind": "chunk",
                         "status": "running", "heartbeat_at": utcnow() - timedelta(hours=1)})  # a hand-edited row
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    report = reaper(backend).run()
    assert report.chunks_requeued == [f"{j.id}/s/0"], report.summary()


def test_a_slow_result_upload_is_not_reaped_from_under_the_worker(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review finding 11: no heartbeat covered the outcome write, so a slow result upload was reaped and its result orphaned."""
    import secrets

    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)]).job  # a result too big for the row
    blobs = backend.stores.blobs
    original_put = blobs.put
    reaped: list[str] = []

    def slow_put(name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        if name == result_blob_name(TENANT, j.id, 1) and not reaped:
            # The upload of a large result takes longer than the stale threshold (BlobRetry: 2 retries, 30 s read
            # timeout each): no heartbeat is sent between the pipeline's end and the outcome write.
            backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
            reaped.append(str(reaper(backend).run().requeued_stale))
        original_put(name, data, content_type)

    monkeypatch.setattr(blobs, "put", slow_put)
    first = backend.deliver(worker(backend).handle)
    monkeypatch.setattr(blobs, "put", original_put)
    for _ in range(3):
        backend.deliver(worker(backend).handle)
    final = job(backend, j.id)
    assert executions(j.id) == 1 and final.status == Status.SUCCEEDED and final.attempts == 1, (
        f"first delivery {first!r}, reaper requeued {reaped}; the job ended {final.status} after "
        f"{executions(j.id)} runs (attempt {final.attempts}); result-1 orphaned"
    )


def _counted_worker(backend: Backend, spent: list[Counter[str]]) -> Callable[[str, int], str]:
    """A worker's ``handle`` that appends the storage operations of each delivery to ``spent``."""
    def handle(text: str, n: int) -> str:
        before = backend.ops()
        try:
            return worker(backend).handle(text, n)
        finally:
            spent.append(backend.ops() - before)

    return handle


def _writes(ops: Counter[str]) -> int:
    return sum(n for op, n in ops.items() if not (op.endswith((":get", ":query")) or op.startswith("queue:receive")))


@pytest.mark.parametrize("corrupt", [
    b"SECRET-PAYLOAD, not gzip",
    gzip.compress(b'["SECRET-PAYLOAD"')[:-9],  # a gzip stream cut short
    gzip.compress(b'["SECRET-PAYLOAD" \xff]'),  # gzip, but neither UTF-8 nor JSON
], ids=["not-gzip", "truncated", "not-json"])
def test_a_job_whose_inline_input_does_not_decode_fails_once_in_one_write(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, corrupt: bytes
) -> None:
    """Review38 finding 1: an inline input that does not decode (corrupt storage) raised before the claim on every
    delivery, so no delivery held the job: its message went to the poison queue, the second delivery had indexed it,
    the reaper's lost-message pass re-enqueued it, and round again, for ever."""
    from shared.config import settings as settings_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend).job
    backend.stores.jobs.update(backend.stores.jobs.get(TENANT, j.id, with_input=True), input_inline=corrupt)
    drain(backend)  # its first message carried the row as inserted: send the plain one a retry or requeue sends
    Lifecycle(backend.stores).send(JobMessage(TENANT, j.id, 1))
    spent: list[Counter[str]] = []
    counted = _counted_worker(backend, spent)

    outcomes: list[str | None] = []
    for _cycle in range(2):
        for _ in range(5):  # host.json maxDequeueCount
            outcomes.append(backend.deliver(counted))
        drain(backend)  # the host moves the message to the poison queue
        backend.clock.advance(1.5)
        outcomes.append(f"reaper requeued {reaper(backend).run().requeued_lost}")
    final = job(backend, j.id)
    assert outcomes == ["failed", *[None] * 4, "reaper requeued []", *[None] * 5, "reaper requeued []"], outcomes
    assert final.status == Status.FAILED and final.error is not None and final.error.type == "BadInput", final
    assert "does not decode" in final.error.message and "SECRET" not in final.error.message, final.error
    assert executions(j.id) == 0 and backend.depth() == 0
    assert len(spent) == 1 and _writes(spent[0]) == 1, spent  # failed in one write: no claim, no release


@pytest.mark.parametrize("lost", [False, True], ids=["copy-sent", "copy-send-fails"])
def test_a_failed_jobs_poison_copy_survives_a_failed_send(
    backend: Backend, caplog: pytest.LogCaptureFixture, lost: bool
) -> None:
    """Review38 finding 2: the FAILED write landed, then ``send_poison`` raised; the delivery failed, its redelivery
    found the job terminal ("noop-terminal"), and neither the poison copy nor ``job.poisoned`` was ever made.

    The FAILED write records that the failure owes a copy, so the redelivery sends it (at least once), and the
    delivery that failed the job costs what it did before."""
    j = submit(backend, "sleep", {"seconds": 0, "steps": 2, "fail": "permanent"}).job
    spent: list[Counter[str]] = []
    counted = _counted_worker(backend, spent)

    caplog.set_level("INFO", logger="thematiq")
    if lost:
        backend.faults.arm("queue", "refuse", method="POST", count=1000)  # every send, the poison copy's too
    first = backend.deliver(counted)
    backend.faults.disarm()
    assert job(backend, j.id).status == Status.FAILED
    assert first == ("error:StorageUnavailable" if lost else "failed"), first
    # The claim and the FAILED write, each a $batch with the job's index row, and the copy: no extra write (a
    # heartbeat may add a table:merge, and the poison queue's creation a queue:put-queue, on their own schedule).
    assert spent[0]["table:batch"] == 2 and (lost or spent[0]["queue:send"] == 1), spent[0]
    again = backend.deliver(counted)  # the host's redelivery after the failed delivery (none after a clean one)
    assert again == ("poison-copied" if lost else None), again
    events = [r for r in caplog.records if getattr(r, "event", None) == "job.poisoned"]
    poisoned = [json.loads(text)["j"] for text in backend.peek(get_settings().poison_queue)]
    assert poisoned == [j.id] and len(events) == 1, (poisoned, events)
    assert backend.depth() == 0


def _waiting_job(backend: Backend) -> str:
    """A job waiting for its map stage ``s``, whose one chunk is queued: nothing for the reaper to do but look."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", of=1, plan="p")])
    assert life.suspend(claimed.row, "s").applied
    return j.id


def test_the_reaper_lists_a_waiting_jobs_stage_once_per_run(backend: Backend) -> None:
    """Review38 finding 3: an index run listed each waiting job's stage twice (for its stale and lost chunks, then
    again to refill or fan in): one range query per waiting job and run more than the stage needs."""
    drain(backend)
    _waiting_job(backend)

    def one_run() -> Counter[str]:
        before = backend.ops()
        report = reaper(backend).run()
        assert report.errors == 0 and report.chunks_requeued == [], report.summary()
        return backend.ops() - before

    one_run()  # a first run may do once what later ones do not (the sweep's marker)
    one = one_run()
    _waiting_job(backend)
    two = one_run()
    assert two - one == Counter({"table:query": 1}) and one - two == Counter(), (one, two)


def test_a_chunk_heartbeat_that_lands_counts_even_when_its_parent_read_fails(backend: Backend) -> None:
    """Found measuring review38 finding 4 (a chunk heartbeat is a MERGE of the chunk and a GET of its parent, which
    is how a cancel reaches it): a parent read that failed after the renewal landed raised out of ``renew``, so the
    runner did not count the renewal and its fence kept running, towards killing an attempt whose lease was fine."""
    import time

    from shared.runtime.chunk_worker import ChunkLease

    job_id = _waiting_job(backend)
    life = Lifecycle(backend.stores)
    chunk = life.claim(backend.stores.chunks.get(TENANT, job_id, "s", 0), 1)
    assert chunk.applied
    lease = ChunkLease(life, chunk.row, time.monotonic() - 60)
    backend.faults.arm("table", "refuse", method="GET", count=3)  # the parent read, and the SDK's two retries
    try:
        stop = lease.renew(None)
    finally:
        backend.faults.disarm()
    renewed = backend.stores.chunks.get(TENANT, job_id, "s", 0)
    assert stop is False and renewed.heartbeat_at == lease.chunk.heartbeat_at != chunk.row.heartbeat_at
    assert time.monotonic() - lease.renewed_at < 30  # the fence counts from this renewal
    assert life.cancel(backend.stores.jobs.get(TENANT, job_id)).row.status == Status.CANCELLED
    assert lease.renew(None) is True  # the next heartbeat asks the parent again, and sees the cancel
