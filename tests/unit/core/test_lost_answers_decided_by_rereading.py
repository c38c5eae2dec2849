"""Issue 11, cases a–h: writes whose answer is lost, decided by re-reading. Each runs on the fake and on Azurite.

The faults are injected below the SDK's retry policy (``tests.support.faults``):
``refuse`` (503, never applied), ``drop`` (applied, connection lost) and
``commit-5xx`` (applied, 503, the SDK's retry gets 409/412).
"""

from __future__ import annotations

import json
import secrets

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus, chunk_partition
from shared.core.errors import StorageUnavailable
from shared.core.jobs import Status
from shared.core.lifecycle import Ending, Lifecycle, StoredResult
from shared.core.messages import JobMessage
from shared.core.names import result_blob_name
from shared.runtime.reaper import Reaper
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, drain, executions, job, jobs, reaper, submit, worker

MODES = ["drop", "commit-5xx"]


def test_an_outcome_write_that_fails_is_finished_from_the_stored_result_without_a_rerun(backend: Backend) -> None:
    """Issue 11 case a: the outcome write fails after the result is stored."""
    j = submit(backend).job
    # Every attempt to record "succeeded" is refused: the worker cannot finish, so it releases its claim.
    backend.faults.arm("table", "refuse", method="MERGE", contains='"status":"succeeded"', count=1000)
    first = backend.deliver(worker(backend).handle)
    assert first is not None and first.startswith("error:"), first
    backend.faults.disarm()
    released = job(backend, j.id)
    assert released.status == Status.QUEUED and released.attempts == 0 and released.owner is None
    assert released.result_blob == result_blob_name(TENANT, j.id, 1)
    assert backend.deliver(worker(backend).handle) == "succeeded"  # the host's redelivery
    done = job(backend, j.id)
    assert done.status == Status.SUCCEEDED and done.attempts == 1
    assert executions(j.id) == 1
    assert json.loads(backend.stores.blobs.get(done.result_blob or "")) == {"echo": [1]}


def test_a_stranded_running_job_with_a_stored_result_is_finished_by_the_reaper(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 case a: neither the outcome nor the release can be written."""
    j = submit(backend).job
    # Neither the outcome nor the release can be written: the job stays running under a dead claim.
    backend.faults.arm("table", "refuse", method="MERGE", contains='"owner":""', count=1000)
    outcome = backend.deliver(worker(backend).handle)
    assert outcome is not None and outcome.startswith("error:"), outcome
    backend.faults.disarm()
    assert job(backend, j.id).status == Status.RUNNING
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    report = reaper(backend).run()
    assert report.recovered_results == [j.id], report.summary()
    done = job(backend, j.id)
    assert done.status == Status.SUCCEEDED and done.attempts == 1 and executions(j.id) == 1
    # The leftover message is a no-op.
    assert backend.deliver(worker(backend).handle) in (None, "noop-terminal")


def test_an_exception_after_the_claim_releases_it_for_the_next_delivery(backend: Backend) -> None:
    """Issue 11 case a: the input cannot be read once after the claim."""
    big = [secrets.token_hex(16) for _ in range(4000)]
    j = submit(backend, input_=big).job  # large enough to be claim-checked into a blob
    assert j.input_blob
    backend.faults.arm("blob", "refuse", method="GET", count=3)  # the input cannot be read once
    first = backend.deliver(worker(backend).handle)
    assert first is not None and first.startswith("error:"), first
    assert job(backend, j.id).status == Status.QUEUED
    assert backend.deliver(worker(backend).handle) == "succeeded"
    assert job(backend, j.id).attempts == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", [None, "k-1"])
def test_a_committed_insert_whose_answer_is_lost_is_answered_accepted_and_its_message_sent(
    backend: Backend, mode: str, key: str | None
) -> None:
    """Issue 11 case b: a committed submission was answered with an error."""
    backend.faults.arm("table", mode, method="POST", count=1)
    submitted = submit(backend, key=key)
    assert submitted.created
    assert [x.id for x in jobs(backend)] == [submitted.job.id]
    assert backend.deliver(worker(backend).handle) == "succeeded"


def test_a_replayed_submission_of_a_queued_job_resends_its_message(backend: Backend) -> None:
    """Issue 11 case b: the first message of a committed submission never went."""
    backend.faults.arm("queue", "refuse", method="POST", count=1000)  # the first message never goes
    first = submit(backend, key="k-2")
    backend.faults.disarm()
    assert first.created and backend.depth() == 0
    replay = submit(backend, key="k-2")
    assert not replay.created and replay.job.id == first.job.id
    assert backend.deliver(worker(backend).handle) == "succeeded"


def test_a_send_that_fails_leaves_the_committed_row_for_the_reaper(backend: Backend) -> None:
    """Issue 11 case c: a failed send must never delete a committed row."""
    backend.faults.arm("queue", "refuse", method="POST", count=1000)
    first = submit(backend, key="k-3")
    assert first.created  # accepted means tracked: 202, the row stays
    replay = submit(backend, key="k-3")  # a concurrent replay saw the same job, which must still exist
    assert replay.job.id == first.job.id
    backend.faults.disarm()
    assert job(backend, first.job.id).status == Status.QUEUED


def test_the_last_delivery_never_fails_a_job_it_did_not_claim(backend: Backend) -> None:
    """Issue 11 case d: the last delivery fails only a job it holds."""
    j = submit(backend).job
    backend.faults.arm("table", "refuse", method="GET", count=3)  # the worker cannot even read the job
    # A message with ids only (a retry's or the reaper's; a first message carries the row), so it must read.
    ids_only = lambda text, _n: worker(backend).handle(JobMessage.decode(text).without_row().encode(), 5)  # noqa: E731
    assert backend.deliver(ids_only) == "error:StorageUnavailable"
    still = job(backend, j.id)
    assert still.status == Status.QUEUED and still.error is None  # it had never run and has attempts left


def test_the_last_delivery_never_fails_a_job_another_worker_runs(backend: Backend) -> None:
    """Issue 11 case d: the last delivery fails only a job it holds."""
    j = submit(backend).job
    running = Lifecycle(backend.stores).claim(job(backend, j.id), 1).row
    assert running.status == "running"
    backend.faults.arm("table", "refuse", method="GET", count=3)
    ids_only = lambda text, _n: worker(backend).handle(JobMessage.decode(text).without_row().encode(), 5)  # noqa: E731
    assert backend.deliver(ids_only) == "error:StorageUnavailable"
    still = job(backend, j.id)
    assert still.status == Status.RUNNING and still.owner == running.owner


def test_creating_chunks_again_keeps_finished_chunks(backend: Backend) -> None:
    """Issue 11 case f: a second writer of a stage's chunks must never reset finished ones."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    chunks = [Chunk(TENANT, j.id, "s", i, ChunkStatus.QUEUED, 1, "m:f", of=2, plan="p") for i in range(2)]
    life.create_chunks(TENANT, j.id, "s", chunks)
    claimed = life.claim(backend.stores.chunks.get(TENANT, j.id, "s", 0), 1).row
    assert claimed.status == "running"
    assert life.finish(claimed, Ending(Status.SUCCEEDED, result=StoredResult("out-0", 0))).applied
    backend.faults.arm("table", "drop", method="POST", count=1)  # and the replay's answer is lost, too
    life.create_chunks(TENANT, j.id, "s", chunks)  # a second writer (a re-run attempt) plans the same stage
    again = backend.stores.chunks.list_stage(TENANT, j.id, "s")
    assert [(c.index, c.status, c.output_blob) for c in again] == [
        (0, ChunkStatus.SUCCEEDED, "out-0"), (1, ChunkStatus.QUEUED, None)
    ]


def test_an_unreadable_job_row_is_skipped_and_every_other_job_is_reaped(backend: Backend) -> None:
    """Issue 11 case g: one unreadable row must not stop the reaper."""
    good = submit(backend).job
    life = Lifecycle(backend.stores)
    assert life.claim(backend.stores.jobs.get(TENANT, good.id, with_input=True), 1).applied
    table = backend.stores.jobs.table  # type: ignore[attr-defined]
    bad = good.id[:-4] + "ffff"
    table.create_entity({"PartitionKey": TENANT, "RowKey": bad, "kind": "job", "pipeline": "echo",
                         "status": "running", "created_at": "", "heartbeat_at": ""})
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    report = reaper(backend).run()
    assert report.requeued_stale == [good.id], report.summary()


def test_a_cleared_datetime_reads_back_as_none(backend: Backend) -> None:
    """Issue 11 case g: a cleared datetime is stored as "" and must read back as None, not as an unreadable row."""
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1).row
    assert claimed.status == "running"
    released = life.release(claimed, job(backend, j.id))  # writes owner and fan_in_at = None, stored as ""
    assert released.applied
    again = job(backend, j.id)
    assert again.fan_in_at is None and again.owner is None and again.wait_stage is None


def test_never_claimed_jobs_behind_a_backlog_are_not_reenqueued_as_lost(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11 case h: the lost-message pass must not flood a deep backlog."""
    from shared.config import settings

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings.get_settings.cache_clear()
    ids = [submit(backend).job.id for _ in range(5)]
    backend.clock.advance(1.5)
    # Never-claimed jobs are not indexed (their message is their record), so the full sweep is what sees them.
    sweeper = Reaper(backend.stores, sweep=True)
    for _ in range(3):  # three reaper periods while the backlog drains slowly
        report = sweeper.run()
        assert report.requeued_lost == [] and report.backlog_skipped == 5, report.summary()
    assert backend.depth() == 5
    assert drain(backend) == 5  # now the messages really are lost
    report = sweeper.run()
    assert sorted(report.requeued_lost) == sorted(ids), report.summary()
    assert backend.depth() == 5


@pytest.mark.parametrize("key", [None, "k-4"])
def test_a_committed_insert_whose_retries_cannot_connect_is_still_decided_by_reading(
    backend: Backend, key: str | None
) -> None:
    """Issue 11 case b: the retries of a committed insert are refused a connection."""
    # Answered 503 after it committed, then every retry is refused a connection: azure-core raises
    # ServiceRequestError ("never sent") for a write that happened. One request, one job.
    backend.faults.arm("table", "commit-5xx-unreachable", method="POST", count=1)
    submitted = submit(backend, key=key)
    assert submitted.created
    assert [x.id for x in jobs(backend)] == [submitted.job.id]


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_a_webhook_record_whose_answer_is_lost_is_decided_by_reading(backend: Backend, mode: str) -> None:
    """``Lifecycle.record_callback`` on the same primitive: committed, answer lost → applied, recorded once."""
    j = submit(backend).job
    assert backend.deliver(worker(backend).handle) == "succeeded"
    life = Lifecycle(backend.stores)
    rule = backend.faults.arm("table", mode, method="MERGE", contains='"callback_status":"delivered"', count=1)
    assert life.record_callback(job(backend, j.id), "delivered", 1, None) is True
    assert rule.hits == 1
    row = job(backend, j.id)
    assert (row.callback_status, row.callback_attempts) == ("delivered", 1)
    # Final: a late "retrying" report of an earlier try does not overwrite it.
    assert life.record_callback(row, "retrying", 1, "timeout") is False
    assert job(backend, j.id).callback_status == "delivered"


def test_a_webhook_record_refused_cleanly_changes_nothing(backend: Backend) -> None:
    j = submit(backend).job
    assert backend.deliver(worker(backend).handle) == "succeeded"
    backend.faults.arm("table", "refuse", method="MERGE", contains='"callback_status"', count=1000)
    with pytest.raises(StorageUnavailable):
        Lifecycle(backend.stores).record_callback(job(backend, j.id), "delivered", 1, None)
    backend.faults.disarm()
    assert job(backend, j.id).callback_status is None


@pytest.mark.parametrize("mode", MODES)
def test_a_refusal_of_an_undecodable_input_whose_answer_is_lost_is_decided_by_reading(
    backend: Backend, mode: str
) -> None:
    """``Lifecycle.refuse`` (a job whose stored input does not decode, failed before any claim) on the same
    primitive: committed, answer lost → applied, the delivery ends "failed" and nothing is sent again."""
    j = submit(backend).job
    backend.stores.jobs.update(backend.stores.jobs.get(TENANT, j.id, with_input=True), input_inline=b"not gzip")
    drain(backend)  # its first message carried the row as inserted: send the plain one a requeue sends
    Lifecycle(backend.stores).send(JobMessage(TENANT, j.id, 1))
    rule = backend.faults.arm("table", mode, method="MERGE", contains='"status":"failed"', count=1)
    assert backend.deliver(worker(backend).handle) == "failed"
    assert rule.hits == 1
    row = job(backend, j.id)
    assert row.status == Status.FAILED and row.error is not None and row.error.type == "BadInput", row
    assert executions(j.id) == 0 and backend.depth() == 0


@pytest.mark.parametrize("idempotency_key", [None, "k-retention"])
def test_a_retention_delete_whose_retry_finds_the_job_gone_is_a_delete(backend: Backend, idempotency_key: str | None) -> None:
    """Review42: the delete committed, was answered 503, and the SDK's retry came back 404 (the row was gone, as
    asked). With an idempotency row the 404 fell back to a single delete; without one it was an error of the
    sweep, so the sweep was not recorded and the next 5-minute run scanned the whole table again."""
    j = submit(backend, key=idempotency_key).job
    assert backend.deliver(worker(backend).handle) == "succeeded"
    backend.clock.advance(get_settings().retention_days * 86400 + 60)
    backend.faults.arm("table", "commit-5xx", method="POST", contains=j.id, count=1)
    backend.faults.arm("table", "commit-5xx", method="DELETE", contains=j.id, count=1)
    report = Reaper(backend.stores, sweep=True).run()
    backend.faults.disarm()
    assert report.deleted == [j.id] and report.errors == 0, report.summary()
    assert jobs(backend) == []
    assert backend.stores.jobs.index_state().swept_at is not None  # the sweep is recorded: not run again at once


def test_a_chunk_delete_whose_retry_finds_rows_gone_deletes_the_rest(backend: Backend) -> None:
    """Review42: retention deletes a job's chunks in batches of deletes; a batch that committed, was answered 503
    and retried by the SDK came back 404, an error of that expiry (and of the sweep, run again 5 minutes later)."""
    j = submit(backend).job
    chunks = [Chunk(TENANT, j.id, "s", i, ChunkStatus.SUCCEEDED, 1, "m:f") for i in range(3)]
    Lifecycle(backend.stores).create_chunks(TENANT, j.id, "s", chunks)
    backend.faults.arm("table", "commit-5xx", method="POST", contains=chunk_partition(TENANT, j.id), count=1)
    assert backend.stores.chunks.delete_job_chunks(TENANT, j.id) == 3
    backend.faults.disarm()
    assert backend.stores.chunks.list_stage(TENANT, j.id, "s") == []


def test_a_retention_blob_delete_whose_retry_finds_the_blobs_gone_is_a_delete(backend: Backend) -> None:
    """Review44p: a job's blobs go in batch requests; a batch that committed, was answered 503 and retried by the
    SDK came back with every sub-request 404 (PartialBatchErrorException), an error of that expiry: the job stayed,
    the sweep was not recorded, and the next 5-minute run scanned the whole table and container again."""
    rows = [secrets.token_hex(64) for _ in range(1000)]  # incompressible, over 48 KiB: a claim-checked input
    j = submit(backend, input_=rows).job
    assert j.input_blob
    assert backend.deliver(worker(backend).handle) == "succeeded"
    backend.clock.advance(get_settings().retention_days * 86400 + 60)
    rule = backend.faults.arm("blob", "commit-5xx", method="POST", count=1)
    report = Reaper(backend.stores, sweep=True).run()
    backend.faults.disarm()
    assert rule.hits == 1
    assert report.deleted == [j.id] and report.errors == 0, report.summary()
    assert jobs(backend) == [] and backend.stores.blobs.get_optional(j.input_blob) is None
    assert backend.stores.jobs.index_state().swept_at is not None  # the sweep is recorded: not run again at once
