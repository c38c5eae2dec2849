"""At most 6 billable storage operations per no-op job: insert, send, receive, claim, finish, delete.

The first message carries the inserted row and its ETag, so the claim is a conditional write
with no read; a small result is stored in the row with the final state, so there is no blob put.
Larger inputs and results keep the claim check; a changed row is decided by re-reading.
"""

from __future__ import annotations

import base64
import json

import pytest

from shared.core.jobs import Status
from shared.core.messages import JobMessage
from shared.observability.metering import METER, TransactionMeter
from shared.storage.blobs import BlobStore, job_prefix
from shared.storage.connections import get_queue_client
from shared.storage.job_store import JobStore
from tests.support.direct import body_of, complete, functions, http, receive, run_worker_once
from tests.support.platform import fast_settings, job, submit
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch)


def _result(job_id: str) -> bytes:
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id})
    assert resp.status_code == 200, resp.get_body()
    return bytes(resp.get_body())


def test_a_no_op_job_costs_six_billable_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    # No heartbeat inside the measured attempt, however slowly a loaded machine runs it: with fast_settings' 0.5 s
    # an attempt of 2 s (its zygote start at load 30) wrote one, and the count was 7 (a full suite beside two busy
    # loops). The same budget through the worker process was fixed the same way (test_noop_job_through_the_worker_process).
    # Nor a progress write: since 2026-12-07 an attempt that arrives while the process's first zygote is still
    # importing runs in a spawned interpreter (followup44p), which takes longer than fast_settings' 0.2 s progress
    # interval, and its "started" progress was written: 7 (run alone, the warm-up job leaves the zygote importing).
    fast_settings(monkeypatch, HEARTBEAT_SECONDS="60", HEARTBEAT_STALE_SECONDS="180",
                  PROGRESS_MIN_INTERVAL_SECONDS="60")
    submit("echo", {}, 0)
    run_worker_once()  # the table, queue and container exist from here on
    METER.reset()
    j = submit("echo", {}, {"answer": 42})
    assert run_worker_once() is not None
    counts = METER.snapshot()
    assert TransactionMeter.billable(counts) == 6, counts
    assert counts["table:get"] == 0 and counts.get("blob:put", 0) == 0, counts
    done = JobStore().get("local", j["id"], with_input=True)
    assert done.status == Status.SUCCEEDED and done.result_inline == b'{"echo":{"answer":42}}'
    assert json.loads(_result(j["id"])) == {"echo": {"answer": 42}}
    assert not list(BlobStore().container.list_blobs(name_starts_with=job_prefix("local", j["id"])))


def test_the_first_message_carries_the_row_and_a_retry_message_ids_only() -> None:
    j = submit("echo", {}, {"x": 1})
    msg = receive()
    assert msg is not None
    first = JobMessage.decode(msg.get_body().decode())
    assert first.etag and first.row is not None and first.row["RowKey"] == j["id"]
    complete(msg)
    assert first.without_row().encode() == JobMessage("local", j["id"], 1, first.traceparent).encode()


def test_a_large_result_keeps_the_claim_check() -> None:
    big = {"text": "y" * 40_000}  # a 40 KB result: over the 32 KiB inline limit
    j = submit("echo", {}, big)
    run_worker_once()
    done = JobStore().get("local", j["id"], with_input=True)
    assert done.status == Status.SUCCEEDED and done.result_inline is None and done.result_blob
    assert json.loads(_result(j["id"])) == {"echo": big}


def test_a_row_changed_after_the_message_was_sent_is_decided_by_rereading() -> None:
    j = submit("sleep", {"seconds": 0})
    # Cancelled before any worker saw it: the message's ETag is stale, so the claim's 412 re-reads.
    resp = http("cancel_job", "POST", f"jobs/{j['id']}/cancel", route_params={"id": j["id"]})
    assert resp.status_code == 200, body_of(resp)
    msg = receive()
    assert msg is not None
    assert functions()["job_worker"](msg) is None
    complete(msg)
    stored = job(j["id"])
    assert stored.status == Status.CANCELLED and stored.attempts == 0


def test_a_job_that_does_not_fit_in_memory_is_deferred_without_burning_a_dequeue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shared.config.settings import get_settings
    from shared.platform import Platform

    monkeypatch.setenv("INSTANCE_MEMORY_MB", "600")
    monkeypatch.setenv("MEMORY_MARGIN_MB", "100")
    monkeypatch.setenv("ADMISSION_DELAY_SECONDS", "1")
    get_settings.cache_clear()
    j = submit("sleep", {"seconds": 0, "hold_mb": 400})  # declares 448 MB
    platform = Platform.from_settings()
    held = platform.budget.try_reserve(100)  # another attempt runs: 100 + 448 > 500
    assert held is not None
    try:
        msg = receive()
        assert msg is not None
        assert platform.worker.handle(msg.get_body().decode(), msg.dequeue_count or 1) == "deferred"
        complete(msg)
        still = job(j["id"])
        assert still.status == Status.QUEUED and still.attempts == 0
    finally:
        held.release()
    # The re-sent message is a new one (dequeue count starts again) and runs once memory is free.
    [raw] = wait_until(lambda: list(get_queue_client().receive_messages(max_messages=1, visibility_timeout=30)),
                       timeout=30, interval=0.1, what="the re-sent message")
    assert raw.dequeue_count == 1
    text = base64.b64decode(raw.content).decode()
    assert Platform.from_settings().worker.handle(text, raw.dequeue_count) == "succeeded"
    get_queue_client().delete_message(raw.id, raw.pop_receipt)
