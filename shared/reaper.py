"""The reaper: recover jobs whose worker vanished or whose message was lost, and apply retention.

Runs on a timer (``REAPER_SCHEDULE``). Every change it makes is conditional on
the ETag it read, so two reapers running at once (two instances, or a timer
that fired twice) cannot both re-enqueue the same attempt: the loser's write
fails with 412 and it moves on.

The queries filter on non-key properties across all tenants' partitions. That
is a server-side scan, bounded by retention; at very large scale an index
partition of active jobs would be the next step (see docs/architecture.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from shared import fanout, job_queue, telemetry
from shared.blobs import BlobStore, job_prefix
from shared.chunks import ChunkStatus, ChunkStore
from shared.errors import ThematiqError
from shared.job_store import JobStore
from shared.jobs import Job, JobError, Status, utcnow
from shared.messages import JobMessage
from shared.settings import get_settings
from shared.storage_errors import EtagMismatch

log = logging.getLogger(__name__)


@dataclass
class ReapReport:
    requeued_stale: list[str] = field(default_factory=list)
    failed_stale: list[str] = field(default_factory=list)
    cancelled_stale: list[str] = field(default_factory=list)
    requeued_lost: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    chunks_requeued: list[str] = field(default_factory=list)
    chunks_failed: list[str] = field(default_factory=list)
    resumes_resent: list[str] = field(default_factory=list)
    waiting_settled: list[str] = field(default_factory=list)
    conflicts: int = 0

    def summary(self) -> str:
        return (
            f"requeued {len(self.requeued_stale)} stale, failed {len(self.failed_stale)}, "
            f"cancelled {len(self.cancelled_stale)}, re-enqueued {len(self.requeued_lost)} lost, "
            f"deleted {len(self.deleted)}, chunks requeued {len(self.chunks_requeued)}, "
            f"chunks failed {len(self.chunks_failed)}, resumes re-sent {len(self.resumes_resent)}, "
            f"{self.conflicts} conflicts"
        )


class Reaper:
    def __init__(self, store: JobStore | None = None, blobs: BlobStore | None = None) -> None:
        self.store = store or JobStore()
        self.blobs = blobs or BlobStore()
        self.settings = get_settings()

    def run(self) -> ReapReport:
        report = ReapReport()
        self._stale_running(report)
        self._lost_messages(report)
        self._stale_chunks(report)
        self._waiting(report)
        if self.settings.retention_days > 0:
            self._retention(report)
        self._queue_metrics()
        return report

    def _stale_running(self, report: ReapReport) -> None:
        cutoff = utcnow() - timedelta(seconds=self.settings.heartbeat_stale_seconds)
        for job in self.store.scan("status eq 'running' and heartbeat_at lt @cutoff", {"cutoff": cutoff}):
            try:
                self._recover(job, report)
            except EtagMismatch:
                report.conflicts += 1  # another reaper, or the worker woke up: theirs wins
            except ThematiqError:
                log.exception("reaper: could not recover job %s", job.id)

    def _recover(self, job: Job, report: ReapReport) -> None:
        now = utcnow()
        if job.cancel_requested:
            telemetry.record_transition(self.store.update(job, status=Status.CANCELLED, owner=None, finished_at=now))
            report.cancelled_stale.append(job.id)
            return
        lost = JobError.of(
            "WorkerLost", f"attempt {job.attempts} stopped sending heartbeats (worker {job.owner} presumed dead)"
        )
        if job.attempts >= job.max_attempts:
            failed = self.store.update(
                job,
                status=Status.FAILED,
                owner=None,
                finished_at=now,
                error=JobError.of(lost.type, f"{lost.message}; attempts exhausted ({job.attempts}/{job.max_attempts})"),
            )
            telemetry.record_transition(failed)
            report.failed_stale.append(job.id)
            log.warning("reaper: job %s failed, its worker vanished on the last attempt", job.id)
            return
        # The conditional write is the lock: only the reaper whose write wins enqueues.
        updated = self.store.update(
            job, status=Status.RETRYING, owner=None, available_at=now, error=lost, requeues=job.requeues + 1
        )
        job_queue.send(JobMessage(updated.tenant, updated.id, updated.attempts + 1, updated.traceparent))
        telemetry.record_transition(updated)
        report.requeued_stale.append(job.id)
        log.warning("reaper: job %s re-enqueued for attempt %d (stale heartbeat)", job.id, updated.attempts + 1)

    def _lost_messages(self, report: ReapReport) -> None:
        # A queued or retrying job that should have started long ago: its
        # message was lost (e.g. a crash between the row commit and the send).
        cutoff = utcnow() - timedelta(seconds=self.settings.queued_stale_seconds)
        query = "( status eq 'queued' or status eq 'retrying' ) and available_at lt @cutoff"
        for job in self.store.scan(query, {"cutoff": cutoff}):
            try:
                updated = self.store.update(job, available_at=utcnow(), requeues=job.requeues + 1)
                job_queue.send(JobMessage(updated.tenant, updated.id, updated.attempts + 1, updated.traceparent))
                report.requeued_lost.append(job.id)
                log.warning("reaper: job %s had no live message; re-enqueued", job.id)
            except EtagMismatch:
                report.conflicts += 1
            except ThematiqError:
                log.exception("reaper: could not re-enqueue job %s", job.id)

    def _stale_chunks(self, report: ReapReport) -> None:
        """Chunks whose worker vanished (stale heartbeat) or whose message was lost; same rules as jobs."""
        chunks = ChunkStore()
        now = utcnow()
        stale = now - timedelta(seconds=self.settings.heartbeat_stale_seconds)
        lost = now - timedelta(seconds=self.settings.queued_stale_seconds)
        for chunk in chunks.scan("status eq 'running' and heartbeat_at lt @cutoff", {"cutoff": stale}):
            label = f"{chunk.job_id}/{chunk.stage}/{chunk.index}"
            try:
                if chunk.attempts >= chunk.max_attempts:
                    chunks.update(
                        chunk,
                        status=ChunkStatus.FAILED,
                        owner=None,
                        finished_at=utcnow(),
                        error_type="WorkerLost",
                        error_message=f"attempt {chunk.attempts} stopped sending heartbeats; attempts exhausted",
                    )
                    report.chunks_failed.append(label)
                    fanout.settle(chunk.tenant, chunk.job_id, chunk.stage)
                else:
                    queued = chunks.update(
                        chunk,
                        status=ChunkStatus.QUEUED,
                        owner=None,
                        queued_at=utcnow(),
                        error_type="WorkerLost",
                        error_message="stale heartbeat",
                    )
                    fanout.send_chunk(queued)
                    report.chunks_requeued.append(label)
            except EtagMismatch:
                report.conflicts += 1
            except ThematiqError:
                log.exception("reaper: could not recover chunk %s", label)
        for chunk in chunks.scan("status eq 'queued' and queued_at lt @cutoff", {"cutoff": lost}):
            try:
                fanout.send_chunk(chunks.update(chunk, queued_at=utcnow()))
                report.chunks_requeued.append(f"{chunk.job_id}/{chunk.stage}/{chunk.index}")
            except EtagMismatch:
                report.conflicts += 1
            except ThematiqError:
                log.exception("reaper: could not re-send chunk %s/%d", chunk.stage, chunk.index)

    def _waiting(self, report: ReapReport) -> None:
        """Waiting jobs: re-send a resume that was lost, or settle a stage whose last finisher crashed."""
        lost = utcnow() - timedelta(seconds=self.settings.queued_stale_seconds)
        for job in self.store.scan("status eq 'waiting'", {}):
            try:
                if job.fan_in_at is not None:
                    if job.fan_in_at < lost:
                        resent = self.store.update(job, fan_in_at=utcnow())
                        job_queue.send(
                            JobMessage(resent.tenant, resent.id, resent.attempts, resent.traceparent, resume=True)
                        )
                        report.resumes_resent.append(job.id)
                elif job.wait_stage:
                    fanout.settle(job.tenant, job.id, job.wait_stage, job.traceparent)
                    report.waiting_settled.append(job.id)
            except EtagMismatch:
                report.conflicts += 1
            except ThematiqError:
                log.exception("reaper: could not settle waiting job %s", job.id)

    def _retention(self, report: ReapReport) -> None:
        cutoff = utcnow() - timedelta(days=self.settings.retention_days)
        query = "( status eq 'succeeded' or status eq 'failed' or status eq 'cancelled' ) and finished_at lt @cutoff"
        for job in self.store.scan(query, {"cutoff": cutoff}):
            try:
                self.blobs.delete_prefix(job_prefix(job.tenant, job.id))
                ChunkStore().delete_job_chunks(job.tenant, job.id)
                self.store.delete(job)
                report.deleted.append(job.id)
            except ThematiqError:
                log.exception("reaper: could not delete expired job %s", job.id)

    def _queue_metrics(self) -> None:
        """Queue depth, the oldest waiting message's age and the poison depth: what the alerts watch."""
        from shared.connections import get_queue_client
        from shared.storage_errors import storage_call

        try:
            with storage_call("queue metrics"):
                queue = get_queue_client()
                depth = queue.get_queue_properties().approximate_message_count or 0
                oldest = 0.0
                for message in queue.peek_messages(max_messages=1):
                    if message.inserted_on is not None:
                        oldest = max(0.0, (utcnow() - message.inserted_on).total_seconds())
                poison = (
                    get_queue_client(self.settings.poison_queue).get_queue_properties().approximate_message_count or 0
                )
        except ThematiqError:
            log.warning("reaper: could not read queue metrics")
            return
        telemetry.QUEUE_DEPTH.set(depth)
        telemetry.QUEUE_OLDEST.set(oldest)
        telemetry.POISON_DEPTH.set(poison)
        telemetry.event("queue.metrics", depth=depth, oldest_age_seconds=round(oldest, 1), poison_depth=poison)
