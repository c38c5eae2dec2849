"""Findings of an independent review of the job life cycle, each a test that failed before its fix.

Each asserts what docs/architecture.md promises, on the in-memory fake and on Azurite.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import StorageUnavailable
from shared.core.jobs import Status
from shared.core.lifecycle import Lifecycle
from shared.core.messages import JobMessage
from shared.core.names import result_blob_name
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptRunner
from shared.runtime.worker import JobLease
from tests.support.scenarios import TENANT, drain, executions, job, reaper, submit, worker
from tests.support.backends import Backend


# -- 1: self-fencing is measured from the wrong clock and only between blocking calls ----------------
class _TimedLease:
    """A JobLease whose calls take as long as a real SDK call can (read timeout 30 s, then re-reads).

    ``mode``:
      * ``blocked``  the first renewal succeeds; the next one blocks for ``block`` s and then fails
                     (a MERGE that hangs to its read timeout, then re-reads that time out too);
      * ``slow-ok``  the first renewal writes its heartbeat at once but its answer arrives ``block`` s
                     later (the SDK retried a 5xx); every later renewal fails at once.
    ``heartbeat_written`` is the monotonic time of the last heartbeat that reached the row: the
    reaper's clock.
    """

    def __init__(self, inner: JobLease, mode: str, block: float) -> None:
        self.inner, self.mode, self.block = inner, mode, block
        self.label = inner.label
        self.calls = 0
        self.heartbeat_written = time.monotonic()

    def renew(self, progress: Any) -> bool:
        self.calls += 1
        if self.calls == 1:
            cancel = self.inner.renew(progress)
            self.heartbeat_written = time.monotonic()
            if self.mode == "slow-ok":
                time.sleep(self.block)
            return cancel
        if self.mode == "blocked" and self.calls == 2:
            time.sleep(self.block)
        raise StorageUnavailable("storage did not answer")


@pytest.mark.parametrize("mode", ["blocked", "slow-ok"])
def test_1_fence_stops_the_attempt_before_its_heartbeat_is_stale(backend: Backend, mode: str) -> None:
    j = submit(backend, "sleep", {"seconds": 30, "steps": 30}).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed is not None
    settings = get_settings()  # heartbeat 0.2 s, stale 2 s: the fence is at 1.2 s
    spec = AttemptSpec(mode="run", job_id=j.id, tenant=TENANT, attempt=1, pipeline="sleep",
                       pipeline_ref="pipelines.sleep:PIPELINE", params=claimed.params, max_attempts=3)
    lease = _TimedLease(JobLease(life, claimed), mode, block=2.5)
    outcome = AttemptRunner(lease, spec, 60, settings).run([1])  # type: ignore[arg-type]
    ran_on = time.monotonic() - lease.heartbeat_written
    assert outcome.kind == "lost"
    # The reaper hands the job on once the row's heartbeat is older than heartbeat_stale_seconds:
    # the fenced attempt must be gone by then, or two attempts run at once.
    assert ran_on < settings.heartbeat_stale_seconds, (
        f"the pipeline ran on {ran_on:.1f} s after the last heartbeat reached the row "
        f"(stale threshold {settings.heartbeat_stale_seconds} s)"
    )


def test_1_fence_counts_from_the_claims_heartbeat_not_from_runner_start(backend: Backend) -> None:
    j = submit(backend, "sleep", {"seconds": 30, "steps": 30}).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed is not None
    claimed_at = time.monotonic()  # the claim wrote heartbeat_at now
    backend.faults.arm("table", "refuse", method="MERGE", count=100_000)  # no renewal gets through
    time.sleep(1.0)  # Worker._run: reading a claim-checked input blob (the SDK may take ~90 s)
    settings = get_settings()
    spec = AttemptSpec(mode="run", job_id=j.id, tenant=TENANT, attempt=1, pipeline="sleep",
                       pipeline_ref="pipelines.sleep:PIPELINE", params=claimed.params, max_attempts=3)
    outcome = AttemptRunner(JobLease(life, claimed, claimed_at), spec, 60, settings).run([1])
    ran_on = time.monotonic() - claimed_at
    assert outcome.kind == "lost"
    assert ran_on < settings.heartbeat_stale_seconds, (
        f"the pipeline ran on {ran_on:.1f} s after the claim's heartbeat (stale {settings.heartbeat_stale_seconds} s)"
    )


# -- 2: the last delivery fails a job whose result is already stored --------------------------------
def test_2_last_delivery_with_a_stored_result_does_not_fail_the_job(backend: Backend) -> None:
    j = submit(backend).job
    # The pipeline succeeds and its result blob is stored; recording "succeeded" fails (Contended / 503s).
    backend.faults.arm("table", "refuse", method="MERGE", contains='"status":"succeeded"', count=1000)
    out = backend.deliver(lambda text, _n: worker(backend).handle(text, 5))  # the last allowed delivery
    assert out is not None and out.startswith("error:"), out
    backend.faults.disarm()
    assert executions(j.id) == 1  # the pipeline finished; its result was kept (blob and/or row)
    row = job(backend, j.id)
    assert row.status != Status.FAILED, (
        f"job failed ({row.error}) although attempt 1 finished and its result is stored"
    )


# -- 3: a claim that committed but could not be confirmed is never released ------------------------
def test_3_an_unconfirmed_claim_is_released_not_left_to_burn_the_attempt(backend: Backend) -> None:
    j = submit(backend).job
    jobs_store = backend.stores.jobs
    jobs_store.update(job(backend, j.id), max_attempts=1)  # its last attempt (any attempt burns the same way)
    drain(backend)  # the first message carried the row's old ETag: send a plain one
    Lifecycle(backend.stores).send(JobMessage(TENANT, j.id, 1))
    # The claim commits and its answer is lost; the reads that would decide it fail too (3 reads x 3 tries).
    claim = backend.faults.arm("table", "drop", method="MERGE", contains='"status":"running"', count=1)
    backend.faults.arm("table", "refuse", method="GET", count=9, after=claim)
    first = backend.deliver(worker(backend).handle)
    backend.faults.disarm()
    assert first == "error:ClaimUnresolved", first
    # The claim was given back by owner: the host's redelivery claims and runs it.
    assert backend.deliver(worker(backend).handle) == "succeeded"
    final = job(backend, j.id)
    assert final.status == Status.SUCCEEDED and final.attempts == 1 and executions(j.id) == 1


# -- 4: a resumed attempt released with a stored result runs its pipeline again ---------------------
def test_4_released_resume_with_a_stored_result_finishes_from_the_blob(backend: Backend) -> None:
    j = submit(backend).job
    drain(backend)  # the submission's message: this test drives the claim itself
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed is not None
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", of=1, plan="p")])
    assert life.suspend(claimed, "s") is not None
    chunk = life.claim_chunk(backend.stores.chunks.get(TENANT, j.id, "s", 0), 1)
    assert chunk is not None and life.finish_chunk(chunk, ChunkStatus.SUCCEEDED, output_blob="o0") is not None
    assert life.settle(TENANT, j.id, "s") == "fired"
    fired = backend.stores.jobs.get(TENANT, j.id, with_input=True)
    # A worker takes the resume, the attempt finishes and stores its result, then the outcome write fails:
    resumed = life.resume(fired, 1)
    assert resumed is not None
    name = result_blob_name(TENANT, j.id, 1)
    backend.stores.blobs.put(name, b'{"echo": [1]}', "application/json")
    assert life.release(resumed, fired, (name, 13)) is not None
    released = job(backend, j.id)
    assert released.status == Status.WAITING and released.result_blob == name
    outcome = backend.deliver(worker(backend).handle)  # the host redelivers the resume message
    assert executions(j.id) == 0, f"redelivery {outcome!r} ran the pipeline again despite {name}"


# -- 5: the chunks' lost-message pass floods a backlog (issue 11 h, for chunks) -----------------------
def test_5_chunks_behind_a_backlog_are_not_resent(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.config import settings as settings_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend).job
    life = Lifecycle(backend.stores)
    n = 5
    life.create_chunks(TENANT, j.id, "s", [
        Chunk(TENANT, j.id, "s", i, ChunkStatus.PENDING, 1, "m:f", of=n, plan="p") for i in range(n)
    ])
    # Released as settle does: queued, with queued_at, and each chunk's message sent (waiting behind a backlog).
    assert life.pump(backend.stores.chunks.list_stage(TENANT, j.id, "s"), n) == n
    chunks_queue = get_settings().chunks_queue
    resent = 0
    for _ in range(3):  # three reaper periods while the backlog drains slowly
        backend.clock.advance(1.5)
        resent += len(reaper(backend).run().chunks_requeued)
    depth = len(list(backend.raw_queue(chunks_queue).peek_messages(max_messages=32)))
    assert resent == 0, f"{resent} duplicate chunk messages for {n} chunks whose messages were queued (depth {depth})"


# -- 6: (working tree) an input read before the claim can fail every delivery for ever -------------------------------
def test_6_a_job_whose_input_can_never_be_read_still_ends(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    from shared.config import settings as settings_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)]).job
    assert j.input_blob
    backend.stores.blobs.delete_prefix(j.input_blob)  # the claim-checked input is gone (or unreadable)
    outcomes: list[str | None] = []
    for _cycle in range(2):
        for _ in range(5):  # host.json maxDequeueCount
            outcomes.append(backend.deliver(worker(backend).handle))
        drain(backend)  # the host moves the message to the poison queue
        backend.clock.advance(1.5)
        outcomes.append(f"reaper requeued {reaper(backend).run().requeued_lost}")
    final = job(backend, j.id)
    assert final.status.terminal, f"still {final.status} after {outcomes}"


# -- 8: (working tree) admission deferral defeats the lost-message pass's backlog check ------------------------------
def test_8_deferred_jobs_are_not_reenqueued_as_lost(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend.name != "fake":
        pytest.skip("moves the platform's clock far past Azurite's message timestamps")
    from shared.config import settings as settings_mod
    from shared.runtime import worker as worker_mod

    monkeypatch.setenv("QUEUED_STALE_SECONDS", "1")
    settings_mod.get_settings.cache_clear()
    budget = getattr(worker_mod, "BUDGET", None)
    if budget is None:
        pytest.skip("no admission control in this tree")
    monkeypatch.setattr(budget, "try_reserve", lambda _mb: None)  # the host's memory stays full for a while
    j = submit(backend).job
    delay = get_settings().admission_delay_seconds + 1
    requeued: list[str] = []
    for _period in range(4):
        for _ in range(2):
            while backend.deliver(worker(backend).handle) is not None:  # every copy is deferred again
                pass
            backend.clock.advance(delay)
        requeued += reaper(backend).run().requeued_lost
    depth = backend.depth()
    assert requeued == [] and depth == 1, (
        f"the reaper re-enqueued {j.id} {len(requeued)} times while its message was being deferred; "
        f"{depth} copies of it now circulate"
    )


# -- 10: one unreadable chunk row stops chunk recovery for every tenant (issue 11 g, for chunks) ---------------------
def test_10_an_unreadable_chunk_row_does_not_stop_chunk_recovery(backend: Backend) -> None:
    from datetime import timedelta

    from shared.core.jobs import utcnow

    j = submit(backend).job
    life = Lifecycle(backend.stores)
    claimed = life.claim(backend.stores.jobs.get(TENANT, j.id, with_input=True), 1)
    assert claimed is not None
    life.create_chunks(TENANT, j.id, "s", [Chunk(TENANT, j.id, "s", 0, ChunkStatus.QUEUED, 1, "m:f", of=1, plan="p")])
    assert life.suspend(claimed, "s") is not None  # the job waits for its map stage
    assert life.claim_chunk(backend.stores.chunks.get(TENANT, j.id, "s", 0), 1) is not None  # its worker dies
    table = backend.stores.chunks.table  # type: ignore[attr-defined]
    table.create_entity({"PartitionKey": "other-tenant", "RowKey": "0~c~s~00000", "kind": "chunk",
                         "status": "running", "heartbeat_at": utcnow() - timedelta(hours=1)})  # a hand-edited row
    backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
    report = reaper(backend).run()
    assert report.chunks_requeued == [f"{j.id}/s/0"], report.summary()


# -- 11: no heartbeat covers the outcome write: a slow result upload is reaped and the result orphaned ---------------
def test_11_a_slow_result_upload_is_not_reaped_from_under_the_worker(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import secrets

    j = submit(backend, input_=[secrets.token_hex(16) for _ in range(4000)]).job  # a result too big for the row
    blobs = backend.stores.blobs
    original_put = blobs.put
    reaped: list[str] = []

    def slow_put(name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        if name == result_blob_name(TENANT, j.id, 1) and not reaped:
            # The upload of a large result takes longer than the stale threshold (BlobRetry: 2 retries, 30 s read
            # timeout each): no heartbeat is sent between the pipeline's end and the outcome write.
            backend.clock.advance(get_settings().heartbeat_stale_seconds + 0.5)
            reaped.append(str(reaper(backend).run().requeued_stale))
        original_put(name, data, content_type)

    monkeypatch.setattr(blobs, "put", slow_put)
    first = backend.deliver(worker(backend).handle)
    monkeypatch.setattr(blobs, "put", original_put)
    for _ in range(3):
        backend.deliver(worker(backend).handle)
    final = job(backend, j.id)
    assert executions(j.id) == 1 and final.status == Status.SUCCEEDED and final.attempts == 1, (
        f"first delivery {first!r}, reaper requeued {reaped}; the job ended {final.status} after "
        f"{executions(j.id)} runs (attempt {final.attempts}); result-1 orphaned"
    )
