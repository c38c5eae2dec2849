"""The chunk worker: claim one chunk of a map stage, run it in a child process, record it, settle the stage.

Same discipline as jobs, through the same lifecycle: a conditional claim
(``queued`` → ``running``, attempts + 1), a heartbeat while it runs, a delayed
message for a retry, a terminal state when attempts are used up, a released
claim when the worker itself fails, and a failure on the last delivery only if
this delivery holds the chunk. A chunk's output goes to a blob whose name
depends only on the chunk, so running it twice writes the same blob. After a
chunk ends, :meth:`Lifecycle.refill_or_fan_in` queues the next pending chunk and
fans in if the stage is complete.
"""

from __future__ import annotations

import gzip
import json
import logging
import time

from shared.config.hostconfig import attempt_timeout, host_config
from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import NotFound, StorageUnavailable, ThematiqError
from shared.core.jobs import Job, JobError, Status
from shared.core.leased import Ending, StoredResult
from shared.core.lifecycle import Lifecycle
from shared.core.messages import ChunkMessage
from shared.core.names import chunk_blob_name
from shared.observability import telemetry
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptHost, AttemptResult, RowLease
from shared.sdk.retry import RetryPolicy

log = logging.getLogger(__name__)


class ChunkLease(RowLease[Chunk]):
    """The claim on a running chunk. Its heartbeat also reads the parent, so cancelling the job stops it."""

    def __init__(self, lifecycle: Lifecycle, chunk: Chunk, claimed_at: float) -> None:
        super().__init__(lifecycle, chunk, f"job {chunk.job_id} chunk {chunk.stage}/{chunk.index}", claimed_at)
        #: A heartbeat found the job ended (or asked to stop): this chunk's ending starts no other chunk.
        self.job_ended = False

    @property
    def chunk(self) -> Chunk:
        return self.row

    def stop_requested(self) -> bool:
        try:
            parent = self.lifecycle.stores.jobs.get(self.row.tenant, self.row.job_id)
        except StorageUnavailable:
            # The renewal landed: raising would keep the runner from counting it, and its fence would kill an
            # attempt whose lease is fine. The next heartbeat asks the parent again.
            log.warning("chunk %s/%d: could not read its job to look for a cancel", self.row.stage, self.row.index)
            return False
        self.job_ended = self.job_ended or parent.status.terminal or parent.cancel_requested
        return self.job_ended


class ChunkWorker(AttemptHost):
    """One delivery of a chunk message runs one attempt of one chunk."""

    def handle(self, text: str, dequeue_count: int) -> str:
        msg = self._decode_or_poison(text, ChunkMessage.decode, "chunk", get_settings().chunks_queue)
        if msg is None:
            return "bad-message"
        held: list[tuple[Chunk, Chunk]] = []  # (as claimed, as it was before) once this delivery claims
        with telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, stage=msg.stage):
            try:
                return self._handle(msg, held)
            except Exception:
                self._after_worker_error(msg, held, last=dequeue_count >= host_config().max_dequeue_count)
                raise

    def _after_worker_error(self, msg: ChunkMessage, held: list[tuple[Chunk, Chunk]], *, last: bool) -> None:
        if not held:
            return  # never ours: the reaper's lost-message pass re-sends it if it is still queued
        claimed, before = held[-1]
        why = "the chunk worker failed on the last allowed delivery"
        self._give_back(claimed, before, last=last, why=why, traceparent=msg.traceparent)

    def _handle(self, msg: ChunkMessage, held: list[tuple[Chunk, Chunk]]) -> str:
        try:
            chunk = self.stores.chunks.get(msg.tenant, msg.job_id, msg.stage, msg.index, with_input=True)
        except NotFound:
            return "missing"
        if chunk.status != ChunkStatus.QUEUED or msg.attempt != chunk.attempts + 1:
            log.info(
                "chunk %s/%d: %s, attempt %d; message for attempt %d ignored",
                chunk.stage, chunk.index, chunk.status, chunk.attempts, msg.attempt,
            )
            return "noop"
        job = self.stores.jobs.get(msg.tenant, msg.job_id)
        if job.status.terminal or job.cancel_requested:
            self.lifecycle.cancel(chunk)
            if job.status == Status.WAITING:
                # A cancel that raced the suspension: end the job now rather than once every chunk is skipped.
                self.lifecycle.cancel(job)
            return "cancelled"
        # The fence counts from before the claim, as a job's does (shared.runtime.worker, _Delivery.claimed_at),
        # not from once the chunk's input is read: that read (a blob, with its timeouts) is part of the lease.
        claiming = time.monotonic()
        claimed = self.lifecycle.claim(chunk, msg.attempt)
        if not claimed.applied:
            return "noop-lost-race"
        held.append((claimed.row, chunk))
        return self._run(claimed.row, job, msg.traceparent, held, claiming)

    def _run(
        self, chunk: Chunk, job: Job, traceparent: str | None, held: list[tuple[Chunk, Chunk]], claimed_at: float
    ) -> str:
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None:
            # Disabled or not installed on this host: an ending like any other, so it settles the stage too.
            return self._end(chunk, Ending(Status.FAILED, JobError.of("UnknownPipeline", job.pipeline)), traceparent,
                             held)
        items = json.loads(gzip.decompress(chunk.input_inline or self.stores.blobs.get(chunk.input_blob or "")))
        settings = get_settings()
        spec = AttemptSpec(
            mode="map",
            job_id=job.id,
            tenant=job.tenant,
            attempt=chunk.attempts,
            pipeline=job.pipeline,
            pipeline_ref=self.registry.ref(job.pipeline),
            params=job.params,
            fn_ref=chunk.fn_ref,
            max_attempts=chunk.max_attempts,
            # Each chunk gets an equal share of what the job has left, so a fanned-out
            # stage cannot spend the job's budget once per chunk.
            llm_tokens_used=0,
            llm_token_limit=max(0, settings.llm_max_tokens_per_job - int(job.usage.get("llm_tokens", 0)))
            // max(1, chunk.of),
        )
        timeout = attempt_timeout(pipeline.timeout_seconds, settings.pipeline_timeout_seconds)
        # The same host memory budget as job attempts (shared.runtime.admission): the chunk's items are its input.
        estimate = self._estimate(pipeline, job.params, items, f"chunk {chunk.stage}/{chunk.index}")
        reservation = self.budget.try_reserve(estimate)
        if reservation is None:
            # No room now: give the claim back (attempts restored) and send the message again a little later.
            released = self.lifecycle.release(chunk, held[-1][1])
            held.clear()
            msg = ChunkMessage(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, chunk.attempts, traceparent)
            self._send_later(msg, released.row)
            return "deferred"
        try:
            lease = ChunkLease(self.lifecycle, chunk, claimed_at)
            outcome = self._attempt(lease, spec, timeout, settings, items)
        finally:
            reservation.release()
        held[-1] = (lease.chunk, held[-1][1])
        return self._record(lease.chunk, outcome, pipeline.retry, traceparent, held, refill=not lease.job_ended)

    def _record(
        self, chunk: Chunk, result: AttemptResult, retry: RetryPolicy, traceparent: str | None,
        held: list[tuple[Chunk, Chunk]], *, refill: bool = True,
    ) -> str:
        telemetry.record_usage("chunk", result.usage)
        if result.kind == "lost":
            held.clear()
            return "lost"
        if result.kind == "succeeded" and result.result is not None:
            binary = bool(result.binary)
            name = chunk_blob_name(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, "bin" if binary else "json")
            self.stores.blobs.put(name, result.result, "application/octet-stream" if binary else "application/json")
            ending = Ending(Status.SUCCEEDED, result=StoredResult(name, len(result.result)))
        elif result.kind == "cancelled":
            ending = Ending(Status.CANCELLED)
        else:
            decision, again = self._next_step(retry, chunk, result)
            if again:
                retried = self.lifecycle.finish(
                    chunk, Ending(Status.RETRYING, result.error, retry_in=decision.delay), traceparent
                )
                return "retrying" if retried.applied else "lost"
            ending = Ending(Status.FAILED, result.error or JobError.of("Error", "the chunk failed"))
        return self._end(chunk, ending, traceparent, held, refill=refill)

    def _end(
        self, chunk: Chunk, ending: Ending, traceparent: str | None, held: list[tuple[Chunk, Chunk]], *,
        refill: bool = True,
    ) -> str:
        """Record the chunk's ending, then refill the job's window or fan in: the last chunk to end settles it.

        ``refill=False``: a heartbeat of this chunk found its job ended (cancelled): no pending chunk is queued.
        """
        ended = self.lifecycle.finish(chunk, ending, traceparent)
        if not ended.applied:
            return "lost"
        held.clear()  # recorded: a failure from here on (looking at the stage) must not release it
        try:
            # A chunk whose heartbeat found its job ended (a cancel of a waiting job ends it at once) queues no
            # pending chunk, which would cost a write, a message and a delivery only to be skipped.
            check = self.lifecycle.refill_or_fan_in(chunk.tenant, chunk.job_id, chunk.stage, traceparent,
                                                    refill=refill)
        except ThematiqError:
            # The chunk is recorded; the reaper looks at a waiting job whose stage is done.
            log.warning("chunk %s/%d: could not look at the stage now; the reaper will", chunk.stage, chunk.index)
            return f"{ended.row.status.value}; stage deferred"
        return f"{ended.row.status.value}; stage {check.value}"
