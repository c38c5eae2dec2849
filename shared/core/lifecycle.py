"""The one owner of every job and chunk transition.

Worker, chunk worker, reaper, API service and fan-out call these methods and
nothing else to change a job's or a chunk's state, the way procrastinate's
``JobManager`` is the only code that moves a job. Each transition is a *plan*
(the fields to write, given the row as it is now, or None if the transition no
longer applies) handed to the conditional-write primitive
(``shared.core.conditional.apply``), which re-reads after a 412 or an ambiguous
error and decides what happened. Every applied transition is recorded (a
``job.transition`` event and metric when the status changes; the
``thematiq.transitions`` counter always).

Who may move a job (docs/architecture.md has the diagram)::

    queued ──claim──▶ running ──succeed/fail/cancel──▶ succeeded | failed | cancelled
      ▲                 │ ├──retry──▶ retrying ──claim──▶ running
      └───release───────┘ ├──suspend──▶ waiting ──fan-in + resume──▶ running
                          └──reap (stale heartbeat)──▶ retrying | failed | cancelled | succeeded (from its blob)

Messages are sent only after the write that makes them valid has landed, and a
duplicate message is always harmless: every claim is conditional on the attempt.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shared.config.constants import (
    CANCEL_CONDITIONAL_TRIES,
    CONDITIONAL_TRIES,
    REAPER_MAX_REQUEUES_PER_RUN,
    SEND_RETRY_DELAY,
    SEND_TRIES,
)
from shared.config.settings import get_settings
from shared.core import conditional, fairness, webhooks
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.conditional import Applied
from shared.core.errors import (
    AlreadyExists,
    Conflict,
    LostClaim,
    NotFound,
    StorageUnavailable,
    ThematiqError,
)
from shared.core.jobs import Job, JobError, Progress, Status, WebhookStatus, utcnow
from shared.core.messages import SNAPSHOT_MAX_CHARS, ChunkMessage, JobMessage
from shared.core.names import result_blob_name
from shared.core.ports import Stores
from shared.observability import telemetry

log = logging.getLogger(__name__)

Fields = dict[str, Any]


def first_message(job: Job) -> JobMessage:
    """A new job's first message: with the inserted row and its ETag when they fit, else ids only."""
    message = JobMessage(job.tenant, job.id, 1, job.traceparent)
    if job.etag and job.attempts == 0:
        carrying = JobMessage(job.tenant, job.id, 1, job.traceparent, etag=job.etag, row=job.snapshot())
        if len(carrying.encode()) <= SNAPSHOT_MAX_CHARS:
            return carrying
    return message


def new_owner() -> str:
    """A claim's identity: unique per claim, so a re-read can tell our claim from anyone else's."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ClaimUnresolved(ThematiqError):
    """A claim whose outcome could not be learnt. ``claim`` is the row as it would be if it had landed."""

    def __init__(self, claim: Job) -> None:
        super().__init__(f"job {claim.id}: the claim's outcome is unknown")
        self.claim = claim


class Lifecycle:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    # == the primitive, for jobs and chunks ======================================================
    def _job(
        self,
        job: Job,
        name: str,
        plan: Callable[[Job], Fields | None],
        landed: Callable[[Job], bool] | None = None,
        *,
        with_input: bool = False,
        tries: int = CONDITIONAL_TRIES,
    ) -> Applied[Job]:
        jobs = self.stores.jobs
        result = conditional.apply(
            job,
            read=lambda: jobs.get(job.tenant, job.id, with_input=with_input),
            write=lambda row, fields: jobs.update(row, **fields),
            plan=plan,
            landed=landed,
            name=f"job {job.id}: {name}",
            tries=tries,
        )
        if result.applied:
            telemetry.TRANSITIONS.add(1, {"transition": name, "kind": "job"})
            if result.row.status != job.status or name in ("claim", "resume"):
                telemetry.record_transition(result.row)
                if result.row.status.terminal:
                    # Its completion webhook, after the terminal write landed, through the stores' queue port.
                    webhooks.job_ended(result.row, self.stores.messages.send)
                    # Its tenant's fairness slot, to the tenant's oldest parked job (best effort; the reaper repairs).
                    fairness.job_ended(self.stores, result.row, self.send)
        return result

    def _chunk(
        self,
        chunk: Chunk,
        name: str,
        plan: Callable[[Chunk], Fields | None],
        landed: Callable[[Chunk], bool] | None = None,
        *,
        with_input: bool = False,
    ) -> Applied[Chunk]:
        chunks = self.stores.chunks
        result = conditional.apply(
            chunk,
            read=lambda: chunks.get(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, with_input=with_input),
            write=lambda row, fields: chunks.update(row, **fields),
            plan=plan,
            landed=landed,
            name=f"chunk {chunk.job_id}/{chunk.stage}/{chunk.index}: {name}",
        )
        if result.applied:
            telemetry.TRANSITIONS.add(1, {"transition": name, "kind": "chunk"})
            if result.row.status != chunk.status:
                telemetry.event(
                    "chunk.transition", job_id=chunk.job_id, tenant=chunk.tenant, stage=chunk.stage,
                    chunk=chunk.index, status=result.row.status.value, attempt=result.row.attempts,
                )
        return result

    def send(self, message: JobMessage | ChunkMessage, delay: timedelta | None = None) -> bool:
        """Send, retrying a few times; False if it never went (the reaper re-sends what is lost).

        A send whose answer was lost may have gone: sending again only makes a duplicate,
        which the conditional claim turns into a no-op.
        """
        for i in range(SEND_TRIES):
            try:
                self.stores.messages.send(message, delay)
                return True
            except StorageUnavailable as err:
                if not err.maybe_applied:
                    break  # Storage is unreachable: leave it to the reaper rather than keep the caller waiting
                time.sleep(SEND_RETRY_DELAY * (i + 1))
        log.warning("job %s: message not sent after %d tries; the reaper will re-send it", message.job_id, SEND_TRIES)
        return False

    # == submission ==============================================================================
    def submit(self, job: Job, idempotency_key: str | None) -> tuple[Job, bool]:
        """Insert the job and send its first message. Returns ``(job, created)``.

        The insert's outcome is decided by reading, never by the answer: a committed
        insert whose answer was lost, or that the SDK retried into a 409, is ours and is
        answered as created, with its message sent. A replay (the key was used before
        with the same body) of a job that is still queued with no attempt sends its
        message again, since the first may never have gone.
        """
        for _ in range(3):
            try:
                stored = self.stores.jobs.create(job, idempotency_key)
                return self._accepted(stored, carry_row=True), True
            except AlreadyExists:
                pass
            except StorageUnavailable as err:
                if not err.maybe_applied:
                    raise  # never reached Storage: a clean 503, the client retries
            found = conditional.reread(lambda: self._find_submission(job, idempotency_key))
            if found is None:
                continue  # nothing committed: insert again
            existing, ours = found
            if ours:
                return self._accepted(existing), True
            if existing.status == Status.QUEUED and existing.attempts == 0:
                self._enqueue(existing, JobMessage(existing.tenant, existing.id, 1, existing.traceparent))
            return existing, False
        raise StorageUnavailable("could not store the job")

    def _accepted(self, job: Job, *, carry_row: bool = False) -> Job:
        telemetry.record_transition(job)
        # Row first, then message. Only the row we inserted (with its input, and the insert's ETag) travels
        # in the message; a row learnt by re-reading goes as ids only.
        self._enqueue(job, first_message(job) if carry_row else JobMessage(job.tenant, job.id, 1, job.traceparent))
        return job

    def _enqueue(self, job: Job, message: JobMessage, delay: timedelta | None = None) -> None:
        """Send a job's message; if it never went, make the job findable by the reaper before answering.

        ``job`` is the row as the write before the send left it. A job that was never claimed has no
        active-index row: its message is its record (``Job.in_queue_only``); a claimed one has one. Either way
        a send that fails is followed by the index row marked unsent for this ``available_at``, and the reaper's
        next index run once the job is due re-sends the message (not ``QUEUED_STALE_SECONDS`` later, and not
        held back by the backlog rule: we know it never went, or at worst sends a harmless duplicate). If that
        write fails too, Storage is away for both services: the lost-message pass finds a claimed job
        ``QUEUED_STALE_SECONDS`` after it was due, the daily full sweep a never-claimed one. The row is never
        deleted to undo the submission.
        """
        if self.send(message, delay):
            return
        self.track_unsent(job.tenant, job.id, unsent_for=job.available_at)

    def track(self, tenant: str, job_id: str, unsent_for: datetime | None = None) -> None:
        """Index a job whose message may not exist (an idempotent upsert; raises what the write raised)."""
        self.stores.jobs.track(tenant, job_id, unsent_for)

    def track_unsent(self, tenant: str, job_id: str, unsent_for: datetime | None = None) -> bool:
        """:meth:`track`, best effort: False (logged) if the write failed (see ``_enqueue``)."""
        try:
            self.track(tenant, job_id, unsent_for)
        except ThematiqError:
            log.error("job %s: its index row could not be written; if its message is lost too, the daily "
                      "sweep re-sends it", job_id)
            return False
        return True

    def _find_submission(self, job: Job, key: str | None) -> tuple[Job, bool] | None:
        """What an insert left behind: ``(row, it is ours)``, or None if nothing was committed."""
        if key is None:
            try:
                return self.stores.jobs.get(job.tenant, job.id), True
            except NotFound:
                return None
        target = self.stores.jobs.idempotency_target(job.tenant, key)
        if target is None:
            return None
        job_id, request_hash = target
        if job_id == job.id:
            return self.stores.jobs.get(job.tenant, job.id), True
        if request_hash != job.request_hash:
            raise Conflict("this Idempotency-Key was used with a different request body", field="Idempotency-Key")
        return self.stores.jobs.get(job.tenant, job_id), False

    # == the worker ==============================================================================
    def claim(self, job: Job, attempt: int) -> Job | None:
        """``queued``/``retrying`` → ``running`` for ``attempt``; None if someone else has it or it moved on."""
        owner = new_owner()

        def plan(row: Job) -> Fields | None:
            if not row.status.claimable or row.attempts != attempt - 1 or row.cancel_requested:
                return None
            if row.result_blob == result_blob_name(row.tenant, row.id, attempt):
                return None  # this attempt's result is stored: finish from it (succeed_from_blob), never run again
            now = utcnow()
            return {
                "status": Status.RUNNING, "attempts": attempt, "owner": owner,
                "started_at": row.started_at or now, "heartbeat_at": now,
            }

        try:
            result = self._job(job, "claim", plan, lambda row: row.owner == owner, with_input=True)
        except StorageUnavailable as err:  # Contended too: it is one
            # The claim may have landed and nobody can tell now: whoever handles this must give it back by
            # owner (a release conditional on our owner is right whether or not the claim landed).
            raise ClaimUnresolved(job.with_changes(status=Status.RUNNING, attempts=attempt, owner=owner)) from err
        return result.row if result.applied else None

    def resume(self, job: Job, attempt: int) -> Job | None:
        """``waiting`` (fanned in) → ``running``: the same attempt continues after its map stage."""
        owner = new_owner()

        def plan(row: Job) -> Fields | None:
            if row.status != Status.WAITING or row.attempts != attempt or row.fan_in_at is None:
                return None
            return {"status": Status.RUNNING, "owner": owner, "heartbeat_at": utcnow(), "fan_in_at": None}

        result = self._job(job, "resume", plan, lambda row: row.owner == owner, with_input=True)
        return result.row if result.applied else None

    def renew(self, job: Job, progress: Progress | None) -> Job:
        """Renew a running job's heartbeat (and progress). The returned row shows a cancel request.

        Raises :class:`LostClaim` once the job is no longer running under this claim.
        """
        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            fields: Fields = {"heartbeat_at": utcnow()}
            if progress is not None:
                fields["progress"] = progress
            return fields

        result = self._job(job, "renew", plan)
        if not result.applied:
            raise LostClaim(f"job is now {result.row.status} owned by {result.row.owner}")
        return result.row

    def release(
        self, job: Job, before: Job, result: tuple[str, int] | None = None, inline: bytes | None = None
    ) -> Job | None:
        """Give back a claim after the worker itself failed, so the next delivery of the same message can take it.

        ``before`` is the row as it was when this delivery claimed it. If the attempt had
        already stored its result, the row keeps a pointer to it and the next claim
        finishes the job from the blob instead of running the pipeline again.
        """
        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            fields: Fields = {
                "status": before.status, "attempts": before.attempts, "owner": None,
                "wait_stage": before.wait_stage, "fan_in_at": before.fan_in_at,
            }
            if result is not None:
                fields.update(result_blob=result[0], result_bytes=result[1])
                if inline is not None:
                    fields["result_inline"] = inline  # a small result lives in the row: keep it there
            return fields

        applied = self._job(job, "release", plan)
        return applied.row if applied.applied else None

    def finish(self, job: Job, status: Status, **changes: Any) -> Job | None:
        """Record how a running attempt ended: succeeded, failed, cancelled, retrying or waiting.

        Applies only while the job is still running under this claim, so a presumed-dead
        worker's outcome never overwrites a newer attempt's state. A cancel request that
        arrived meanwhile turns a retry or a suspension into ``cancelled``.
        """
        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            target, extra = status, changes
            if row.cancel_requested and status in (Status.RETRYING, Status.WAITING):
                target, extra = Status.CANCELLED, {k: v for k, v in changes.items() if k in ("usage", "progress")}
            fields: Fields = {"status": target, "owner": None, **extra}
            if target.terminal:
                fields["finished_at"] = utcnow()
            return fields

        applied = self._job(job, f"finish:{status.value}", plan)
        if not applied.applied:
            log.warning("job %s: changed under us (%s); outcome %s discarded", job.id, applied.row.status, status)
            return None
        return applied.row

    def retry(self, job: Job, error: JobError, delay: timedelta, **changes: Any) -> Job | None:
        """``running`` → ``retrying``, then the next attempt's message, delayed by the backoff."""
        due = utcnow() + delay
        updated = self.finish(job, Status.RETRYING, error=error, available_at=due, **changes)
        if updated is not None and updated.status == Status.RETRYING:
            self._enqueue(updated, JobMessage(job.tenant, job.id, job.attempts + 1, job.traceparent), delay)
        return updated

    def succeed_from_blob(self, job: Job, attempt: int) -> Job | None:
        """A released job whose ``attempt`` had already stored its result: finish it from the blob, no re-run."""
        name = result_blob_name(job.tenant, job.id, attempt)

        def plan(row: Job) -> Fields | None:
            # A claimable row released before attempt ``attempt`` was recorded, or a waiting row of that
            # attempt (a resumed attempt released after it stored its result).
            released = row.status.claimable and row.attempts == attempt - 1
            resumed = row.status == Status.WAITING and row.attempts == attempt
            if not (released or resumed) or row.result_blob != name:
                return None
            return {
                "status": Status.SUCCEEDED, "attempts": attempt, "owner": None, "finished_at": utcnow(),
                "error": None, "started_at": row.started_at or utcnow(), "wait_stage": None, "fan_in_at": None,
            }

        applied = self._job(job, "finish:succeeded", plan)
        return applied.row if applied.applied else None

    def recover_stored_result(self, job: Job) -> Job | None:
        """A job the reaper re-enqueued whose previous attempt's result turned out to be stored: finish it.

        One blob listing, only for jobs retried after a lost worker, never on the first attempt's path.
        """
        name = result_blob_name(job.tenant, job.id, job.attempts)
        size = self.stores.blobs.size(name) if job.attempts >= 1 else None
        if size is None:
            return None

        def plan(row: Job) -> Fields | None:
            if row.status != Status.RETRYING or row.attempts != job.attempts:
                return None
            return {"status": Status.SUCCEEDED, "owner": None, "finished_at": utcnow(), "error": None,
                    "result_blob": name, "result_bytes": size}

        applied = self._job(job, "finish:succeeded", plan)
        return applied.row if applied.applied else None

    def fail_claimed(self, job: Job, error: JobError) -> Job | None:
        """The worker failed on the last delivery the host allows: fail the job, if this delivery holds it."""
        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            return {"status": Status.FAILED, "owner": None, "finished_at": utcnow(), "error": error}

        applied = self._job(job, "finish:failed", plan)
        return applied.row if applied.applied else None

    # == cancellation ============================================================================
    def cancel(self, job: Job) -> Job:
        """Cancel at once if nobody runs it (queued, retrying, waiting); flag it if it runs.

        Raises :class:`Conflict` if it already finished otherwise.
        """
        def plan(row: Job) -> Fields | None:
            if row.status.terminal:
                return None
            if row.status.claimable or row.status == Status.WAITING:
                return {"status": Status.CANCELLED, "cancel_requested": True, "finished_at": utcnow(), "owner": None}
            return None if row.cancel_requested else {"cancel_requested": True}

        row = self._job(job, "cancel", plan, tries=CANCEL_CONDITIONAL_TRIES).row
        if row.status.terminal and row.status != Status.CANCELLED:
            raise Conflict(f"the job already finished ({row.status})", field="status")
        return row

    # == the reaper ==============================================================================
    def reap_stale(self, job: Job) -> str:
        """A running job whose heartbeat went stale: its worker is presumed dead.

        Returns what happened: ``succeeded`` (the attempt had stored its result),
        ``cancelled``, ``failed`` (no attempts left), ``requeued`` or ``skipped`` (it moved on).
        """
        name = result_blob_name(job.tenant, job.id, job.attempts)
        size = self.stores.blobs.size(name)
        now = utcnow()
        lost = JobError.of(
            "WorkerLost", f"attempt {job.attempts} stopped sending heartbeats (worker {job.owner} presumed dead)"
        )

        def plan(row: Job) -> Fields | None:
            # Still the very claim and heartbeat the scan saw as stale: otherwise its worker is alive.
            if row.status != Status.RUNNING or row.owner != job.owner or row.heartbeat_at != job.heartbeat_at:
                return None
            base: Fields = {"owner": None}
            if size is not None:
                return {**base, "status": Status.SUCCEEDED, "finished_at": now, "error": None,
                        "result_blob": name, "result_bytes": size}
            if row.cancel_requested:
                return {**base, "status": Status.CANCELLED, "finished_at": now}
            if row.attempts >= row.max_attempts:
                why = f"{lost.message}; attempts exhausted ({row.attempts}/{row.max_attempts})"
                return {**base, "status": Status.FAILED, "finished_at": now, "error": JobError.of(lost.type, why)}
            return {**base, "status": Status.RETRYING, "available_at": now, "error": lost,
                    "requeues": row.requeues + 1}

        applied = self._job(job, "reap", plan)
        if not applied.applied:
            return "skipped"
        row = applied.row
        if row.status == Status.RETRYING:
            self._enqueue(row, JobMessage(row.tenant, row.id, row.attempts + 1, row.traceparent))
            return "requeued"
        return row.status.value

    def requeue_lost(self, job: Job) -> bool:
        """A queued or retrying job long past due whose message is gone: send it again."""
        def plan(row: Job) -> Fields | None:
            if not row.status.claimable or row.available_at != job.available_at or row.attempts != job.attempts:
                return None
            return {"available_at": utcnow(), "requeues": row.requeues + 1}

        applied = self._job(job, "requeue", plan)
        if applied.applied:  # marked unsent for the moved-on due time, if this send fails too
            self._enqueue(applied.row, JobMessage(job.tenant, job.id, job.attempts + 1, job.traceparent))
        return applied.applied

    def record_callback(self, job: Job, status: WebhookStatus, attempts: int, error: str | None) -> bool:
        """How a job's completion webhook stands after attempt ``attempts`` (``shared.runtime.webhooks``).

        Applies to a later attempt only, or to the same attempt when it settles the webhook; never once it
        is settled. So of two messages for one attempt only the first records it (and queues the next).
        """
        status = WebhookStatus(status)

        def plan(row: Job) -> Fields | None:
            if WebhookStatus.of(row).settled:
                return None
            if row.callback_attempts > attempts or (row.callback_attempts == attempts and not status.settled):
                return None
            return {"callback_status": status, "callback_attempts": attempts, "callback_error": error}

        return self._job(job, f"callback:{status.value}", plan, with_input=True).applied

    def record_themes_edit(
        self, job: Job, *, expected_blob: str, new_blob: str, size: int, inline: bytes | None
    ) -> Applied[Job]:
        """A finished job's result replaced by its edited version (``PATCH /api/jobs/{id}/themes``).

        Applies only while the job is ``succeeded`` and its result is still ``expected_blob``, the version the
        editor read (its ``If-Match``): a concurrent edit that landed first makes this one not apply, and the
        caller answers 412 with nothing changed. The new version is a new blob written before this call, so
        the row never points at a result that is not stored; the old blob stays until retention.
        """
        def plan(row: Job) -> Fields | None:
            if row.status != Status.SUCCEEDED or row.result_blob != expected_blob:
                return None
            return {"result_blob": new_blob, "result_bytes": size, "result_inline": inline}

        # The row is read whole: a small result lives in it, and the caller needs the stored version back.
        return self._job(job, "themes-edit", plan, with_input=True)

    def postpone(self, job: Job, delay: timedelta) -> None:
        """A queued or retrying job whose delivery was deferred (no memory on this host): due again later.

        Best effort: if the row moved on, the deferred message is a no-op anyway.
        """
        due = utcnow() + delay

        def plan(row: Job) -> Fields | None:
            if not row.status.claimable or row.attempts != job.attempts:
                return None
            return {"available_at": max(row.available_at, due)}

        try:
            self._job(job, "postpone", plan)
        except ThematiqError:
            log.warning("job %s: could not move its due time on after a deferral", job.id)

    def resend_resume(self, job: Job) -> bool:
        """A waiting job that fanned in long ago but never resumed: its resume message was lost."""
        def plan(row: Job) -> Fields | None:
            if row.status != Status.WAITING or row.fan_in_at is None or row.fan_in_at != job.fan_in_at:
                return None
            return {"fan_in_at": utcnow()}

        applied = self._job(job, "resume-resend", plan)
        if applied.applied:
            self.send(JobMessage(job.tenant, job.id, job.attempts, job.traceparent, resume=True))
        return applied.applied

    def expire(self, job: Job, prefix: str) -> None:
        """Retention: a finished job, its blobs and its chunks are deleted."""
        self.stores.blobs.delete_prefix(prefix)
        self.stores.chunks.delete_job_chunks(job.tenant, job.id)
        self.stores.jobs.delete(job)

    def progress_of(self, job: Job) -> tuple[int, int] | None:
        """(items processed, items in total) of the stage a waiting job waits for: the sum of its chunks.

        Read here, so that chunks never write the job row.
        """
        if job.status != Status.WAITING or not job.wait_stage:
            return None
        try:
            chunks = self.stores.chunks.list_stage(job.tenant, job.id, job.wait_stage)
        except ThematiqError:
            return None
        done = sum(c.items if c.status.terminal else c.processed for c in chunks)
        return done, sum(c.items for c in chunks)

    @staticmethod
    def max_requeues_per_run() -> int:
        return REAPER_MAX_REQUEUES_PER_RUN

    # == map stages: chunks and fan-in ===========================================================
    def create_chunks(self, tenant: str, job_id: str, stage: str, chunks: list[Chunk]) -> None:
        """Insert a stage's chunks. Never overwrites: a chunk another writer created (or finished) stays as it is."""
        wanted = {c.index: c for c in chunks}
        for _ in range(CONDITIONAL_TRIES):
            try:
                self.stores.chunks.create_all(wanted.values())
                return
            except (AlreadyExists, StorageUnavailable) as err:
                if isinstance(err, StorageUnavailable) and not err.maybe_applied:
                    raise
                existing = conditional.reread(lambda: self.stores.chunks.list_stage(tenant, job_id, stage))
                wanted = {i: c for i, c in wanted.items() if i not in {e.index for e in existing}}
                if not wanted:
                    return
        raise StorageUnavailable(f"could not create the chunks of stage {stage!r}")

    def suspend(self, job: Job, stage: str, **changes: Any) -> Job | None:
        """``running`` → ``waiting`` for ``stage``; then settle, since chunks may have finished before we waited."""
        def landed(row: Job) -> bool:
            return row.status == Status.WAITING and row.wait_stage == stage and row.attempts == job.attempts

        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            if row.cancel_requested:
                return {"status": Status.CANCELLED, "owner": None, "finished_at": utcnow(),
                        **{k: v for k, v in changes.items() if k in ("usage", "progress")}}
            return {"status": Status.WAITING, "owner": None, "wait_stage": stage, "fan_in_at": None, **changes}

        applied = self._job(job, "suspend", plan, landed)
        if not applied.applied:
            return None
        if applied.row.status == Status.WAITING:
            # Write, then look: chunks that finished before we were waiting are seen here.
            try:
                self.settle(job.tenant, job.id, stage, job.traceparent)
            except ThematiqError:
                log.warning("job %s: could not settle stage %s now; the reaper will", job.id, stage)
        return applied.row

    def pump(self, chunks: list[Chunk], window: int, traceparent: str | None = None) -> int:
        """Release pending chunks until the job's window of queued and running chunks is full."""
        in_flight = sum(1 for c in chunks if c.status in (ChunkStatus.QUEUED, ChunkStatus.RUNNING))
        sent = 0
        for chunk in sorted((c for c in chunks if c.status == ChunkStatus.PENDING), key=lambda c: c.index):
            if in_flight + sent >= window:
                break
            applied = self._chunk(
                chunk, "release",
                lambda row: {"status": ChunkStatus.QUEUED, "queued_at": utcnow()}
                if row.status == ChunkStatus.PENDING else None,
            )
            if applied.applied:
                self.send_chunk(applied.row, traceparent)
                sent += 1
        return sent

    def send_chunk(self, chunk: Chunk, traceparent: str | None = None, delay: timedelta | None = None) -> None:
        self.send(
            ChunkMessage(chunk.tenant, chunk.job_id, chunk.stage, chunk.index, chunk.attempts + 1, traceparent), delay
        )

    def settle(self, tenant: str, job_id: str, stage: str, traceparent: str | None = None) -> str:
        """After a chunk (or the parent) changed state: refill the window, or fan in if the stage is done.

        Returns ``fired``, ``failed``, ``cancelled``, ``not-done``, ``already-fired`` or ``not-waiting``.
        """
        chunks = self.stores.chunks.list_stage(tenant, job_id, stage)
        if not all(c.status.terminal for c in chunks):
            self.pump(chunks, get_settings().max_chunks_in_flight_per_job, traceparent)
            return "not-done"
        return self.fan_in(tenant, job_id, stage, chunks)

    def fan_in(self, tenant: str, job_id: str, stage: str, chunks: list[Chunk]) -> str:
        """Exactly one of the parties that see the stage complete wins the conditional write and sends the resume."""
        job = self.stores.jobs.get(tenant, job_id)
        total = sum(c.items for c in chunks)
        failed = [c for c in chunks if c.status != ChunkStatus.SUCCEEDED]
        failed_items = sum(c.items for c in failed)
        budget = chunks[0].budget if chunks else 0.0
        stamp = utcnow()
        outcome: dict[str, str] = {}

        def plan(row: Job) -> Fields | None:
            if row.status != Status.WAITING or row.wait_stage != stage:
                outcome["why"] = "not-waiting"
                return None
            if row.fan_in_at is not None:
                outcome["why"] = "already-fired"
                return None
            if row.cancel_requested:
                outcome["why"] = "cancelled"
                return {"status": Status.CANCELLED, "finished_at": utcnow(), "owner": None}
            if failed_items and failed_items > budget * total:
                worst = failed[0]
                reason = (
                    f"map stage {stage!r}: {len(failed)} of {len(chunks)} chunks failed ({failed_items} of {total} "
                    f"items, over the error budget of {budget:.1%}); chunk {worst.index}: "
                    f"{worst.error_type}: {worst.error_message}"
                )
                outcome["why"] = "failed"
                return {"status": Status.FAILED, "finished_at": utcnow(), "owner": None,
                        "error": JobError.of("ChunkFailed", reason)}
            outcome["why"] = "fired"
            return {"fan_in_at": stamp, "fan_ins": row.fan_ins + 1}

        applied = self._job(job, "fan-in", plan, lambda row: row.fan_in_at == stamp)
        if not applied.applied:
            return outcome.get("why", "not-waiting")
        if applied.row.status == Status.WAITING:
            row = applied.row
            self.send(JobMessage(row.tenant, row.id, row.attempts, row.traceparent, resume=True))
            telemetry.event("fan_in.fired", job_id=job_id, tenant=tenant, stage=stage, chunks=len(chunks))
            return "fired"
        return applied.row.status.value

    def claim_chunk(self, chunk: Chunk, attempt: int) -> Chunk | None:
        owner = new_owner()

        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.QUEUED or row.attempts != attempt - 1:
                return None
            return {"status": ChunkStatus.RUNNING, "attempts": attempt, "owner": owner, "heartbeat_at": utcnow()}

        applied = self._chunk(chunk, "claim", plan, lambda row: row.owner == owner, with_input=True)
        return applied.row if applied.applied else None

    def renew_chunk(self, chunk: Chunk, processed: int | None) -> Chunk:
        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.RUNNING or row.owner != chunk.owner:
                return None
            fields: Fields = {"heartbeat_at": utcnow()}
            if processed is not None:
                fields["processed"] = min(processed, row.items)
            return fields

        applied = self._chunk(chunk, "renew", plan)
        if not applied.applied:
            raise LostClaim(f"chunk is now {applied.row.status} owned by {applied.row.owner}")
        return applied.row

    def release_chunk(self, chunk: Chunk, before: Chunk) -> Chunk | None:
        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.RUNNING or row.owner != chunk.owner:
                return None
            return {"status": before.status, "attempts": before.attempts, "owner": None}

        applied = self._chunk(chunk, "release-claim", plan)
        return applied.row if applied.applied else None

    def finish_chunk(self, chunk: Chunk, status: ChunkStatus, **changes: Any) -> Chunk | None:
        """Record how a running chunk ended (succeeded, failed, cancelled), if it is still ours."""
        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.RUNNING or row.owner != chunk.owner:
                return None
            return {"status": status, "owner": None, "finished_at": utcnow(), **changes}

        applied = self._chunk(chunk, f"finish:{status.value}", plan)
        return applied.row if applied.applied else None

    def retry_chunk(self, chunk: Chunk, error: JobError | None, delay: timedelta, traceparent: str | None) -> bool:
        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.RUNNING or row.owner != chunk.owner:
                return None
            return {"status": ChunkStatus.QUEUED, "owner": None, "queued_at": utcnow(),
                    "error_type": error.type if error else "", "error_message": error.message if error else ""}

        applied = self._chunk(chunk, "retry", plan)
        if applied.applied:
            self.send_chunk(applied.row, traceparent, delay)
        return applied.applied

    def cancel_chunk(self, chunk: Chunk) -> bool:
        """A chunk whose parent job ended or was cancelled: skip it."""
        applied = self._chunk(
            chunk, "cancel",
            lambda row: {"status": ChunkStatus.CANCELLED, "owner": None, "finished_at": utcnow()}
            if row.status in (ChunkStatus.PENDING, ChunkStatus.QUEUED) else None,
        )
        return applied.applied

    def fail_chunk(self, chunk: Chunk, error_type: str, message: str, *, claimed: bool) -> bool:
        """Fail a chunk: one this delivery claimed (last delivery), or a queued one whose messages keep failing."""
        def plan(row: Chunk) -> Fields | None:
            ours = row.status == ChunkStatus.RUNNING and row.owner == chunk.owner if claimed else (
                row.status == ChunkStatus.QUEUED and row.attempts == chunk.attempts
            )
            if not ours:
                return None
            return {"status": ChunkStatus.FAILED, "owner": None, "finished_at": utcnow(),
                    "error_type": error_type, "error_message": message}

        return self._chunk(chunk, "finish:failed", plan).applied

    def reap_stale_chunk(self, chunk: Chunk) -> str:
        def plan(row: Chunk) -> Fields | None:
            if row.status != ChunkStatus.RUNNING or row.owner != chunk.owner or row.heartbeat_at != chunk.heartbeat_at:
                return None
            if row.attempts >= row.max_attempts:
                return {"status": ChunkStatus.FAILED, "owner": None, "finished_at": utcnow(),
                        "error_type": "WorkerLost",
                        "error_message": f"attempt {row.attempts} stopped sending heartbeats; attempts exhausted"}
            return {"status": ChunkStatus.QUEUED, "owner": None, "queued_at": utcnow(),
                    "error_type": "WorkerLost", "error_message": "stale heartbeat"}

        applied = self._chunk(chunk, "reap", plan)
        if not applied.applied:
            return "skipped"
        if applied.row.status == ChunkStatus.QUEUED:
            self.send_chunk(applied.row)
            return "requeued"
        return "failed"

    def requeue_lost_chunk(self, chunk: Chunk) -> bool:
        applied = self._chunk(
            chunk, "requeue",
            lambda row: {"queued_at": utcnow()}
            if row.status == ChunkStatus.QUEUED and row.queued_at == chunk.queued_at else None,
        )
        if applied.applied:
            self.send_chunk(applied.row)
        return applied.applied


__all__ = ["Lifecycle", "ThematiqError", "new_owner", "result_blob_name"]
