"""A parked job (its tenant's fairness window full) says so to its poller, with its place in the wait list, and is
polled less often than a queued one. Review44p: it was answered like any queued job, ``Retry-After: 1``, while it
may wait for many of its tenant's jobs to end. Fake and Azurite."""

from __future__ import annotations

import json

import pytest

from shared.api import polling
from shared.core.jobs import Status
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, service, worker

WINDOW = 2


@pytest.fixture(autouse=True)
def _window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANT_MAX_IN_FLIGHT", str(WINDOW))


def _submit(b: Backend, n: int) -> list[str]:
    body = json.dumps({"pipeline": "echo", "params": {}, "input": [1]}).encode()
    return [service(b).submit(TENANT, body, None).job.id for _ in range(n)]


def test_a_parked_job_shows_its_place_and_a_longer_retry_after(backend: Backend) -> None:
    ids = _submit(backend, WINDOW + 3)
    windowed, parked = ids[:WINDOW], ids[WINDOW:]
    for job_id in windowed:
        job = service(backend).get(TENANT, job_id)
        assert job.status == Status.QUEUED and job.progress.stage != "parked"
        assert polling.retry_after(job) == polling.LOOKED_SECONDS  # two requests a poll: one a second
    for place, job_id in enumerate(parked, 1):
        job = service(backend).get(TENANT, job_id)
        assert job.status == Status.QUEUED
        assert job.progress.stage == "parked" and f"{place} of" in job.progress.message, job.progress
        assert polling.retry_after(job) == max(polling.PARKED_SECONDS, place)
    # One job ends: the oldest parked job gets its slot and is queued like the others; the rest move up.
    assert backend.deliver(worker(backend).handle) == "succeeded"
    assert service(backend).get(TENANT, parked[0]).progress.stage != "parked"
    second = service(backend).get(TENANT, parked[1])
    assert second.progress.stage == "parked" and "1 of" in second.progress.message


def test_no_window_no_look(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANT_MAX_IN_FLIGHT", "0")
    (job_id,) = _submit(backend, 1)
    job = service(backend).get(TENANT, job_id)
    assert job.progress.stage != "parked" and polling.retry_after(job) == 1
