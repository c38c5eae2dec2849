"""Fan-out/fan-in through the real functions, called directly against Azurite."""

from __future__ import annotations

import base64
import threading

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import ChunkStatus
from shared.core.jobs import Status
from shared.platform import Platform
from shared.storage.chunk_store import ChunkStore
from shared.storage.connections import get_queue_client
from tests.support.direct import body_of, drain, http, receive, run_worker_once
from tests.support.platform import fast_settings, job, submit


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, MAX_CHUNKS_IN_FLIGHT_PER_JOB="3")


def _result(job_id: str) -> dict[str, object]:
    return body_of(http("get_job_result", "GET", f"jobs/{job_id}/result", route_params={"id": job_id}))


def test_map_stage_fans_out_and_in_exactly_once() -> None:
    numbers = list(range(1, 31))
    j = submit("fanout", {"chunk_size": 5}, numbers)
    run_worker_once()  # the parent runs until its map stage, then suspends
    parent = job(j["id"])
    assert parent.status == Status.WAITING and parent.wait_stage == "square"
    chunks = ChunkStore().list_stage("local", j["id"], "square")
    assert len(chunks) == 6
    # The window: three chunks queued, the rest pending until a slot frees up.
    assert sorted(c.status for c in chunks).count(ChunkStatus.QUEUED) == 3
    assert len(get_queue_client(get_settings().chunks_queue).peek_messages(max_messages=32)) == 3
    view = body_of(http("get_job", "GET", f"jobs/{j['id']}", route_params={"id": j["id"]}))
    assert view["status"] == "waiting" and view["progress"] == {
        "stage": "square", "processed": 0, "total": 30, "message": "map stage"}
    drain()
    done = job(j["id"])
    assert done.status == Status.SUCCEEDED, done.error
    assert done.fan_ins == 1 and done.attempts == 1
    assert _result(j["id"]) == {"count": 30, "sum_of_squares": float(sum(x * x for x in numbers)), "chunks": 6,
                                "skipped": []}
    assert all(c.status == ChunkStatus.SUCCEEDED and c.attempts == 1 for c in ChunkStore().list_stage("local", j["id"], "square"))


def test_a_chunk_delivered_twice_at_once_runs_once_and_fan_in_fires_once() -> None:
    j = submit("fanout", {"chunk_size": 10}, list(range(20)))
    run_worker_once()
    queue = get_settings().chunks_queue
    first, second = receive(queue), receive(queue)
    assert first is not None and second is not None
    outcomes: list[str] = []
    texts = [first.get_body().decode()] * 3 + [second.get_body().decode()] * 3
    threads = [threading.Thread(target=lambda t=t: outcomes.append(Platform.from_settings().chunk_worker.handle(t, 1))) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(o.startswith("succeeded") for o in outcomes) == 2, outcomes
    assert sum(o.startswith("noop") for o in outcomes) == 4, outcomes
    assert sum("stage fired" in o for o in outcomes) == 1, outcomes
    resumes = get_queue_client().peek_messages(max_messages=10)
    assert len(resumes) == 1 and b'"r":1' in base64.b64decode(resumes[0].content)
    drain()
    assert job(j["id"]).status == Status.SUCCEEDED and job(j["id"]).fan_ins == 1


def test_poison_chunk_within_error_budget_is_listed_as_skipped() -> None:
    j = submit("fanout", {"chunk_size": 10, "fail_chunks": [2], "fail_permanently": True, "error_budget": 0.2},
               list(range(50)))
    drain()
    done = job(j["id"])
    assert done.status == Status.SUCCEEDED, done.error
    result = _result(j["id"])
    assert result["count"] == 40
    assert result["skipped"] == [{"stage": "square", "chunk": 2, "items": 10, "status": "failed",
                                  "error": {"type": "PermanentError", "message": "chunk 2 fails on purpose"}}]


def test_poison_chunk_over_the_budget_fails_the_job_with_a_reason() -> None:
    j = submit("fanout", {"chunk_size": 10, "fail_chunks": [1], "error_budget": 0.05}, list(range(30)))
    drain(timeout=90, idle=6)  # retries of the failing chunk are delayed by up to 4 s
    failed = job(j["id"])
    assert failed.status == Status.FAILED
    assert failed.error is not None and failed.error.type == "ChunkFailed"
    assert "chunk 1" in failed.error.message and "RuntimeError" in failed.error.message
    chunk = ChunkStore().get("local", j["id"], "square", 1)
    assert chunk.status == ChunkStatus.FAILED and chunk.attempts == 3


def test_cancelling_a_waiting_job_skips_its_remaining_chunks() -> None:
    j = submit("fanout", {"chunk_size": 5}, list(range(30)))
    run_worker_once()
    resp = http("cancel_job", "POST", f"jobs/{j['id']}/cancel", route_params={"id": j["id"]})
    assert resp.status_code == 200 and body_of(resp)["status"] == "cancelled"
    drain()
    chunks = ChunkStore().list_stage("local", j["id"], "square")
    assert {c.status for c in chunks} <= {ChunkStatus.CANCELLED, ChunkStatus.PENDING}
    assert all(c.attempts == 0 for c in chunks)
    assert job(j["id"]).status == Status.CANCELLED


def test_two_jobs_share_the_chunks_queue_fairly() -> None:
    big = submit("fanout", {"chunk_size": 2}, list(range(40)))  # 20 chunks
    small = submit("fanout", {"chunk_size": 2}, list(range(6)))  # 3 chunks
    run_worker_once()
    run_worker_once()
    queued = get_queue_client(get_settings().chunks_queue).peek_messages(max_messages=32)
    per_job: dict[str, int] = {}
    for m in queued:
        body = base64.b64decode(m.content).decode()
        job_id = big["id"] if big["id"] in body else small["id"]
        per_job[job_id] = per_job.get(job_id, 0) + 1
    # The window (3 here) caps each job: the big one cannot fill the queue ahead of the small one.
    assert per_job == {big["id"]: 3, small["id"]: 3}
    drain()
    assert job(big["id"]).status == job(small["id"]).status == Status.SUCCEEDED
