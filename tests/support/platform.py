"""Small helpers for platform tests that call functions directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from shared.config import settings
from shared.core.jobs import Job
from shared.storage import connections
from shared.storage.job_store import JobStore
from tests.support.direct import body_of, http
from tests.support.waiting import wait_until


def fast_settings(monkeypatch: pytest.MonkeyPatch, **overrides: str) -> None:
    values = {
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.2",
        "HEARTBEAT_SECONDS": "0.5",
        # An attempt fences itself after 0.6 x this without a renewal: 5 s (a 3 s fence) is one renewal slowed by a
        # loaded machine, and the attempt ended "lost" where a test expected it to finish or be cancelled. No test
        # here waits for a heartbeat to go stale (the reaper tests write rows minutes old), so 30 s costs nothing.
        "HEARTBEAT_STALE_SECONDS": "30",
        "CANCEL_GRACE_SECONDS": "1",
        **overrides,
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    settings.get_settings.cache_clear()
    connections.reset_clients()


def submit(
    pipeline: str, params: dict[str, Any] | None = None, input_: Any = None, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    resp = http(
        "submit_job",
        "POST",
        "jobs",
        body={"pipeline": pipeline, "params": params or {}, "input": input_},
        headers=headers,
    )
    assert resp.status_code == 202, resp.get_body()
    return body_of(resp)


def job(job_id: str, tenant: str = "local") -> Job:
    return JobStore().get(tenant, job_id)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1, what: str = "") -> Any:
    return wait_until(predicate, timeout, interval, what)
