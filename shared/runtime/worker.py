"""The queue worker: claim a job, run one attempt, record how it ended. Every state change is a lifecycle call.

Called by the queue-triggered function with the message text and its
``dequeue_count``. A duplicate delivery, a stale message or a job that is
already terminal is a logged no-op. Failures are sorted by the pipeline's
:class:`shared.sdk.retry.RetryPolicy`: a retry is a new message, delayed by the
backoff, and a job whose attempts are used up ends ``failed`` with its message
copied to the poison queue.

If the worker *itself* fails after claiming (an input blob that cannot be read,
``Popen`` failing, an outcome that cannot be written), the claim is released so
the host's redelivery of the same message can take it, and a result that was
already stored is remembered so the redelivery finishes the job from it instead
of running the pipeline again. On the last delivery the host allows (host.json
``maxDequeueCount``) the job is failed instead, but only if this delivery holds
it: a delivery that never claimed has no business failing a job.
"""

from __future__ import annotations

import logging
from typing import Any

from shared.config.hostconfig import attempt_timeout, host_config
from shared.config.settings import Settings, get_settings
from shared.core.errors import NotFound, PermanentError
from shared.core.jobs import Job, JobError, Status
from shared.core.lifecycle import Lifecycle
from shared.core.messages import BadMessage, JobMessage
from shared.core.names import result_blob_name
from shared.core.ports import Stores
from shared.core.registry import Registry, default_registry
from shared.observability import telemetry
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptRunner, Outcome, RunnerFactory
from shared.sdk.retry import RetryPolicy
from shared.storage import azure_stores
from shared.storage.blobs import decode_input

log = logging.getLogger(__name__)


class JobLease:
    """The claim on a running job: heartbeat, progress and cancel detection through the lifecycle."""

    def __init__(self, lifecycle: Lifecycle, job: Job) -> None:
        self.lifecycle = lifecycle
        self.job = job
        self.label = f"job {job.id}"

    def renew(self, progress: Any) -> bool:
        self.job = self.lifecycle.renew(self.job, progress)
        return self.job.cancel_requested


class _Delivery:
    """What one delivery of a message did so far: what to release or fail if the worker itself breaks."""

    def __init__(self) -> None:
        self.before: Job | None = None
        self.claimed: Job | None = None
        self.result: tuple[str, int] | None = None


class Worker:
    def __init__(
        self, stores: Stores | None = None, registry: Registry | None = None, runner: RunnerFactory = AttemptRunner
    ) -> None:
        self.stores = stores or azure_stores()
        #: How an attempt is run: in a child process by default (``AttemptRunner``).
        self.runner = runner
        self.lifecycle = Lifecycle(self.stores)
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
            self.stores.messages.send_poison(text)
            return "bad-message"
        delivery = _Delivery()
        try:
            with (
                telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt),
                telemetry.attempt_span(
                    msg.traceparent, job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt
                ) as span,
            ):
                outcome = self._handle(msg, text, delivery)
                span.set_attribute("thematiq.outcome", outcome)
                if outcome in ("failed", "retrying"):
                    telemetry.mark_error(span, outcome)
                return outcome
        except Exception as err:
            self._after_worker_error(delivery, err, last=dequeue_count >= host_config().max_dequeue_count)
            raise

    def _after_worker_error(self, delivery: _Delivery, err: Exception, *, last: bool) -> None:
        claimed, before = delivery.claimed, delivery.before
        if claimed is None or before is None:
            # This delivery never held the job: whatever state it is in is someone else's to change.
            return
        try:
            if last:
                reason = (
                    f"the worker failed on the last allowed delivery ({type(err).__name__}); "
                    "the message went to the poison queue"
                )
                self.lifecycle.fail_claimed(claimed, JobError.of("PoisonMessage", reason))
            else:
                self.lifecycle.release(claimed, before, delivery.result)
        except Exception:
            # Storage is away: the claim goes stale and the reaper takes it (finishing from the result blob).
            log.exception("job %s: could not release the claim after a worker error", claimed.id)

    # -- claim -------------------------------------------------------------------
    def _handle(self, msg: JobMessage, text: str, delivery: _Delivery) -> str:
        try:
            job = self.stores.jobs.get(msg.tenant, msg.job_id, with_input=True)
        except NotFound:
            log.warning("job %s: not found (deleted?); message dropped", msg.job_id)
            return "missing"
        if job.status.terminal:
            log.info("job %s: already %s; duplicate delivery ignored", job.id, job.status)
            return "noop-terminal"
        if msg.resume:
            return self._resume(job, msg, text, delivery)
        if not job.status.claimable:
            log.info("job %s: already %s (attempt %d); duplicate delivery ignored", job.id, job.status, job.attempts)
            return "noop-running"
        if msg.attempt != job.attempts + 1:
            log.info("job %s: message for attempt %d but next is %d; ignored", job.id, msg.attempt, job.attempts + 1)
            return "noop-stale"
        if job.cancel_requested:
            self.lifecycle.cancel(job)
            return "cancelled"
        if job.result_blob == result_blob_name(job.tenant, job.id, msg.attempt):
            # A delivery of this attempt stored the result, then could not record it: finish from the blob.
            done = self.lifecycle.succeed_from_blob(job, msg.attempt)
            return "succeeded" if done is not None else "noop-lost-race"
        claimed = self.lifecycle.claim(job, msg.attempt)
        if claimed is None:
            return "noop-lost-race"
        delivery.before, delivery.claimed = job, claimed
        return self._run(claimed, text, delivery)

    def _resume(self, job: Job, msg: JobMessage, text: str, delivery: _Delivery) -> str:
        """Continue a waiting job's attempt after its fan-in (same attempt number)."""
        resumed = self.lifecycle.resume(job, msg.attempt)
        if resumed is None:
            log.info("job %s: resume for attempt %d does not apply (%s); ignored", job.id, msg.attempt, job.status)
            return "noop-stale"
        delivery.before, delivery.claimed = job, resumed
        return self._run(resumed, text, delivery)

    # -- run ---------------------------------------------------------------------
    def _run(self, job: Job, text: str, delivery: _Delivery) -> str:
        with telemetry.job_context(pipeline=job.pipeline, attempt=job.attempts):
            pipeline = self.registry.get(job.pipeline)
            if pipeline is None:
                error = JobError.of("UnknownPipeline", f"pipeline {job.pipeline!r} is not installed")
                self.lifecycle.finish(job, Status.FAILED, error=error)
                return "failed"
            timeout = attempt_timeout(pipeline.timeout_seconds, self.settings.pipeline_timeout_seconds)
            try:
                input_value = self._load_input(job)
            except PermanentError as err:
                self.lifecycle.finish(job, Status.FAILED, error=JobError.of("BadInput", str(err)))
                return "failed"
            log.info(
                "job %s: attempt %d of %d started (pipeline %s)", job.id, job.attempts, job.max_attempts, job.pipeline
            )
            spec = AttemptSpec(
                mode="run",
                job_id=job.id,
                tenant=job.tenant,
                attempt=job.attempts,
                pipeline=job.pipeline,
                pipeline_ref=self.registry.ref(job.pipeline),
                params=job.params,
                max_attempts=job.max_attempts,
                # The job's LLM token budget spans attempts: start from what earlier ones spent.
                llm_tokens_used=int(job.usage.get("llm_tokens", 0)),
            )
            lease = JobLease(self.lifecycle, job)
            outcome = self.runner(lease, spec, timeout, self.settings).run(input_value)
            delivery.claimed = lease.job
            return self._record(outcome, lease.job, pipeline.retry, text, delivery)

    def _load_input(self, job: Job) -> Any:
        if job.input_inline:
            return decode_input(job.input_inline)
        if job.input_blob:
            return decode_input(self.stores.blobs.get(job.input_blob))
        raise PermanentError("the job has no input")

    def _record(self, outcome: Outcome, job: Job, retry: RetryPolicy, text: str, delivery: _Delivery) -> str:
        usage = _merge_usage(job.usage, outcome.usage)
        progress = {"progress": outcome.progress} if outcome.progress else {}
        telemetry.record_usage(job.pipeline, outcome.usage)
        if outcome.kind == "lost":
            delivery.claimed = None  # not ours any more: nothing to release
            return "lost"
        if outcome.kind == "succeeded":
            assert outcome.result is not None
            name = result_blob_name(job.tenant, job.id, job.attempts)
            self.stores.blobs.put(name, outcome.result, "application/json")
            delivery.result = (name, len(outcome.result))
            done = self.lifecycle.finish(
                job, Status.SUCCEEDED, error=None, result_blob=name, result_bytes=len(outcome.result),
                usage=usage, **progress,
            )
            return "succeeded" if done is not None else "lost"
        if outcome.kind == "cancelled":
            self.lifecycle.finish(job, Status.CANCELLED, usage=usage, **progress)
            return "cancelled"
        if outcome.kind == "suspended" and outcome.suspended is not None:
            stage = outcome.suspended.stage
            waiting = self.lifecycle.suspend(job, stage, usage=usage, **progress)
            if waiting is not None and waiting.status == Status.WAITING:
                log.info("job %s: waiting for %d chunks of stage %s", job.id, outcome.suspended.chunks, stage)
                return "waiting"
            return "cancelled" if waiting is not None else "lost"
        error = outcome.error or JobError.of("Error", "the attempt failed")
        decision = retry.decide(job.attempts, outcome.retryable)
        if decision.retry and job.attempts < job.max_attempts:
            self.lifecycle.retry(job, error, decision.delay, usage=usage, **progress)
            log.warning(
                "job %s: attempt %d failed (%s); %s in %.1f s",
                job.id, job.attempts, error.type, decision.reason, decision.delay.total_seconds(),
            )
            return "retrying"
        why = decision.reason if not decision.retry else f"attempts exhausted ({job.attempts}/{job.max_attempts})"
        final = JobError.of(error.type, f"{error.message} [{why}]")
        if self.lifecycle.finish(job, Status.FAILED, error=final, usage=usage, **progress) is not None:
            self.stores.messages.send_poison(text)
            telemetry.event(
                "job.poisoned", job_id=job.id, tenant=job.tenant, pipeline=job.pipeline, attempt=job.attempts
            )
        log.error("job %s: failed after attempt %d (%s, %s)", job.id, job.attempts, error.type, why)
        return "failed"


def _merge_usage(old: dict[str, float], new: dict[str, float]) -> dict[str, float]:
    merged = dict(old)
    for k, v in new.items():
        merged[k] = merged.get(k, 0.0) + v
    return merged
