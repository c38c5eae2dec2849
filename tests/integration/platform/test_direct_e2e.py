"""Submit → claim → progress → succeeded → result, calling the functions directly against Azurite."""

from __future__ import annotations

import pytest

from shared.observability.metering import METER
from shared.storage.connections import get_queue_client
from tests.support.direct import body_of, http, run_worker_once


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROGRESS_MIN_INTERVAL_SECONDS", "0")
    from shared.config import settings

    settings.get_settings.cache_clear()


def test_echo_end_to_end() -> None:
    resp = http("submit_job", "POST", "jobs", body={"pipeline": "echo", "params": {}, "input": {"hello": ["world", 1]}})
    assert resp.status_code == 202, resp.get_body()
    job = body_of(resp)
    assert resp.headers["Location"] == f"/api/jobs/{job['id']}"
    assert job["status"] == "queued"
    msg = run_worker_once()
    assert msg is not None and msg.dequeue_count == 1
    got = body_of(http("get_job", "GET", f"jobs/{job['id']}", route_params={"id": job["id"]}))
    assert got["status"] == "succeeded", got
    assert got["attempts"] == 1
    assert got["progress"]["stage"] == "echo"
    assert got["started_at"] and got["finished_at"] and got["heartbeat_at"]
    result = http("get_job_result", "GET", f"jobs/{job['id']}/result", route_params={"id": job["id"]})
    assert result.status_code == 200
    assert body_of(result) == {"echo": {"hello": ["world", 1]}}
    assert get_queue_client().peek_messages() == []


def test_transactions_per_noop_job_within_budget() -> None:
    http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1})  # warm: creates table/queue/container
    run_worker_once()
    METER.reset()
    resp = http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": [1, 2, 3]})
    assert resp.status_code == 202
    run_worker_once()
    counts = METER.snapshot()
    print(dict(counts))
    assert METER.billable(counts) <= 10, counts
