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
from shared.core.errors import CorruptInput, NotFound, PermanentError, StorageUnavailable
from shared.core.jobs import Job, JobError, Status
from shared.core.leased import Ending, StoredResult
from shared.core.lifecycle import ClaimUnresolved, Lifecycle
from shared.core.messages import JobMessage
from shared.core.names import result_blob_name
from shared.observability import telemetry
from shared.runtime.admission import Reservation
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptHost, AttemptResult, RowLease
from shared.sdk.pipeline import Pipeline
from shared.sdk.retry import RetryPolicy
from shared.storage.blobs import decode_stored_input

log = logging.getLogger(__name__)

#: "The input has not been read yet" (an input may itself be null).
_NO_INPUT: Any = object()

#: A result up to this size is stored in the job row (a binary property holds 64 KiB) instead of a blob.
RESULT_INLINE_MAX_BYTES = 32 * 1024


class JobLease(RowLease[Job]):
    """The claim on a running job: a cancel request shows on the renewed row."""

    def __init__(self, lifecycle: Lifecycle, job: Job, claimed_at: float | None = None) -> None:
        super().__init__(lifecycle, job, f"job {job.id}", claimed_at)

    @property
    def job(self) -> Job:
        return self.row

    def stop_requested(self) -> bool:
        return self.row.cancel_requested


class _Delivery:
    """What one delivery of a message did so far: what to release or fail if the worker itself breaks."""

    def __init__(self, redelivered: bool = False) -> None:
        #: The host delivered this message before (``dequeue_count`` > 1): an earlier delivery failed or died.
        self.redelivered = redelivered
        self.before: Job | None = None
        self.claimed: Job | None = None
        #: This attempt's result, once stored: a release keeps it on the row.
        self.result: StoredResult | None = None
        #: When this delivery's claim was asked for (monotonic): the start of the attempt's fence. Not when its
        #: answer came back: the claim's heartbeat is planned before the write, and a write can take a read
        #: timeout or two (30 s each) to answer, which the reaper's clock, counting from that heartbeat, does not wait.
        self.claimed_at: float | None = None
        #: This delivery's share of the host's memory budget, while its attempt runs.
        self.reservation: Reservation | None = None


class Worker(AttemptHost):
    """One delivery of a job message runs one attempt."""

    def handle(self, text: str, dequeue_count: int) -> str:
        """Process one delivery; returns a short outcome for the invocation log."""
        msg = self._decode_or_poison(text, JobMessage.decode, "job")
        if msg is None:
            return "bad-message"
        delivery = _Delivery(redelivered=dequeue_count > 1)
        last = dequeue_count >= host_config().max_dequeue_count
        try:
            with (
                telemetry.job_context(job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt),
                telemetry.attempt_span(
                    msg.traceparent, job_id=msg.job_id, tenant=msg.tenant, attempt=msg.attempt
                ) as span,
            ):
                outcome = self._index_redelivered(msg, dequeue_count, last) or self._handle(msg, text, delivery)
                span.set_attribute("thematiq.outcome", outcome)
                if outcome in ("failed", "retrying"):
                    telemetry.mark_error(span, outcome)
                return outcome
        except Exception as err:
            self._after_worker_error(delivery, err, last=last)
            raise

    def _index_redelivered(self, msg: JobMessage, dequeue_count: int, last: bool) -> str | None:
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
            self.lifecycle.index_job(msg.tenant, msg.job_id)
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
        why = f"the worker failed on the last allowed delivery ({type(err).__name__}); the message went to the poison queue"
        self._give_back(claimed, before, last=last, why=why, stored=delivery.result)

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
            if delivery.redelivered and job.poison_copy and job.attempts == msg.attempt:
                # An earlier delivery of this message failed the job, then failed itself (or its host died), maybe
                # before the copy: the FAILED write recorded that the copy is owed, so it is sent now (at least once).
                self._poison(job, msg.without_row().encode())
                return "poison-copied"
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
        reservation, input_value = None, _NO_INPUT
        # The input is in the row (or the message): admission is decided before the claim, for free. Not for a
        # row that points at this attempt's result: it needs no memory (the claim finishes it from the result).
        if job.input_blob is None and job.result_blob != result_blob_name(job.tenant, job.id, msg.attempt):
            try:
                input_value = self._load_input(job)
            except PermanentError as err:
                # It can never run: fail it now, in one write. Raised before the claim, the error would fail every
                # delivery, none of which holds the job, and the reaper would re-enqueue it from the poison queue.
                refused = self.lifecycle.refuse(job, msg.attempt, JobError.of("BadInput", str(err)))
                if not refused.applied:
                    return "noop-lost-race" if fresh else None
                log.error("job %s: failed before its claim: %s", job.id, err)
                return "failed"
            pipeline = self.registry.get(job.pipeline)
            estimate = self._job_estimate(pipeline, job, input_value)
            reservation = self.budget.try_reserve(estimate)
            if reservation is None:
                return self._defer(job, msg, estimate)
        try:
            claiming = time.monotonic()
            try:
                claimed = self.lifecycle.claim(job, msg.attempt)
            except NotFound:
                log.warning("job %s: not found (deleted?); message dropped", msg.job_id)
                return "missing"
            except ClaimUnresolved as unknown:
                # It may have landed: hold it as ours so that the error path releases it by owner.
                delivery.before, delivery.claimed = job, unknown.claim
                raise
            if not claimed.applied:
                return "noop-lost-race" if fresh else None
            if claimed.row.status == Status.SUCCEEDED:
                return "succeeded"  # this attempt's result was stored: the claim finished the job from it
            delivery.before, delivery.claimed, delivery.claimed_at = job, claimed.row, claiming
            return self._run(claimed.row, msg, delivery, input_value, reservation)
        finally:
            if reservation is not None:
                reservation.release()

    # -- admission ---------------------------------------------------------------
    def _job_estimate(self, pipeline: Pipeline | None, job: Job, value: Any) -> float:
        """The attempt's memory estimate in MiB."""
        return self._estimate(pipeline, job.params, value, f"job {job.id}")

    def _defer(self, job: Job, msg: JobMessage, estimate: float) -> str:
        """No room in this host's memory budget: send the message again, a little later; this delivery completes."""
        delay = timedelta(seconds=self.settings.admission_delay_seconds)
        log.info(
            "job %s: needs about %.0f MB, which does not fit beside the %d attempts running; again in %.0f s",
            msg.job_id, estimate, self.budget.running, delay.total_seconds(),
        )
        self._send_later(msg, job)
        return "deferred"

    def _resume(self, job: Job, msg: JobMessage, text: str, delivery: _Delivery) -> str:
        """Continue a waiting job's attempt after its fan-in (same attempt number)."""
        claiming = time.monotonic()
        resumed = self.lifecycle.resume(job, msg.attempt)
        if not resumed.applied:
            log.info("job %s: resume for attempt %d does not apply (%s); ignored", job.id, msg.attempt, job.status)
            return "noop-stale"
        if resumed.row.status == Status.SUCCEEDED:
            return "succeeded"  # this resumed attempt had stored its result, then released its claim
        delivery.before, delivery.claimed, delivery.claimed_at = job, resumed.row, claiming
        return self._run(resumed.row, msg, delivery)

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
                self.lifecycle.finish(job, Ending(Status.FAILED, error))
                return "failed"
            timeout = attempt_timeout(pipeline.timeout_seconds, self.settings.pipeline_timeout_seconds)
            try:
                input_value = preloaded if preloaded is not _NO_INPUT else self._load_input(job)
            except PermanentError as err:
                self.lifecycle.finish(job, Ending(Status.FAILED, JobError.of("BadInput", str(err))))
                return "failed"
            if delivery.reservation is None:
                # The input came from its blob (or this is a resume): admission is decided now, after the claim.
                estimate = self._job_estimate(pipeline, job, input_value)
                delivery.reservation = self.budget.try_reserve(estimate)
                if delivery.reservation is None:
                    # Give the claim back (attempts restored), then defer the row as released: the claimed one no
                    # longer matches it, so its due time would stay where it was and the reaper's lost-message
                    # pass would add a copy of the message every period while the job waits for memory.
                    released = self.lifecycle.release(job, delivery.before or job)
                    delivery.claimed = None
                    return self._defer(released.row, msg, estimate)
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
            result = self._attempt(lease, spec, timeout, self.settings, input_value)
            delivery.claimed = lease.job
            return self._record(result, lease.job, pipeline.retry, text, delivery)

    def _load_input(self, job: Job) -> Any:
        if job.input_inline:
            return _decoded(job.input_inline, "in its row")
        if job.input_blob:
            return _decoded(self.stores.blobs.get(job.input_blob), "in its blob")
        raise PermanentError("the job has no input")

    def _record(self, result: AttemptResult, job: Job, retry: RetryPolicy, text: str, delivery: _Delivery) -> str:
        usage = _merge_usage(job.usage, result.usage)
        telemetry.record_usage(job.pipeline, result.usage)
        if result.kind == "lost":
            delivery.claimed = None  # not ours any more: nothing to release
            return "lost"
        if result.kind == "succeeded":
            return self._record_success(result, job, usage, delivery)
        if result.kind == "cancelled":
            self.lifecycle.finish(job, Ending(Status.CANCELLED, usage=usage, progress=result.progress))
            return "cancelled"
        if result.kind == "suspended" and result.suspended is not None:
            stage = result.suspended.stage
            waiting = self.lifecycle.suspend(job, stage, usage=usage, progress=result.progress)
            if waiting.applied and waiting.row.status == Status.WAITING:
                log.info("job %s: waiting for %d chunks of stage %s", job.id, result.suspended.chunks, stage)
                return "waiting"
            return "cancelled" if waiting.applied else "lost"
        error = result.error or JobError.of("Error", "the attempt failed")
        decision, again = self._next_step(retry, job, result)
        if again:
            self.lifecycle.finish(job, Ending(Status.RETRYING, error, usage=usage, progress=result.progress,
                                              retry_in=decision.delay))
            log.warning(
                "job %s: attempt %d failed (%s); %s in %.1f s",
                job.id, job.attempts, error.type, decision.reason, decision.delay.total_seconds(),
            )
            return "retrying"
        why = decision.reason if not decision.retry else f"attempts exhausted ({job.attempts}/{job.max_attempts})"
        final = JobError.of(error.type, f"{error.message} [{why}]")
        if self.lifecycle.finish(job, Ending(Status.FAILED, final, usage=usage, progress=result.progress,
                                             poison=True)).applied:
            self._poison(job, text)  # if this raises, the host's redelivery sends it (Job.poison_copy)
        log.error("job %s: failed after attempt %d (%s, %s)", job.id, job.attempts, error.type, why)
        return "failed"

    def _poison(self, job: Job, text: str) -> None:
        """Copy a failed job's message (ids only) to the poison queue, where an operator finds it."""
        self.stores.messages.send_poison(text)
        telemetry.event("job.poisoned", job_id=job.id, tenant=job.tenant, pipeline=job.pipeline, attempt=job.attempts)

    def _record_success(self, result: AttemptResult, job: Job, usage: dict[str, float], delivery: _Delivery) -> str:
        assert result.result is not None
        name = result_blob_name(job.tenant, job.id, job.attempts)
        # Small: the result goes into the row with the final state, in the same write (no blob put).
        inline = result.result if len(result.result) <= RESULT_INLINE_MAX_BYTES else None
        if inline is None:
            self.stores.blobs.put(name, result.result, "application/json")
        delivery.result = StoredResult(name, len(result.result), inline)
        try:
            done = self.lifecycle.finish(
                job, Ending(Status.SUCCEEDED, result=delivery.result, usage=usage, progress=result.progress)
            )
        except Exception:
            if inline is not None:
                # The row did not take the result: keep it in its blob too, so that whoever finishes the
                # job (the redelivery after the release, or the reaper) finds it and nothing runs twice.
                try:
                    self.stores.blobs.put(name, result.result, "application/json")
                except Exception:  # noqa: BLE001 - the release below still carries it in the row
                    log.warning("job %s: could not keep the result in its blob either", job.id)
            raise
        return "succeeded" if done.applied else "lost"


def _decoded(data: bytes, where: str) -> Any:
    """The stored input; :class:`PermanentError` if it does not decode (no retry or redelivery can mend it)."""
    try:
        return decode_stored_input(data, where)
    except CorruptInput as err:
        raise PermanentError(str(err)) from err


def _merge_usage(old: dict[str, float], new: dict[str, float]) -> dict[str, float]:
    merged = dict(old)
    for k, v in new.items():
        merged[k] = merged.get(k, 0.0) + v
    return merged
