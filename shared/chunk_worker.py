"""The chunk worker: claim one chunk of a map stage, run it in a child process, record it, settle the stage.

Same discipline as jobs: a conditional claim (``queued`` → ``running``,
attempts + 1), a heartbeat while it runs, a delayed message for a retry, and a
terminal state when attempts are used up. A duplicate delivery or a stale
message is a no-op, and a chunk's output goes to a blob whose name depends only
on the chunk, so running it twice writes the same blob. After a chunk ends,
:func:`shared.fanout.settle` releases the next pending chunk and fans in if the
stage is complete.
"""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

from shared import fanout, job_queue, telemetry
from shared.blobs import BlobStore
from shared.chunks import Chunk, ChunkStatus, ChunkStore
from shared.errors import LostClaim, ThematiqError
from shared.hostconfig import attempt_timeout, host_config
from shared.job_store import JobStore
from shared.jobs import Job, Progress, Status, utcnow
from shared.messages import BadMessage, ChunkMessage
from shared.registry import Registry, default_registry
from shared.runner import AttemptRunner, Outcome
from shared.settings import get_settings
from shared.storage_errors import EtagMismatch
from shared.worker import new_owner

log = logging.getLogger(__name__)


class ChunkLease:
    """The claim on a running chunk. Its heartbeat also reads the parent, so cancelling the job stops it."""

    def __init__(self, store: ChunkStore, jobs: JobStore, chunk: Chunk) -> None:
        self.store = store
        self.jobs = jobs
        self.chunk = chunk
        self.label = f"job {chunk.job_id} chunk {chunk.stage}/{chunk.index}"

    def renew(self, progress: Progress | None) -> bool:
        changes: dict[str, Any] = {"heartbeat_at": utcnow()}
        if progress is not None:
            changes["processed"] = min(progress.processed, self.chunk.items)
        try:
            self.chunk = self.store.update(self.chunk, **changes)
        except EtagMismatch:
            current = self.store.get(self.chunk.tenant, self.chunk.job_id, self.chunk.stage, self.chunk.index)
            if current.status != ChunkStatus.RUNNING or current.owner != self.chunk.owner:
                raise LostClaim(f"chunk is now {current.status} owned by {current.owner}") from None
            self.chunk = self.store.update(current, **changes)
        parent = self.jobs.get(self.chunk.tenant, self.chunk.job_id)
        return parent.status.terminal or parent.cancel_requested


class ChunkWorker:
    def __init__(self, registry: Registry | None = None) -> None:
        self.chunks = ChunkStore()
        self.jobs = JobStore()
        self.blobs = BlobStore()
        self.registry = registry or default_registry()

    def handle(self, text: str, dequeue_count: int) -> str:
        try:
            msg = ChunkMessage.decode(text)
        except BadMessage:
            log.error("dropping a message that is not a chunk message; copied to the poison queue")
            job_queue.send_poison(text, get_settings().chunks_queue)
            return "bad-message"
        with telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, stage=msg.stage):
            try:
                return self._handle(msg)
            except Exception:
                if dequeue_count >= host_config().max_dequeue_count:
                    self._fail_on_last_delivery(msg)
                raise

    def _fail_on_last_delivery(self, msg: ChunkMessage) -> None:
        try:
            chunk = self.chunks.get(msg.tenant, msg.job_id, msg.stage, msg.index)
            if not chunk.status.terminal:
                self.chunks.update(
                    chunk,
                    status=ChunkStatus.FAILED,
                    owner=None,
                    finished_at=utcnow(),
                    error_type="PoisonMessage",
                    error_message="the chunk worker failed on the last allowed delivery",
                )
            fanout.settle(msg.tenant, msg.job_id, msg.stage)
        except ThematiqError:
            log.exception("chunk %s/%d: could not mark failed on the last delivery", msg.stage, msg.index)

    def _handle(self, msg: ChunkMessage) -> str:
        try:
            chunk = self.chunks.get(msg.tenant, msg.job_id, msg.stage, msg.index, with_input=True)
        except ThematiqError as err:
            if err.status == 404:
                return "missing"
            raise
        if chunk.status != ChunkStatus.QUEUED or msg.attempt != chunk.attempts + 1:
            log.info(
                "chunk %s/%d: %s, attempt %d; message for attempt %d ignored",
                chunk.stage,
                chunk.index,
                chunk.status,
                chunk.attempts,
                msg.attempt,
            )
            return "noop"
        job = self.jobs.get(msg.tenant, msg.job_id)
        if job.status.terminal or job.cancel_requested:
            self._end(chunk, ChunkStatus.CANCELLED)
            if job.status == Status.WAITING:
                # A cancel that raced the suspension: end the job now rather than once every chunk is skipped.
                fanout.cancel_waiting(job)
            return "cancelled"
        claimed = self._claim(chunk)
        if claimed is None:
            return "noop-lost-race"
        return self._run(claimed, job, msg.traceparent)

    def _claim(self, chunk: Chunk) -> Chunk | None:
        owner = new_owner()
        try:
            return self.chunks.update(
                chunk, status=ChunkStatus.RUNNING, attempts=chunk.attempts + 1, owner=owner, heartbeat_at=utcnow()
            )
        except EtagMismatch:
            current = self.chunks.get(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, with_input=True)
            return current if current.status == ChunkStatus.RUNNING and current.owner == owner else None

    def _run(self, chunk: Chunk, job: Job, traceparent: str | None) -> str:
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None:
            self._end(chunk, ChunkStatus.FAILED, error_type="UnknownPipeline", error_message=job.pipeline)
            return "failed"
        items = json.loads(gzip.decompress(chunk.input_inline or self.blobs.get(chunk.input_blob or "")))
        settings = get_settings()
        spec = {
            "mode": "map",
            "job_id": job.id,
            "tenant": job.tenant,
            "attempt": chunk.attempts,
            "pipeline": job.pipeline,
            "pipeline_ref": self.registry.ref(job.pipeline),
            "params": job.params,
            "fn_ref": chunk.fn_ref,
            "max_attempts": chunk.max_attempts,
            # Each chunk gets an equal share of what the job has left, so a fanned-out
            # stage cannot spend the job's budget once per chunk.
            "llm_tokens_used": 0,
            "llm_token_limit": max(0, settings.llm_max_tokens_per_job - int(job.usage.get("llm_tokens", 0)))
            // max(1, chunk.of),
        }
        timeout = attempt_timeout(pipeline.timeout_seconds, settings.pipeline_timeout_seconds)
        lease = ChunkLease(self.chunks, self.jobs, chunk)
        outcome = AttemptRunner(lease, spec, timeout, settings).run(items)
        return self._record(lease.chunk, outcome, pipeline.retry.decide, traceparent)

    def _record(self, chunk: Chunk, outcome: Outcome, decide: Any, traceparent: str | None) -> str:
        telemetry.record_usage("chunk", outcome.usage)
        if outcome.kind == "lost":
            return "lost"
        if outcome.kind == "succeeded" and outcome.result is not None:
            binary = bool(outcome.binary)
            name = fanout.chunk_blob(chunk, chunk.stage, chunk.index, "bin" if binary else "json")
            self.blobs.put(name, outcome.result, "application/octet-stream" if binary else "application/json")
            ended = self._end(chunk, ChunkStatus.SUCCEEDED, output_blob=name, processed=chunk.items)
        elif outcome.kind == "cancelled":
            ended = self._end(chunk, ChunkStatus.CANCELLED)
        else:
            error = outcome.error
            decision = decide(chunk.attempts, outcome.retryable)
            if decision.retry and chunk.attempts < chunk.max_attempts:
                try:
                    queued = self.chunks.update(
                        chunk,
                        status=ChunkStatus.QUEUED,
                        owner=None,
                        queued_at=utcnow(),
                        error_type=error.type if error else "",
                        error_message=error.message if error else "",
                    )
                except EtagMismatch:
                    return "lost"
                fanout.send_chunk(queued, traceparent, decision.delay)
                return "retrying"
            ended = self._end(
                chunk,
                ChunkStatus.FAILED,
                error_type=error.type if error else "Error",
                error_message=error.message if error else "the chunk failed",
            )
        if ended is None:
            return "lost"
        result = fanout.settle(chunk.tenant, chunk.job_id, chunk.stage, traceparent)
        return f"{ended.status.value}; stage {result}"

    def _end(self, chunk: Chunk, status: ChunkStatus, **changes: Any) -> Chunk | None:
        try:
            return self.chunks.update(chunk, status=status, owner=None, finished_at=utcnow(), **changes)
        except EtagMismatch:
            log.warning("chunk %s/%d changed under us; outcome %s discarded", chunk.stage, chunk.index, status)
            return None
