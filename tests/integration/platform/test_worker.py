"""The queue worker and the reaper, called directly against Azurite."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest

from shared.config.settings import get_settings
from shared.core.jobs import Status, utcnow
from shared.platform import Platform
from shared.storage.connections import get_queue_client
from shared.storage.job_store import JobStore
from tests.support.direct import functions, receive, run_reaper, run_worker_once
from tests.support.platform import fast_settings, job, submit, wait_for


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch)


def test_duplicate_delivery_runs_the_pipeline_once() -> None:
    j = submit("sleep", {"seconds": 1, "steps": 2})
    msg = receive()
    assert msg is not None
    outcomes: list[str] = []
    body = msg.get_body().decode()

    def deliver() -> None:
        outcomes.append(Platform.from_settings().worker.handle(body, 1))

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes).count("succeeded") == 1, outcomes
    assert all(o.startswith("noop") for o in outcomes if o != "succeeded"), outcomes
    stored = job(j["id"])
    assert stored.status == Status.SUCCEEDED and stored.attempts == 1


def test_raising_pipeline_fails_after_max_dequeue_count_and_goes_to_poison() -> None:
    j = submit("sleep", {"seconds": 0.1, "steps": 1, "fail": "raise"})
    assert j["max_attempts"] == 5

    def step() -> bool:
        run_worker_once()
        return job(j["id"]).status.terminal

    wait_for(step, timeout=60, interval=0.3)
    stored = job(j["id"])
    assert stored.status == Status.FAILED
    assert stored.attempts == 5
    assert stored.error is not None and stored.error.type == "RuntimeError"
    assert "attempts exhausted (5/5)" in stored.error.message
    poison = get_queue_client(get_settings().poison_queue).peek_messages(max_messages=5)
    assert [json.loads(__import__("base64").b64decode(m.content))["j"] for m in poison] == [j["id"]]


def test_permanent_error_fails_at_once() -> None:
    j = submit("sleep", {"seconds": 0.1, "steps": 1, "fail": "permanent"})
    run_worker_once()
    stored = job(j["id"])
    assert stored.status == Status.FAILED and stored.attempts == 1
    assert stored.error is not None and stored.error.type == "PermanentError"


def test_sigkilled_pipeline_is_retried_with_the_exit_reason_and_the_host_survives() -> None:
    j = submit("sleep", {"seconds": 0.4, "steps": 2, "fail": "kill", "fail_attempts": 1})
    run_worker_once()
    stored = job(j["id"])
    assert stored.status == Status.RETRYING
    assert stored.error is not None and stored.error.type == "ProcessDied"
    assert "SIGKILL" in stored.error.message
    wait_for(lambda: run_worker_once() and job(j["id"]).status.terminal, timeout=30, interval=0.3)
    assert job(j["id"]).status == Status.SUCCEEDED and job(j["id"]).attempts == 2


def test_hard_exit_is_recorded() -> None:
    j = submit("sleep", {"seconds": 0.2, "steps": 2, "fail": "exit"})
    run_worker_once()
    stored = job(j["id"])
    assert stored.status == Status.RETRYING
    assert stored.error is not None and "exited with code 3" in stored.error.message


def test_reaper_requeues_a_stale_job_then_fails_it_when_attempts_are_used_up() -> None:
    j = submit("sleep", {"seconds": 0.1, "steps": 1})
    msg = receive()  # the original message "dies with its worker"
    assert msg is not None
    store = JobStore()
    stale = utcnow() - timedelta(seconds=60)
    current = store.get("local", j["id"])
    store.update(current, status=Status.RUNNING, attempts=1, owner="dead-worker", heartbeat_at=stale, started_at=stale)
    run_reaper()
    stored = job(j["id"])
    assert stored.status == Status.RETRYING and stored.error is not None and stored.error.type == "WorkerLost"
    # The reaper's message starts attempt 2; the old message (attempt 1) is a no-op.
    assert Platform.from_settings().worker.handle(msg.get_body().decode(), 2) == "noop-stale"
    run_worker_once()
    assert job(j["id"]).status == Status.SUCCEEDED and job(j["id"]).attempts == 2

    k = submit("sleep", {"seconds": 0.1, "steps": 1})
    receive()
    current = store.get("local", k["id"])
    store.update(current, status=Status.RUNNING, attempts=current.max_attempts, owner="dead", heartbeat_at=stale)
    run_reaper()
    stored = job(k["id"])
    assert stored.status == Status.FAILED and stored.error is not None
    assert "attempts exhausted" in stored.error.message


def test_two_reapers_at_once_enqueue_once() -> None:
    j = submit("sleep", {"seconds": 0.1, "steps": 1})
    get_queue_client().clear_messages()
    store = JobStore()
    current = store.get("local", j["id"])
    store.update(current, status=Status.RUNNING, attempts=1, owner="dead", heartbeat_at=utcnow() - timedelta(minutes=5))
    barrier = threading.Barrier(2)

    def reap() -> None:
        barrier.wait()
        run_reaper()

    threads = [threading.Thread(target=reap) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(get_queue_client().peek_messages(max_messages=10)) == 1


def test_reaper_reenqueues_a_queued_job_whose_message_was_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, QUEUED_STALE_SECONDS="1")
    j = submit("echo", {}, "x")
    get_queue_client().clear_messages()  # a crash between commit and enqueue
    time.sleep(1.2)  # not a synchronisation: the job must really be older than QUEUED_STALE_SECONDS on Azurite
    run_reaper()
    run_worker_once()
    assert job(j["id"]).status == Status.SUCCEEDED


def test_cancel_queued_job_at_once() -> None:
    from tests.support.direct import body_of, http

    j = submit("sleep", {"seconds": 5})
    resp = http("cancel_job", "POST", f"jobs/{j['id']}/cancel", route_params={"id": j["id"]})
    assert resp.status_code == 200 and body_of(resp)["status"] == "cancelled"
    assert Platform.from_settings().worker.handle(receive().get_body().decode(), 1) == "noop-terminal"  # type: ignore[union-attr]


@pytest.mark.parametrize("fail", ["none", "hang"])
def test_cancel_running_job(fail: str) -> None:
    from tests.support.direct import body_of, http

    j = submit("sleep", {"seconds": 60, "steps": 120, "fail": fail})
    msg = receive()
    assert msg is not None
    t = threading.Thread(target=functions()["job_worker"], args=(msg,))
    t.start()
    wait_for(lambda: job(j["id"]).status == Status.RUNNING, timeout=60)  # a child's start; slow under load
    started = time.monotonic()
    resp = http("cancel_job", "POST", f"jobs/{j['id']}/cancel", route_params={"id": j["id"]})
    assert resp.status_code == 202 and body_of(resp)["cancel_requested"] is True
    t.join(timeout=30)
    assert not t.is_alive()
    elapsed = time.monotonic() - started
    assert job(j["id"]).status == Status.CANCELLED
    # Cooperative: within a heartbeat; forced: heartbeat + grace period. The bound only says the cancel stopped
    # the 60 s pipeline (generous: the suite runs on loaded machines, where the kill and the join take seconds).
    assert elapsed < 20, elapsed


def test_an_attempt_over_its_timeout_is_killed_and_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, PIPELINE_TIMEOUT_SECONDS="2")
    j = submit("sleep", {"seconds": 60, "steps": 60, "fail": "hang"})
    started = time.monotonic()
    run_worker_once()
    assert time.monotonic() - started < 30  # killed at its 2 s timeout, not at the pipeline's 60 s end
    stored = job(j["id"])
    assert stored.status == Status.FAILED
    assert stored.error is not None and stored.error.type == "Timeout"
    assert "exceeded its 2 s timeout" in stored.error.message


def test_retention_deletes_finished_jobs_with_their_blobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.storage.blobs import BlobStore, job_prefix

    j = submit("echo", {}, {"keep": "x" * 40_000})  # a result over 32 KiB goes to a blob
    run_worker_once()
    prefix = job_prefix("local", j["id"])
    assert list(BlobStore().container.list_blobs(name_starts_with=prefix))
    fast_settings(monkeypatch, RETENTION_DAYS="0.00001")  # under a second
    time.sleep(1.2)  # not a synchronisation: the job must really be older than its retention
    run_reaper()
    from shared.core.errors import NotFound

    with pytest.raises(NotFound):
        JobStore().get("local", j["id"])
    assert not list(BlobStore().container.list_blobs(name_starts_with=prefix))


def test_a_result_stands_even_if_the_pipeline_process_lingers() -> None:
    j = submit("sleep", {"seconds": 0.2, "steps": 2, "fail": "linger"})
    started = time.monotonic()
    run_worker_once()
    assert time.monotonic() - started < 20
    stored = job(j["id"])
    assert stored.status == Status.SUCCEEDED, stored.error
