"""Jobs and chunks are leased rows: one claim, release, finish and reap for both, on the in-memory fake.

And "this attempt's result is stored: finish from it" is the claim's (or the resume's) own decision.
"""

from __future__ import annotations

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.jobs import Job, JobError, Status, new_job_id, utcnow
from shared.core.lifecycle import Ending, Lifecycle, StoredResult
from shared.core.names import result_blob_name
from tests.support.backends import Backend, fake_backend

TENANT = "t"


@pytest.fixture
def backend() -> Backend:
    return fake_backend()


def _job(backend: Backend) -> Job:
    now = utcnow()
    return backend.stores.jobs.create(Job(TENANT, new_job_id(), "echo", Status.QUEUED, {}, now, now, 3))


def _chunk(backend: Backend, life: Lifecycle) -> Chunk:
    job = _job(backend)
    life.create_chunks(TENANT, job.id, "s", [Chunk(TENANT, job.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", plan="p")])
    return backend.stores.chunks.get(TENANT, job.id, "s", 0)


def _store(backend: Backend, job: Job, attempt: int) -> StoredResult:
    name = result_blob_name(job.tenant, job.id, attempt)
    backend.stores.blobs.put(name, b'{"ok": true}', "application/json")
    return StoredResult(name, 12)


def test_a_claim_of_an_attempt_released_with_its_result_finishes_the_job_from_it(backend: Backend) -> None:
    life = Lifecycle(backend.stores)
    before = _job(backend)
    claimed = life.claim(before, 1).row
    released = life.release(claimed, before, _store(backend, before, 1))
    assert released.applied and released.row.status == Status.QUEUED and released.row.attempts == 0
    again = life.claim(released.row, 1)  # the redelivery of the same message
    assert again.applied and again.row.status == Status.SUCCEEDED and again.row.attempts == 1
    assert again.row.owner is None and again.row.result_blob == result_blob_name(TENANT, before.id, 1)


def test_a_claim_after_the_reaper_took_a_still_uploading_attempt_finishes_from_its_blob(backend: Backend) -> None:
    life = Lifecycle(backend.stores)
    claimed = life.claim(_job(backend), 1).row
    reaped = life.reap(claimed)  # its heartbeat went stale while the result was still uploading
    assert reaped.applied and reaped.row.status == Status.RETRYING
    assert reaped.row.error is not None and reaped.row.error.type == "WorkerLost"
    stored = _store(backend, claimed, 1)  # the upload lands after all
    again = life.claim(reaped.row, 2)
    assert again.applied and again.row.status == Status.SUCCEEDED
    assert (again.row.attempts, again.row.result_blob, again.row.result_bytes) == (1, stored.blob, stored.size)


def test_a_claim_with_no_stored_result_claims(backend: Backend) -> None:
    life = Lifecycle(backend.stores)
    claimed = life.claim(life.reap(life.claim(_job(backend), 1).row).row, 2)
    assert claimed.applied and claimed.row.status == Status.RUNNING and claimed.row.attempts == 2


@pytest.mark.parametrize("kind", ["job", "chunk"])
def test_a_reaped_claim_can_neither_finish_nor_release_its_row(backend: Backend, kind: str) -> None:
    life = Lifecycle(backend.stores)
    first: Job | Chunk = _job(backend) if kind == "job" else _chunk(backend, life)
    zombie = life.claim(first, 1)
    assert zombie.applied and zombie.row.status == "running"
    reaped = life.reap(zombie.row)  # its worker is presumed dead and the row is handed on
    assert reaped.applied and reaped.row.owner is None
    assert not life.finish(zombie.row, Ending(Status.SUCCEEDED)).applied
    assert not life.release(zombie.row, first).applied
    assert not life.renew(zombie.row, None).applied
    again = life.claim(reaped.row, 2)
    assert again.applied and again.row.status == "running"
    released = life.release(again.row, reaped.row)  # the claim holder gives it back: as it was before the claim
    assert released.applied and released.row.status == reaped.row.status and released.row.attempts == 1
    assert released.row.owner is None


def test_a_chunk_retry_queues_it_again_with_its_next_message(backend: Backend) -> None:
    life = Lifecycle(backend.stores)
    chunk = life.claim(_chunk(backend, life), 1).row
    retried = life.finish(chunk, Ending(Status.RETRYING, JobError.of("Transient", "again")))
    assert retried.applied and retried.row.status == ChunkStatus.QUEUED and retried.row.owner is None
    assert retried.row.error_type == "Transient"
    queue = backend.raw_queue(get_settings().chunks_queue)
    assert len(list(queue.receive_messages(max_messages=32))) == 1


def test_an_ending_is_one_of_the_four_ends() -> None:
    with pytest.raises(ValueError, match="does not end"):
        Ending(Status.RUNNING)
