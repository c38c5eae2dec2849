"""A job cancelled while its map stage runs: the chunks that end after the cancel start no more work.

Runs on the fake here and on Azurite in its twin (tests/integration/core/test_cancel_during_a_map_stage_on_azurite.py).
"""

from __future__ import annotations

import gzip
from collections import Counter
from typing import Any

import pytest

from shared.config.settings import Settings, get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from shared.core.registry import default_registry
from shared.runtime.chunk_worker import ChunkWorker
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptResult, Lease
from tests.support.backends import Backend
from tests.support.scenarios import TENANT, job, service, submit


class _CancelledWhileRunning:
    """A chunk attempt during which the job is cancelled through the API: the attempt sees it and stops, as a
    chunk's heartbeat does when it reads the cancelled parent."""

    def __init__(self, backend: Backend, job_id: str, ends: str) -> None:
        self.backend, self.job_id, self.ends = backend, job_id, ends

    def __call__(self, lease: Lease, spec: AttemptSpec, timeout: float, settings: Settings) -> _CancelledWhileRunning:
        self.lease = lease
        return self

    def run(self, input_value: Any) -> AttemptResult:
        assert service(self.backend).cancel(TENANT, self.job_id).status == Status.CANCELLED
        assert self.lease.renew(None)  # the next heartbeat reads the job: stop
        # It stops, or it had just finished when the stop came (its result is still recorded).
        return AttemptResult("cancelled") if self.ends == "cancelled" else AttemptResult("succeeded", result=b"[1]")


def _stage(backend: Backend, job_id: str) -> Counter[str]:
    return Counter(c.status.value for c in backend.stores.chunks.list_stage(TENANT, job_id, "square"))


@pytest.mark.parametrize("ends", ["cancelled", "succeeded"])
def test_a_chunk_that_stops_for_a_cancel_queues_no_pending_chunk(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, ends: str
) -> None:
    """Whether the chunk then stops or had just finished, a heartbeat saw its job cancelled. It used to refill the
    job's window as any chunk ending does: the next pending chunk was dispatched (a write
    and a message) for a job already cancelled, and its delivery then read the chunk and the job only to cancel it.
    Up to the window's width of such dispatches per cancelled job, each one write, one send, one delivery and
    three more storage operations, for nothing."""
    monkeypatch.setenv("MAX_CHUNKS_IN_FLIGHT_PER_JOB", "2")
    get_settings.cache_clear()
    chunks_queue = get_settings().chunks_queue
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed.applied
    life.create_chunks(TENANT, j.id, "square", [
        Chunk(TENANT, j.id, "square", i, ChunkStatus.PENDING, 1, "m:f", of=6, plan="p",
              input_inline=gzip.compress(b"[1]"))
        for i in range(6)
    ])
    assert life.suspend(claimed.row, "square").applied  # waiting: two chunks queued (the window), their messages sent
    assert _stage(backend, j.id) == {"queued": 2, "pending": 4}
    assert backend.depth(chunks_queue) == 2

    running = ChunkWorker(backend.stores, default_registry(), runner=_CancelledWhileRunning(backend, j.id, ends))
    assert (backend.deliver(running.handle, chunks_queue) or "").startswith(f"{ends}; stage")

    assert job(backend, j.id).status == Status.CANCELLED
    # Nothing new was queued: the other chunk's message is the only one left, and it skips its chunk.
    assert _stage(backend, j.id) == {ends: 1, "queued": 1, "pending": 4}
    assert backend.depth(chunks_queue) == 1
    assert backend.deliver(running.handle, chunks_queue) == "cancelled"
    assert backend.deliver(running.handle, chunks_queue) is None
    assert _stage(backend, j.id)[ChunkStatus.PENDING.value] == 4
