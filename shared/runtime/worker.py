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
import time
from datetime import timedelta
from typing import Any

from shared.config.hostconfig import attempt_timeout, host_config
from shared.config.settings import Settings, get_settings
from shared.core.errors import NotFound, PermanentError, StorageUnavailable
from shared.core.jobs import Job, JobError, Status
from shared.core.lifecycle import ClaimUnresolved, Lifecycle
from shared.core.messages import BadMessage, JobMessage
from shared.core.names import result_blob_name
from shared.observability import telemetry
from shared.runtime.admission import BUDGET, Reservation
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptHost, Outcome
from shared.sdk.pipeline import Pipeline
from shared.sdk.retry import RetryPolicy
from shared.storage.blobs import decode_input

log = logging.getLogger(__name__)

#: "The input has not been read yet" (an input may itself be null).
_NO_INPUT: Any = object()

#: A result up to this size is stored in the job row (a binary property holds 64 KiB) instead of a blob.
RESULT_INLINE_MAX_BYTES = 32 * 1024


class JobLease:
    """The claim on a running job: heartbeat, progress and cancel detection through the lifecycle."""

    def __init__(self, lifecycle: Lifecycle, job: Job, claimed_at: float | None = None) -> None:
        self.lifecycle = lifecycle
        self.job = job
        self.label = f"job {job.id}"
        #: The claim's heartbeat (monotonic): the runner's fence counts from here, not from when it started.
        self.renewed_at = time.monotonic() if claimed_at is None else claimed_at

    def renew(self, progress: Any) -> bool:
        self.job = self.lifecycle.renew(self.job, progress)
        self.renewed_at = time.monotonic()
        return self.job.cancel_requested


class _Delivery:
    """What one delivery of a message did so far: what to release or fail if the worker itself breaks."""

    def __init__(self) -> None:
        self.before: Job | None = None
        self.claimed: Job | None = None
        self.result: tuple[str, int] | None = None
        self.inline: bytes | None = None
        #: When this delivery's claim was written (monotonic): the start of the attempt's fence.
        self.claimed_at: float | None = None
        #: This delivery's share of the host's memory budget, while its attempt runs.
        self.reservation: Reservation | None = None


class Worker(AttemptHost):
    """One delivery of a job message runs one attempt."""

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
        last = dequeue_count >= host_config().max_dequeue_count
        try:
            with (
                telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt),
                telemetry.attempt_span(
                    msg.traceparent, job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt
                ) as span,
            ):
                outcome = self._keep_findable(msg, dequeue_count, last) or self._handle(msg, text, delivery)
                span.set_attribute("thematiq.outcome", outcome)
                if outcome in ("failed", "retrying"):
                    telemetry.mark_error(span, outcome)
                return outcome
        except Exception as err:
            self._after_worker_error(delivery, err, last=last)
            raise

    def _keep_findable(self, msg: JobMessage, dequeue_count: int, last: bool) -> str | None:
        """On a redelivery of a first attempt's message, index the job before anything else can fail.

        A job that was never claimed has no active-index row: its message is its record. A delivery that fails
        (or whose host dies) before the claim, up to the last one the host allows, ends with the message in the
        poison queue, and the host moves a message past that count there without invoking us at all. So from
        the second delivery on, the job is indexed first (an idempotent upsert; a job claimed before already has
        its row), and the reaper's next run re-sends it if the message is gone. If Table Storage is away, this
        delivery fails and the next tries again; on the last one the message is sent again instead (the queue
        may be up while the table is not), so the job keeps a live message; that only for a transient failure.
        Returns an outcome if the delivery is done, else None.
        """
        if msg.attempt > 1 or msg.resume or (dequeue_count <= 1 and not last):
            return None  # the common first delivery, or a job claimed before (indexed since that claim)
        try:
            self.lifecycle.track(msg.tenant, msg.job_id)
        except StorageUnavailable:
            # Only a transient failure earns a fresh message: a permanent one (a lost role, a bad key) must end
            # in the poison queue, where an operator sees it, not circulate for as long as it lasts.
            if last and self.lifecycle.send(msg, timedelta(seconds=self.settings.admission_delay_seconds)):
                log.warning("job %s: could not index it on its last allowed delivery; its message was sent again",
                            msg.job_id)
                return "resent"
            raise
        return None

    def _after_worker_error(self, delivery: _Delivery, err: Exception, *, last: bool) -> None:
        claimed, before = delivery.claimed, delivery.before
        if claimed is None or before is None:
            # This delivery never held the job: whatever state it is in is someone else's to change (the job
            # was indexed before the claim, so the reaper finds it once the message is in the poison queue).
            return
        try:
            if last and delivery.result is None:
                reason = (
                    f"the worker failed on the last allowed delivery ({type(err).__name__}); "
                    "the message went to the poison queue"
                )
                self.lifecycle.fail_claimed(claimed, JobError.of("PoisonMessage", reason))
            else:
                # Not the last delivery, or the result is already stored: give the claim back (with the
                # result), so a redelivery, or the reaper's lost-message pass after the poison queue took
                # the message, finishes the job from it instead of failing or re-running it.
                self.lifecycle.release(claimed, before, delivery.result, delivery.inline)
        except Exception:
            # Storage is away: the claim goes stale and the reaper takes it (finishing from the result blob).
            log.exception("job %s: could not release the claim after a worker error", claimed.id)

    # -- claim -------------------------------------------------------------------
    def _handle(self, msg: JobMessage, text: str, delivery: _Delivery) -> str:
        # A new job's first message carries the row as inserted and its ETag: the claim is a conditional
        # write on that ETag, with no read before it. If the row changed since, the claim's 412 re-reads it
        # (shared.core.conditional) and, if the claim no longer applies, the job is looked at afresh below.
        if msg.row is not None and msg.etag and not msg.resume:
            try:
                job = Job.from_snapshot(msg.row, msg.etag)
            except (KeyError, TypeError, ValueError):
                log.warning("job %s: the message's row is unreadable; reading the job", msg.job_id)
            else:
                outcome = self._check_and_claim(job, msg, text, delivery, fresh=False)
                if outcome is not None:
                    return outcome
        try:
            job = self.stores.jobs.get(msg.tenant, msg.job_id, with_input=True)
        except NotFound:
            log.warning("job %s: not found (deleted?); message dropped", msg.job_id)
            return "missing"
        outcome = self._check_and_claim(job, msg, text, delivery, fresh=True)
        assert outcome is not None
        return outcome

    def _check_and_claim(self, job: Job, msg: JobMessage, text: str, delivery: _Delivery, *, fresh: bool) -> str | None:
        """Claim and run; None if ``job`` came from the message and the claim found the row changed."""
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
        if job.status == Status.RETRYING and job.error is not None and job.error.type == "WorkerLost":
            # The reaper handed the attempt on while its worker was still storing the result (a slow
            # upload): if the blob is there now, the job is done; nothing runs again.
            if self.lifecycle.recover_stored_result(job) is not None:
                return "succeeded"
        reservation, input_value = None, _NO_INPUT
        if job.input_blob is None:
            # The input is in the row (or the message): admission is decided before the claim, for free.
            pipeline = self.registry.get(job.pipeline)
            input_value = self._input_or_none(job)
            estimate = self._estimate(pipeline, job, input_value)
            reservation = BUDGET.try_reserve(estimate)
            if reservation is None:
                return self._defer(job, msg, estimate)
        try:
            try:
                claimed = self.lifecycle.claim(job, msg.attempt)
            except NotFound:
                log.warning("job %s: not found (deleted?); message dropped", msg.job_id)
                return "missing"
            except ClaimUnresolved as unknown:
                # It may have landed: hold it as ours so that the error path releases it by owner.
                delivery.before, delivery.claimed = job, unknown.claim
                raise
            if claimed is None:
                return "noop-lost-race" if fresh else None
            delivery.before, delivery.claimed, delivery.claimed_at = job, claimed, time.monotonic()
            return self._run(claimed, msg, delivery, input_value, reservation)
        finally:
            if reservation is not None:
                reservation.release()

    # -- admission ---------------------------------------------------------------
    def _input_or_none(self, job: Job) -> Any:
        try:
            return self._load_input(job)
        except PermanentError:
            return _NO_INPUT  # reported by the run, after the claim

    def _estimate(self, pipeline: Pipeline | None, job: Job, value: Any) -> float:
        """The attempt's declared memory estimate in MiB (``Pipeline.memory_mb``), or the default."""
        default = self.settings.default_attempt_memory_mb
        if pipeline is None or pipeline.memory_mb is None or value is _NO_INPUT:
            return default
        try:
            return float(pipeline.memory_mb(pipeline.params_model.model_validate(job.params), value))
        except Exception:  # noqa: BLE001 - a broken estimate must not block the job
            log.warning("job %s: the memory estimate of pipeline %s failed; using the default", job.id, job.pipeline)
            return default

    def _defer(self, job: Job, msg: JobMessage, estimate: float) -> str:
        """No room in this host's memory budget: send the message again, a little later; this delivery completes.

        The new message starts with a dequeue count of 0, so waiting for memory never pushes a job
        towards the poison queue. Were the send lost, this delivery fails instead and the host redelivers it.
        """
        delay = timedelta(seconds=self.settings.admission_delay_seconds)
        log.info(
            "job %s: needs about %.0f MB, which does not fit beside the %d attempts running; again in %.0f s",
            msg.job_id, estimate, BUDGET.running, delay.total_seconds(),
        )
        # Move the job's due time on, so the reaper's lost-message pass does not take a job that is only
        # waiting for memory for one whose message was lost (and add a copy each period).
        self.lifecycle.postpone(job, delay)
        if not self.lifecycle.send(msg, delay):
            raise StorageUnavailable("could not defer the message")
        return "deferred"

    def _resume(self, job: Job, msg: JobMessage, text: str, delivery: _Delivery) -> str:
        """Continue a waiting job's attempt after its fan-in (same attempt number)."""
        if job.status == Status.WAITING and job.result_blob == result_blob_name(job.tenant, job.id, msg.attempt):
            # This resumed attempt stored its result and then released its claim: finish from it.
            done = self.lifecycle.succeed_from_blob(job, msg.attempt)
            return "succeeded" if done is not None else "noop-stale"
        resumed = self.lifecycle.resume(job, msg.attempt)
        if resumed is None:
            log.info("job %s: resume for attempt %d does not apply (%s); ignored", job.id, msg.attempt, job.status)
            return "noop-stale"
        delivery.before, delivery.claimed, delivery.claimed_at = job, resumed, time.monotonic()
        return self._run(resumed, msg, delivery)

    # -- run ---------------------------------------------------------------------
    def _run(
        self, job: Job, msg: JobMessage, delivery: _Delivery, preloaded: Any = _NO_INPUT,
        reservation: Reservation | None = None,
    ) -> str:
        delivery.reservation = reservation
        try:
            return self._run_admitted(job, msg, delivery, preloaded)
        finally:
            if delivery.reservation is not None:
                delivery.reservation.release()

    def _run_admitted(self, job: Job, msg: JobMessage, delivery: _Delivery, preloaded: Any) -> str:
        text = msg.without_row().encode()  # what goes to the poison queue: ids, never the input
        with telemetry.job_context(pipeline=job.pipeline, attempt=job.attempts):
            pipeline = self.registry.get(job.pipeline)
            if pipeline is None:
                error = JobError.of("UnknownPipeline", f"pipeline {job.pipeline!r} is not installed")
                self.lifecycle.finish(job, Status.FAILED, error=error)
                return "failed"
            timeout = attempt_timeout(pipeline.timeout_seconds, self.settings.pipeline_timeout_seconds)
            try:
                input_value = preloaded if preloaded is not _NO_INPUT else self._load_input(job)
            except PermanentError as err:
                self.lifecycle.finish(job, Status.FAILED, error=JobError.of("BadInput", str(err)))
                return "failed"
            if delivery.reservation is None:
                # The input came from its blob (or this is a resume): admission is decided now, after the claim.
                estimate = self._estimate(pipeline, job, input_value)
                delivery.reservation = BUDGET.try_reserve(estimate)
                if delivery.reservation is None:
                    self.lifecycle.release(job, delivery.before or job)  # give the claim back, attempts restored
                    delivery.claimed = None
                    return self._defer(job, msg, estimate)
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
            lease = JobLease(self.lifecycle, job, delivery.claimed_at)
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
            stored: dict[str, Any] = {}
            if len(outcome.result) <= RESULT_INLINE_MAX_BYTES:
                # Small: the result goes into the row with the final state, in the same write (no blob put).
                stored["result_inline"] = delivery.inline = outcome.result
            else:
                self.stores.blobs.put(name, outcome.result, "application/json")
            delivery.result = (name, len(outcome.result))
            try:
                done = self.lifecycle.finish(
                    job, Status.SUCCEEDED, error=None, result_blob=name, result_bytes=len(outcome.result),
                    usage=usage, **stored, **progress,
                )
            except Exception:
                if stored:
                    # The row did not take the result: keep it in its blob too, so that whoever finishes the
                    # job (the redelivery after the release, or the reaper) finds it and nothing runs twice.
                    try:
                        self.stores.blobs.put(name, outcome.result, "application/json")
                    except Exception:  # noqa: BLE001 - the release below still carries it in the row
                        log.warning("job %s: could not keep the result in its blob either", job.id)
                raise
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
