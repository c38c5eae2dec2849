"""A job deferred for memory (admission) is claimed, once memory is free, as a fresh job is: with no read first.

Runs on the fake here and on Azurite in its twin (tests/integration/core/…_on_azurite.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from shared.config.settings import get_settings
from shared.core.jobs import Status
from shared.runtime.admission import MemoryBudget
from tests.support.backends import Backend
from tests.support.scenarios import job, submit, worker
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def _short_deferral(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADMISSION_DELAY_SECONDS", "1")  # the least; on Azurite the re-sent message is waited for
    get_settings.cache_clear()


def _redelivered(backend: Backend) -> None:
    """The deferral's message visible again: the fake's clock moved past it, or on Azurite waited for."""
    backend.clock.advance(60)
    wait_until(lambda: backend.depth() > 0, timeout=30, what="the deferred job's message")


def _table(ops: Counter[str]) -> Counter[str]:
    return Counter({k: v for k, v in ops.items() if k.startswith("table:") and v})


def test_the_message_a_deferral_sends_carries_the_postponed_row(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new job's first message carries its row and ETag, so the claim is a conditional write with no read. A
    deferral moves the row's due time on (a write: a new ETag) and sends the message again; it used to send the
    message it had, whose ETag that very write had made stale, so the next delivery's claim was answered 412 and
    re-read the row: two table operations more on every delivery of a deferred job."""
    j = submit(backend).job
    with monkeypatch.context() as m:
        m.setattr(MemoryBudget, "try_reserve", lambda _self, _mb: None)  # the host's memory is full
        assert backend.deliver(worker(backend).handle) == "deferred"
    _redelivered(backend)
    before = backend.ops()
    w = worker(backend)
    assert backend.deliver(w.handle) == "succeeded"
    spent = _table(backend.ops() - before)
    assert job(backend, j.id).status == Status.SUCCEEDED
    # The claim and the finish, as for a job never deferred: no read, no write answered 412.
    assert spent.get("table:get", 0) == 0, spent


@pytest.mark.parametrize("mode", ["drop", "commit-5xx"])
def test_a_deferral_decided_by_rereading_sends_ids_only_and_the_job_still_runs(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The postponement's answer is lost, so it is decided by re-reading the row, without its inline input: that
    row must not travel as the job's snapshot (the next delivery would find no input and fail the job)."""
    j = submit(backend).job
    backend.faults.arm("table", mode, method="MERGE", contains='"available_at"', count=1)
    with monkeypatch.context() as m:
        m.setattr(MemoryBudget, "try_reserve", lambda _self, _mb: None)
        assert backend.deliver(worker(backend).handle) == "deferred"
    backend.faults.disarm()
    _redelivered(backend)
    assert backend.deliver(worker(backend).handle) == "succeeded"
    done = job(backend, j.id)
    assert done.status == Status.SUCCEEDED and done.attempts == 1
