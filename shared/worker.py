"""The queue worker: claim a job, run one attempt, record how it ended.

Called by the queue-triggered function with the message text and its
``dequeue_count``. A duplicate delivery, a stale message or a job that is
already terminal is a logged no-op. Failures are sorted by the pipeline's
:class:`shared.retry.RetryPolicy`: a retry is a new message, delayed by the
backoff, and a job whose attempts are used up ends ``failed`` with its message
copied to the poison queue. If the worker itself fails on the last delivery
the host allows (host.json ``maxDequeueCount``), the job is marked ``failed``
before the exception lets the host move the message to ``<queue>-poison``, so
nothing stays ``running`` for ever.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

from shared import fanout, job_queue, telemetry
from shared.blobs import BlobStore, decode_input, result_blob_name
from shared.errors import PermanentError, ThematiqError
from shared.hostconfig import attempt_timeout, host_config
from shared.job_store import JobStore
from shared.jobs import Job, JobError, Status, utcnow
from shared.messages import BadMessage, JobMessage
from shared.registry import Registry, default_registry
from shared.runner import AttemptRunner, JobLease, Outcome
from shared.settings import Settings, get_settings
from shared.storage_errors import EtagMismatch

log = logging.getLogger(__name__)


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self, store: JobStore | None = None, blobs: BlobStore | None = None, registry: Registry | None = None
    ) -> None:
        self.store = store or JobStore()
        self.blobs = blobs or BlobStore()
        self.registry = registry or default_registry()

    @property
    def settings(self) -> Settings:
        return get_settings()

    def handle(self, text: str, dequeue_count: int) -> str:
        """Process one delivery; returns a short outcome for the invocation log."""
        try:
            msg = JobMessage.decode(text)
        except BadMessage:
            log.error("dropping a message that is not a job message; copied to the poison queue")
            job_queue.send_poison(text)
            return "bad-message"
        try:
            with (
                telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt),
                telemetry.attempt_span(
                    msg.traceparent, job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt
                ) as span,
            ):
                outcome = self._handle(msg, text)
                span.set_attribute("thematiq.outcome", outcome)
                if outcome in ("failed", "retrying"):
                    telemetry.mark_error(span, outcome)
                return outcome
        except Exception as err:
            if dequeue_count >= host_config().max_dequeue_count:
                self._fail_on_last_delivery(msg, err)
            raise

    def _fail_on_last_delivery(self, msg: JobMessage, err: Exception) -> None:
        reason = f"the worker failed on the last allowed delivery ({type(err).__name__}); the message went to the poison queue"
        for _ in range(3):
            try:
                job = self.store.get(msg.tenant, msg.job_id)
                if job.status.terminal:
                    return
                self.store.update(
                    job,
                    status=Status.FAILED,
                    finished_at=utcnow(),
                    owner=None,
                    error=JobError.of("PoisonMessage", reason),
                )
                return
            except EtagMismatch:
                continue
            except ThematiqError:
                log.exception("job %s: could not mark failed on the last delivery", msg.job_id)
                return

    # -- claim -------------------------------------------------------------------
    def _handle(self, msg: JobMessage, text: str) -> str:
        try:
            job = self.store.get(msg.tenant, msg.job_id, with_input=True)
        except ThematiqError as err:
            if err.status == 404:
                log.warning("job %s: not found (deleted?); message dropped", msg.job_id)
                return "missing"
            raise
        if job.status.terminal:
            log.info("job %s: already %s; duplicate delivery ignored", job.id, job.status)
            return "noop-terminal"
        if msg.resume:
            return self._resume(job, msg, text)
        if not job.status.claimable:
            log.info("job %s: already %s (attempt %d); duplicate delivery ignored", job.id, job.status, job.attempts)
            return "noop-running"
        if msg.attempt != job.attempts + 1:
            log.info("job %s: message for attempt %d but next is %d; ignored", job.id, msg.attempt, job.attempts + 1)
            return "noop-stale"
        if job.cancel_requested:
            self._finish(job, Status.CANCELLED)
            return "cancelled"
        claimed = self._claim(job)
        if claimed is None:
            return "noop-lost-race"
        return self._run(claimed, text)

    def _resume(self, job: Job, msg: JobMessage, text: str) -> str:
        """Continue a waiting job's attempt after its fan-in (same attempt number)."""
        if job.status != Status.WAITING or msg.attempt != job.attempts or job.fan_in_at is None:
            log.info("job %s: resume for attempt %d does not apply (%s); ignored", job.id, msg.attempt, job.status)
            return "noop-stale"
        owner = new_owner()
        try:
            resumed = self.store.update(
                job, status=Status.RUNNING, owner=owner, heartbeat_at=utcnow(), wait_stage=None, fan_in_at=None
            )
        except EtagMismatch:
            current = self.store.get(job.tenant, job.id, with_input=True)
            if current.status != Status.RUNNING or current.owner != owner:
                return "noop-lost-race"
            resumed = current
        telemetry.record_transition(resumed)
        return self._run(resumed, text)

    def _claim(self, job: Job) -> Job | None:
        owner = new_owner()
        now = utcnow()
        try:
            claimed = self.store.update(
                job,
                status=Status.RUNNING,
                attempts=job.attempts + 1,
                owner=owner,
                started_at=job.started_at or now,
                heartbeat_at=now,
            )
            telemetry.record_transition(claimed)
            return claimed
        except EtagMismatch:
            # The SDK may have retried our own successful write: re-read before giving up.
            current = self.store.get(job.tenant, job.id, with_input=True)
            if current.status == Status.RUNNING and current.owner == owner:
                return current
            log.info("job %s: another worker claimed it first", job.id)
            return None

    # -- run ---------------------------------------------------------------------
    def _run(self, job: Job, text: str) -> str:
        with telemetry.job_context(pipeline=job.pipeline, attempt=job.attempts):
            return self._run_attempt(job, text)

    def _run_attempt(self, job: Job, text: str) -> str:
        pipeline = self.registry.get(job.pipeline)
        if pipeline is None:
            self._finish(
                job, Status.FAILED, error=JobError.of("UnknownPipeline", f"pipeline {job.pipeline!r} is not installed")
            )
            return "failed"
        timeout = attempt_timeout(pipeline.timeout_seconds, self.settings.pipeline_timeout_seconds)
        try:
            input_value = self._load_input(job)
        except PermanentError as err:
            self._finish(job, Status.FAILED, error=JobError.of("BadInput", str(err)))
            return "failed"
        log.info("job %s: attempt %d of %d started (pipeline %s)", job.id, job.attempts, job.max_attempts, job.pipeline)
        spec = {
            "mode": "run",
            "job_id": job.id,
            "tenant": job.tenant,
            "attempt": job.attempts,
            "pipeline": job.pipeline,
            "pipeline_ref": self.registry.ref(job.pipeline),
            "params": job.params,
            "max_attempts": job.max_attempts,
            # The job's LLM token budget spans attempts: start from what earlier ones spent.
            "llm_tokens_used": int(job.usage.get("llm_tokens", 0)),
        }
        lease = JobLease(self.store, job)
        outcome = AttemptRunner(lease, spec, timeout, self.settings).run(input_value)
        return self._record(outcome, lease.job, pipeline.retry.decide, text)

    def _load_input(self, job: Job) -> Any:
        if job.input_inline:
            return decode_input(job.input_inline)
        if job.input_blob:
            return decode_input(self.blobs.get(job.input_blob))
        raise PermanentError("the job has no input")

    def _record(self, outcome: Outcome, job: Job, decide: Any, text: str) -> str:
        usage = _merge_usage(job.usage, outcome.usage)
        progress = {"progress": outcome.progress} if outcome.progress else {}
        telemetry.record_usage(job.pipeline, outcome.usage)
        if outcome.kind == "lost":
            return "lost"
        if outcome.kind == "succeeded":
            assert outcome.result is not None
            name = result_blob_name(job.tenant, job.id, job.attempts)
            self.blobs.put(name, outcome.result, "application/json")
            self._finish(
                job,
                Status.SUCCEEDED,
                error=None,
                result_blob=name,
                result_bytes=len(outcome.result),
                usage=usage,
                **progress,
            )
            return "succeeded"
        if outcome.kind == "cancelled":
            self._finish(job, Status.CANCELLED, usage=usage, **progress)
            return "cancelled"
        if outcome.kind == "suspended" and outcome.suspended:
            stage = str(outcome.suspended["stage"])
            waiting = self._finish(job, Status.WAITING, wait_stage=stage, fan_in_at=None, usage=usage, **progress)
            if waiting is not None and waiting.status == Status.WAITING:
                # Write, then look: chunks that finished before we were waiting are seen here.
                fanout.settle(job.tenant, job.id, stage, job.traceparent)
                log.info("job %s: waiting for %s chunks of stage %s", job.id, outcome.suspended.get("chunks"), stage)
            return "waiting" if waiting is not None and waiting.status == Status.WAITING else "cancelled"
        error = outcome.error or JobError.of("Error", "the attempt failed")
        decision = decide(job.attempts, outcome.retryable)
        if decision.retry and job.attempts < job.max_attempts:
            due = utcnow() + decision.delay
            updated = self._finish(job, Status.RETRYING, error=error, available_at=due, usage=usage, **progress)
            if updated is not None:
                job_queue.send(JobMessage(job.tenant, job.id, job.attempts + 1, job.traceparent), decision.delay)
            log.warning(
                "job %s: attempt %d failed (%s); %s in %.1f s",
                job.id,
                job.attempts,
                error.type,
                decision.reason,
                decision.delay.total_seconds(),
            )
            return "retrying"
        why = decision.reason if not decision.retry else f"attempts exhausted ({job.attempts}/{job.max_attempts})"
        final = JobError.of(error.type, f"{error.message} [{why}]")
        if self._finish(job, Status.FAILED, error=final, usage=usage, **progress) is not None:
            job_queue.send_poison(text)
            telemetry.event(
                "job.poisoned", job_id=job.id, tenant=job.tenant, pipeline=job.pipeline, attempt=job.attempts
            )
        log.error("job %s: failed after attempt %d (%s, %s)", job.id, job.attempts, error.type, why)
        return "failed"

    def _finish(self, job: Job, status: Status, **changes: Any) -> Job | None:
        """Write the attempt's end state, unless the job was taken away from us meanwhile.

        After a 412 the job is re-read: our outcome still applies only if the job is in the state we
        left it in (running under our claim, or unclaimed in the same status). A presumed-dead
        worker's outcome never overwrites a newer attempt's state.
        """
        fields = self._end_fields(job, status, changes)
        claim, seen_status = job.owner, job.status
        for _ in range(5):
            try:
                finished = self.store.update(job, **fields)
                telemetry.record_transition(finished)
                return finished
            except EtagMismatch:
                current = self.store.get(job.tenant, job.id)
                if current.status == fields["status"] and current.attempts == job.attempts and not current.owner:
                    return current  # the SDK retried our own write, which had landed
                still_ours = (
                    current.status == Status.RUNNING and current.owner == claim
                    if claim
                    else current.status == seen_status
                )
                if not still_ours:
                    log.warning(
                        "job %s: changed under us (%s); our outcome %s is discarded", job.id, current.status, status
                    )
                    return None
                # Only a cancel request changed it: apply ours on top (or cancel, see _end_fields).
                job = current
                fields = self._end_fields(current, status, changes)
        log.error("job %s: could not record outcome %s after repeated conflicts", job.id, status)
        return None

    @staticmethod
    def _end_fields(job: Job, status: Status, changes: dict[str, Any]) -> dict[str, Any]:
        if job.cancel_requested and status in (Status.RETRYING, Status.WAITING):
            # Cancelled while the attempt ended: no retry, and no waiting for chunks nobody wants.
            status, changes = Status.CANCELLED, {k: v for k, v in changes.items() if k in ("usage", "progress")}
        fields: dict[str, Any] = {"status": status, "owner": None, **changes}
        if status.terminal:
            fields["finished_at"] = utcnow()
        return fields


def _merge_usage(old: dict[str, float], new: dict[str, float]) -> dict[str, float]:
    merged = dict(old)
    for k, v in new.items():
        merged[k] = merged.get(k, 0.0) + v
    return merged
