"""The chunk worker: claim one chunk of a map stage, run it in a child process, record it, settle the stage.

Same discipline as jobs, through the same lifecycle: a conditional claim
(``queued`` → ``running``, attempts + 1), a heartbeat while it runs, a delayed
message for a retry, a terminal state when attempts are used up, a released
claim when the worker itself fails, and a failure on the last delivery only if
this delivery holds the chunk. A chunk's output goes to a blob whose name
depends only on the chunk, so running it twice writes the same blob. After a
chunk ends, :meth:`Lifecycle.settle` releases the next pending chunk and fans
in if the stage is complete.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from datetime import timedelta

from shared.config.hostconfig import attempt_timeout, host_config
from shared.config.settings import get_settings
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import NotFound, StorageUnavailable, ThematiqError
from shared.core.jobs import Job, Progress, Status
from shared.core.lifecycle import Lifecycle
from shared.core.messages import BadMessage, ChunkMessage
from shared.core.names import chunk_blob_name
from shared.observability import telemetry
from shared.runtime.admission import BUDGET
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptHost, Outcome
from shared.sdk.retry import RetryPolicy

log = logging.getLogger(__name__)


class ChunkLease:
    """The claim on a running chunk. Its heartbeat also reads the parent, so cancelling the job stops it."""

    def __init__(self, lifecycle: Lifecycle, chunk: Chunk) -> None:
        self.lifecycle = lifecycle
        self.chunk = chunk
        self.label = f"job {chunk.job_id} chunk {chunk.stage}/{chunk.index}"
        self.renewed_at = time.monotonic()  # just claimed

    def renew(self, progress: Progress | None) -> bool:
        self.chunk = self.lifecycle.renew_chunk(self.chunk, progress.processed if progress is not None else None)
        self.renewed_at = time.monotonic()
        parent = self.lifecycle.stores.jobs.get(self.chunk.tenant, self.chunk.job_id)
        return parent.status.terminal or parent.cancel_requested


class ChunkWorker(AttemptHost):
    """One delivery of a chunk message runs one attempt of one chunk."""

    def handle(self, text: str, dequeue_count: int) -> str:
        try:
            msg = ChunkMessage.decode(text)
        except BadMessage:
            log.error("dropping a message that is not a chunk message; copied to the poison queue")
            self.stores.messages.send_poison(text, get_settings().chunks_queue)
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
        try:
            if last:
                self.lifecycle.fail_chunk(
                    claimed, "PoisonMessage", "the chunk worker failed on the last allowed delivery", claimed=True
                )
                self.lifecycle.settle(msg.tenant, msg.job_id, msg.stage, msg.traceparent)
            else:
                self.lifecycle.release_chunk(claimed, before)
        except Exception:
            log.exception("chunk %s/%d: could not release the claim after a worker error", msg.stage, msg.index)

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
            self.lifecycle.cancel_chunk(chunk)
            if job.status == Status.WAITING:
                # A cancel that raced the suspension: end the job now rather than once every chunk is skipped.
                self.lifecycle.cancel(job)
            return "cancelled"
        claimed = self.lifecycle.claim_chunk(chunk, msg.attempt)
        if claimed is None:
            return "noop-lost-race"
        held.append((claimed, chunk))
        return self._run(claimed, job, msg.traceparent, held)

    def _run(self, chunk: Chunk, job: Job, traceparent: str | None, held: list[tuple[Chunk, Chunk]]) -> str:
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None:
            self.lifecycle.finish_chunk(chunk, ChunkStatus.FAILED, error_type="UnknownPipeline", error_message=job.pipeline)
            return "failed"
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
        estimate = settings.default_attempt_memory_mb
        if pipeline.memory_mb is not None:
            try:
                estimate = float(pipeline.memory_mb(pipeline.params_model.model_validate(job.params), items))
            except Exception:  # noqa: BLE001 - a broken estimate must not block the chunk
                log.warning("chunk %s/%d: the memory estimate failed; using the default", chunk.stage, chunk.index)
        reservation = BUDGET.try_reserve(estimate)
        if reservation is None:
            # No room now: give the claim back (attempts restored) and send the message again a little later.
            self.lifecycle.release_chunk(chunk, held[-1][1])
            held.clear()
            msg = ChunkMessage(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, chunk.attempts, traceparent)
            if not self.lifecycle.send(msg, timedelta(seconds=settings.admission_delay_seconds)):
                raise StorageUnavailable("could not defer the chunk message")
            return "deferred"
        try:
            lease = ChunkLease(self.lifecycle, chunk)
            outcome = self.runner(lease, spec, timeout, settings).run(items)
        finally:
            reservation.release()
        held[-1] = (lease.chunk, held[-1][1])
        return self._record(lease.chunk, outcome, pipeline.retry, traceparent, held)

    def _record(
        self, chunk: Chunk, outcome: Outcome, retry: RetryPolicy, traceparent: str | None,
        held: list[tuple[Chunk, Chunk]],
    ) -> str:
        telemetry.record_usage("chunk", outcome.usage)
        if outcome.kind == "lost":
            held.clear()
            return "lost"
        ended: Chunk | None
        if outcome.kind == "succeeded" and outcome.result is not None:
            binary = bool(outcome.binary)
            name = chunk_blob_name(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, "bin" if binary else "json")
            self.stores.blobs.put(name, outcome.result, "application/octet-stream" if binary else "application/json")
            ended = self.lifecycle.finish_chunk(chunk, ChunkStatus.SUCCEEDED, output_blob=name, processed=chunk.items)
        elif outcome.kind == "cancelled":
            ended = self.lifecycle.finish_chunk(chunk, ChunkStatus.CANCELLED)
        else:
            error = outcome.error
            decision = retry.decide(chunk.attempts, outcome.retryable)
            if decision.retry and chunk.attempts < chunk.max_attempts:
                return "retrying" if self.lifecycle.retry_chunk(chunk, error, decision.delay, traceparent) else "lost"
            ended = self.lifecycle.finish_chunk(
                chunk,
                ChunkStatus.FAILED,
                error_type=error.type if error else "Error",
                error_message=error.message if error else "the chunk failed",
            )
        if ended is None:
            return "lost"
        held.clear()  # recorded: a failure from here on (settling) must not release it
        try:
            result = self.lifecycle.settle(chunk.tenant, chunk.job_id, chunk.stage, traceparent)
        except ThematiqError:
            # The chunk is recorded; the reaper settles a waiting job whose stage is done.
            log.warning("chunk %s/%d: could not settle the stage now; the reaper will", chunk.stage, chunk.index)
            result = "deferred"
        return f"{ended.status.value}; stage {result}"
