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

Jobs and chunks are both leased rows: ``claim``, ``renew``, ``release``,
``finish``, ``reap``, ``requeue_lost`` and ``cancel`` take either, and what
differs between the two kinds is a :class:`shared.core.leased.RowKind`.

Every transition answers with :class:`Applied` (the latest row, and whether
this transition made it so); ``send`` and ``record_callback`` answer a bool,
``refill_or_fan_in`` a :class:`StageCheck`.

Who may move a job (docs/architecture.md has the diagram)::

    queued ──claim──▶ running ──finish (succeeded/failed/cancelled)──▶ succeeded | failed | cancelled
      ▲                 │ ├──finish (retrying)──▶ retrying ──claim──▶ running
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
from enum import StrEnum

from shared.config.constants import (
    BUSY_STALE_SECONDS,
    CANCEL_CONDITIONAL_TRIES,
    CONDITIONAL_TRIES,
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
    Contended,
    EtagMismatch,
    NotFound,
    StorageUnavailable,
    ThematiqError,
)
from shared.core.jobs import Job, JobError, Progress, Status, WebhookStatus, utcnow
from shared.core.leased import Ending, Fields, R, RowKind, StoredResult, finish_from_stored, kind_of
from shared.core.messages import SNAPSHOT_MAX_CHARS, ChunkMessage, JobMessage
from shared.core.names import result_blob_name
from shared.core.ports import Stores, TenantMark
from shared.observability import telemetry

log = logging.getLogger(__name__)


class StageCheck(StrEnum):
    """What :meth:`Lifecycle.refill_or_fan_in` found when it looked at a map stage."""

    #: This call won the fan-in and sent the resume.
    FIRED = "fired"
    #: The stage is done, over its error budget: this call failed the job.
    FAILED = "failed"
    #: The stage is done and the job had a cancel request: this call cancelled it.
    CANCELLED = "cancelled"
    #: Chunks are still pending, queued or running (the window was refilled).
    NOT_DONE = "not-done"
    #: Another party fanned in first.
    ALREADY_FIRED = "already-fired"
    #: The job no longer waits for this stage.
    NOT_WAITING = "not-waiting"


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


def stage_progress(stores: Stores, job: Job) -> tuple[int, int] | None:
    """(items processed, items in total) of the stage a waiting job waits for: the sum of its chunks.

    A read, not a transition: chunks never write the job row, so the API sums them here.
    """
    if job.status != Status.WAITING or not job.wait_stage:
        return None
    try:
        chunks = stores.chunks.list_stage(job.tenant, job.id, job.wait_stage)
    except (ThematiqError, KeyError, TypeError, ValueError):
        # Storage away, or a chunk row that cannot be read (a hand-edited entity): the job's own progress stands.
        return None
    done = sum(c.items if c.status.terminal else c.processed for c in chunks)
    return done, sum(c.items for c in chunks)


class ClaimUnresolved(ThematiqError):
    """A claim whose outcome could not be learnt. ``claim`` is the row as it would be if it had landed."""

    def __init__(self, claim: Job) -> None:
        super().__init__(f"job {claim.id}: the claim's outcome is unknown")
        self.claim = claim


class Lifecycle:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    # == the primitive, for jobs and chunks ======================================================
    def _apply(
        self,
        row: R,
        name: str,
        plan: Callable[[R], Fields | None],
        landed: Callable[[R], bool] | None = None,
        *,
        with_input: bool = False,
        tries: int = CONDITIONAL_TRIES,
    ) -> Applied[R]:
        kind = kind_of(row)
        result = conditional.apply(
            row,
            read=lambda: kind.read(self.stores, row, with_input=with_input),
            write=lambda current, fields: self._write(kind, current, fields),
            plan=plan,
            landed=landed,
            name=f"{kind.label(row)}: {name}",
            tries=tries,
        )
        if result.applied:
            # A claim or resume that found its attempt's result stored finished the job: counted as the finish.
            stored = name in ("claim", "resume") and result.row.status == Status.SUCCEEDED
            telemetry.TRANSITIONS.add(1, {"transition": "finish:succeeded" if stored else name, "kind": kind.name})
            self._record(row, result.row, name)
        return result

    def _write(self, kind: RowKind[R], current: R, fields: Fields) -> R:
        """One conditional write of a plan; a job's terminal write makes its webhook-index row due first
        (``webhooks.job_ending``: before, so a crash after the write leaves nothing for a daily scan to heal)."""
        if isinstance(current, Job) and isinstance(fields.get("status"), Status):
            webhooks.job_ending(current, fields["status"], fields.get("finished_at"), webhooks.mark_due_of(self.stores))
        return kind.write(self.stores, current, fields)

    def _record(self, before: Job | Chunk, after: Job | Chunk, name: str) -> None:
        if isinstance(after, Chunk):
            if after.status != before.status:
                telemetry.event(
                    "chunk.transition", job_id=after.job_id, tenant=after.tenant, stage=after.stage,
                    chunk=after.index, status=after.status.value, attempt=after.attempts,
                )
            return
        if after.status != before.status or name in ("claim", "resume"):
            telemetry.record_transition(after)
            if after.status.terminal:
                # Its completion webhook, after the terminal write landed, through the stores' queue port.
                webhooks.job_ended(after, self.stores.messages.send)
                # Its tenant's fairness slot, to the tenant's oldest parked job (best effort; the reaper repairs).
                fairness.job_ended(self.stores, after, self.send)

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

    def _send_next(self, row: Job | Chunk, delay: timedelta | None = None, traceparent: str | None = None) -> None:
        """The message a write just made valid: a job's next attempt, or a queued chunk's delivery."""
        if isinstance(row, Chunk):
            self.send(ChunkMessage(row.tenant, row.job_id, row.stage, row.index, row.attempts + 1, traceparent), delay)
        else:
            self._enqueue(row, JobMessage(row.tenant, row.id, row.attempts + 1, row.traceparent), delay)

    # == submission ==============================================================================
    def submit(self, job: Job, idempotency_key: str | None) -> Applied[Job]:
        """Insert the job and send its first message. ``applied`` is whether this call created it.

        The insert's outcome is decided by reading, never by the answer: a committed
        insert whose answer was lost, or that the SDK retried into a 409, is ours and is
        answered as created, with its message sent. A replay (the key was used before
        with the same body) of a job that is still queued with no attempt sends its
        message again, since the first may never have gone.
        """
        for _ in range(3):
            try:
                stored = self.stores.jobs.create(job, idempotency_key)
                return Applied(self._accepted(stored, carry_row=True), True)
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
                return Applied(self._accepted(existing), True)
            if existing.status == Status.QUEUED and existing.attempts == 0:
                self._enqueue(existing, JobMessage(existing.tenant, existing.id, 1, existing.traceparent))
            return Applied(existing, False)
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
        try:
            self.index_job(job.tenant, job.id, unsent_for=job.available_at)
        except ThematiqError:
            log.error("job %s: its index row could not be written; if its message is lost too, the daily "
                      "sweep re-sends it", job.id)

    def index_job(self, tenant: str, job_id: str, unsent_for: datetime | None = None) -> None:
        """Write a job's active-index row, for a job whose message may not exist (an idempotent upsert).

        ``unsent_for``: the due time whose message is known not to have gone. Raises what the write raised.
        """
        self.stores.jobs.index_job(tenant, job_id, unsent_for)

    def idle_tenant(self, mark: TenantMark) -> Applied[TenantMark]:
        """Take a tenant off the busy tenants, given its busy row as read before its index was found to name no
        unfinished job (platform45), once its mark is ``BUSY_STALE_SECONDS`` old (a process skips marking again for
        ``BUSY_MARK_CACHE_SECONDS`` after its own mark, so a write its mark covers is older than the reaper's look).

        The removal is a delete conditional on that row's ETag, so it cannot race a write that adds an index row:
        such a write upserts the busy row after it (``JobStore._marking``), which either changes the ETag first
        (a 412 here) or writes the row again after it is gone. After a 412, or a delete whose answer was lost, the
        row is read again: gone is this transition landed (or another reaper's, which is the same); a row written
        since is planned again, and its index is looked at again (one query) after that read, so the order
        read, look, delete holds on every round.
        """
        first = mark.etag

        def plan(row: TenantMark) -> Fields | None:
            if row.gone or (row.marked_at is not None
                            and (utcnow() - row.marked_at).total_seconds() < BUSY_STALE_SECONDS):
                return None  # marked lately: a process may still be writing index rows under that mark
            if row.etag != first and self.stores.jobs.has_active(row.tenant):
                return None  # marked again since: a job has an index row, or had one a moment ago
            return {"gone": True}

        return conditional.apply(
            mark, read=lambda: self.stores.jobs.busy_mark(mark.tenant),
            write=lambda row, _fields: self.stores.jobs.unmark_busy(row), plan=plan,
            name=f"tenant {mark.tenant} idle", landed=lambda row: row.gone,
        )

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

    # == leased rows: claim, renew, release, finish, reap (jobs and chunks) ======================
    def claim(self, row: R, attempt: int) -> Applied[R]:
        """``queued`` (or ``retrying``) → ``running`` for ``attempt``; not applied if someone else has it.

        For a job whose attempt's result is already stored, the claim finishes the job from it instead
        (:func:`shared.core.leased.finish_from_stored`): applied, and the row is ``succeeded``. A job claim
        whose outcome cannot be learnt raises :class:`ClaimUnresolved`.
        """
        kind: RowKind[R] = kind_of(row)
        owner = new_owner()
        found = self._found_after_reap(row, attempt) if isinstance(row, Job) else None

        def plan(current: R) -> Fields | None:
            now = utcnow()
            if isinstance(current, Job):
                stored = finish_from_stored(current, attempt, found, now)
                if stored is not None:
                    return stored
            return kind.claim(current, attempt, owner, now)

        try:
            return self._apply(row, "claim", plan, lambda current: current.owner == owner, with_input=True)
        except StorageUnavailable as err:  # Contended too: it is one
            if not isinstance(row, Job):
                raise  # a chunk claim in doubt goes stale and the reaper takes it
            # The claim may have landed and nobody can tell now: whoever handles this must give it back by
            # owner (a release conditional on our owner is right whether or not the claim landed).
            raise ClaimUnresolved(row.with_changes(status=Status.RUNNING, attempts=attempt, owner=owner)) from err

    def _found_after_reap(self, job: Job, attempt: int) -> StoredResult | None:
        """The result blob of the attempt the reaper handed on (a slow upload), if there is one.

        One blob listing, only for a job retried after a lost worker, never on the first attempt's path.
        """
        error = job.error
        if job.status != Status.RETRYING or error is None or error.type != "WorkerLost" or job.attempts < 1:
            return None
        if job.attempts != attempt - 1:
            return None
        name = result_blob_name(job.tenant, job.id, job.attempts)
        size = self.stores.blobs.size(name)
        return None if size is None else StoredResult(name, size)

    def resume(self, job: Job, attempt: int) -> Applied[Job]:
        """``waiting`` (fanned in) → ``running``: the same attempt continues after its map stage.

        If that attempt already stored its result (and gave its claim back), the job is finished from it.
        """
        owner = new_owner()

        def plan(row: Job) -> Fields | None:
            stored = finish_from_stored(row, attempt, None, utcnow())
            if stored is not None:
                return stored
            if row.status != Status.WAITING or row.attempts != attempt or row.fan_in_at is None:
                return None
            return {"status": Status.RUNNING, "owner": owner, "heartbeat_at": utcnow(), "fan_in_at": None}

        return self._apply(job, "resume", plan, lambda row: row.owner == owner, with_input=True)

    def renew(self, row: R, progress: Progress | None) -> Applied[R]:
        """Renew a running row's heartbeat (and progress). Not applied once it no longer runs under this claim.

        The returned job row shows a cancel request.
        """
        kind: RowKind[R] = kind_of(row)

        def plan(current: R) -> Fields | None:
            return kind.renew(current, progress, utcnow()) if kind.holds(current, row) else None

        return self._apply(row, "renew", plan)

    def release(self, row: R, before: R, stored: StoredResult | None = None) -> Applied[R]:
        """Give back a claim (the worker itself failed, or no memory), so the next delivery can take it.

        ``before`` is the row as it was when this delivery claimed it: its status and attempts come back.
        If the attempt had already stored its result (``stored``, jobs only), the row keeps a pointer to it
        and the next claim finishes the job from it instead of running the pipeline again.
        """
        kind: RowKind[R] = kind_of(row)

        def plan(current: R) -> Fields | None:
            return kind.release(current, before, stored) if kind.holds(current, row) else None

        return self._apply(row, "release", plan)

    def finish(self, row: R, ending: Ending, traceparent: str | None = None) -> Applied[R]:
        """Record how a running attempt ended (:class:`Ending`), if the row still runs under this claim.

        So a presumed-dead worker's outcome never overwrites a newer attempt's state. A retry is followed
        by the next attempt's message, delayed by ``ending.retry_in``; a cancel request that arrived
        meanwhile turns a job's retry into ``cancelled``. ``traceparent``: a chunk's retry message's trace.
        """
        kind: RowKind[R] = kind_of(row)

        def plan(current: R) -> Fields | None:
            return kind.finish(current, ending, utcnow()) if kind.holds(current, row) else None

        applied = self._apply(row, f"finish:{ending.status.value}", plan)
        if not applied.applied:
            log.warning("%s: changed under us (%s); outcome %s discarded",
                        kind.label(row), applied.row.status, ending.status)
        elif kind.retried(applied.row):
            self._send_next(applied.row, ending.retry_in, traceparent)
        return applied

    def reap(self, row: R) -> Applied[R]:
        """A running row whose heartbeat went stale: its worker is presumed dead.

        Applies only to the very claim and heartbeat the scan saw. A job whose attempt stored its result is
        finished from it; otherwise it is cancelled (on request), failed (no attempts left) or retried. A
        chunk is failed (no attempts left) or queued again. A retry's message is sent after the write.
        """
        kind: RowKind[R] = kind_of(row)
        found: StoredResult | None = None
        if isinstance(row, Job):
            name = result_blob_name(row.tenant, row.id, row.attempts)
            size = self.stores.blobs.size(name)
            found = None if size is None else StoredResult(name, size)
        now = utcnow()

        def plan(current: R) -> Fields | None:
            if not kind.holds(current, row) or current.heartbeat_at != row.heartbeat_at:
                return None  # it moved on, or its worker is alive
            return kind.reap(current, found, now)

        applied = self._apply(row, "reap", plan)
        if applied.applied and kind.retried(applied.row):
            self._send_next(applied.row)
        return applied

    def requeue_lost(self, row: R) -> Applied[R]:
        """A queued (or retrying) row long past due whose message is gone: send it again."""
        kind: RowKind[R] = kind_of(row)
        applied = self._apply(row, "requeue", lambda current: kind.requeue(current, row, utcnow()))
        if applied.applied:  # a job is marked unsent for the moved-on due time, if this send fails too
            self._send_next(applied.row)
        return applied

    def refuse(self, job: Job, attempt: int, error: JobError) -> Applied[Job]:
        """``queued`` (or ``retrying``) → ``failed`` for the delivery of ``attempt``, without a claim: the job can
        never run (its stored input does not decode), and one write ends it, with no claim to release or reap.

        Not applied if someone claimed, cancelled or finished it first, or a cancel was requested.
        """
        def plan(row: Job) -> Fields | None:
            if not row.status.claimable or row.attempts != attempt - 1 or row.cancel_requested:
                return None
            return {"status": Status.FAILED, "owner": None, "finished_at": utcnow(), "error": error}

        return self._apply(job, "finish:failed", plan)

    def cancel(self, row: R) -> Applied[R]:
        """Cancel a job at once if nobody runs it (queued, retrying, waiting), flag it if it runs; skip a chunk.

        A chunk is skipped (``cancelled``) while pending or queued: its parent ended or was cancelled.
        Raises :class:`Conflict` if a job already finished otherwise.
        """
        if isinstance(row, Chunk):
            def skip(current: Chunk) -> Fields | None:
                if current.status not in (ChunkStatus.PENDING, ChunkStatus.QUEUED):
                    return None
                return {"status": ChunkStatus.CANCELLED, "owner": None, "finished_at": utcnow()}

            return self._apply(row, "cancel", skip)

        def plan(current: Job) -> Fields | None:
            if current.status.terminal:
                return None
            if current.status.claimable or current.status == Status.WAITING:
                return {"status": Status.CANCELLED, "cancel_requested": True, "finished_at": utcnow(), "owner": None}
            return None if current.cancel_requested else {"cancel_requested": True}

        applied = self._apply(row, "cancel", plan, tries=CANCEL_CONDITIONAL_TRIES)
        if applied.row.status.terminal and applied.row.status != Status.CANCELLED:
            raise Conflict(f"the job already finished ({applied.row.status})", field="status")
        return applied

    # == the job row beyond its lease ============================================================
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

        return self._apply(job, f"callback:{status.value}", plan, with_input=True).applied

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
        return self._apply(job, "themes-edit", plan, with_input=True)

    def postpone(self, row: R, delay: timedelta) -> Applied[R]:
        """A queued (or retrying) job or chunk whose delivery was deferred (no memory on this host): due again later.

        Best effort (not applied if the write failed): if the row moved on, the deferred message is a no-op.
        """
        kind: RowKind[R] = kind_of(row)
        due = utcnow() + delay
        try:
            return self._apply(row, "postpone", lambda current: kind.postpone(current, row, due))
        except ThematiqError:
            log.warning("%s: could not move its due time on after a deferral", kind.label(row))
            return Applied(row, False)

    def resend_resume(self, job: Job) -> Applied[Job]:
        """A waiting job that fanned in long ago but never resumed: its resume message was lost."""
        def plan(row: Job) -> Fields | None:
            if row.status != Status.WAITING or row.fan_in_at is None or row.fan_in_at != job.fan_in_at:
                return None
            return {"fan_in_at": utcnow()}

        applied = self._apply(job, "resume-resend", plan)
        if applied.applied:
            self.send(JobMessage(job.tenant, job.id, job.attempts, job.traceparent, resume=True))
        return applied

    def expire(self, job: Job, prefix: str, cutoff: datetime, *, moving: bool = False) -> bool:
        """Retention: a job finished before ``cutoff`` loses its chunks, then its row, then its blobs.

        The row goes before the blobs, so no reader finds a job whose input or result is gone (a GET of a job
        whose row is gone is a 404). Its delete is conditional on the row as scanned: a write that landed since
        (a themes edit, a late webhook record) makes it a 412, and the fresh row is deleted in turn while it is
        still finished before ``cutoff``; a delete whose answer was lost is decided by re-reading (a row gone is
        deleted, whoever deleted it). Until review44p the blobs went first and such a 412 left the row without
        them until the next sweep. A crash between the row and the blobs leaves blobs with no row: the
        reaper's retention names the jobs it is about to expire in a journal blob first, and a later sweep deletes
        the blobs of a journal's jobs that have no row (``Reaper._orphaned_inputs``). False when the fresh row is no longer expired (nothing else deleted).
        """
        def expired(row: Job) -> bool:
            return row.status.terminal and row.finished_at is not None and row.finished_at < cutoff

        self.stores.chunks.delete_job_chunks(job.tenant, job.id)
        row = job
        for _ in range(CONDITIONAL_TRIES):
            try:
                self.stores.jobs.delete(row)
                break
            except EtagMismatch:
                pass  # written since the scan: the fresh row decides
            except StorageUnavailable as err:
                if not err.maybe_applied:
                    raise
            try:
                row = conditional.reread(lambda: self.stores.jobs.get(job.tenant, job.id))
            except NotFound:
                break  # gone: this delete landed, or another one did
            if not expired(row):
                return False
        else:
            raise Contended(f"expire {job.id}: the row kept changing under {CONDITIONAL_TRIES} attempts")
        if moving:
            # The chunk rows of the layout before are still being moved (``ChunkStore.move_legacy``): a second sweep's
            # move may have copied a row into the job's partition since the look above. It reads the job's row after
            # its copies and deletes them if the row is gone; a copy made before this delete is deleted here.
            self.stores.chunks.delete_job_partition(job.tenant, job.id)
        # A dated input (platform45) is outside the job's folder: in the same batch, as the folder's blobs are.
        self.stores.blobs.delete_prefix(prefix, also=[row.input_blob or "", job.input_blob or ""])
        return True

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

    def suspend(
        self, job: Job, stage: str, *, usage: dict[str, float] | None = None, progress: Progress | None = None
    ) -> Applied[Job]:
        """``running`` → ``waiting`` for ``stage``; then refill or fan in, since chunks may have finished already.

        A cancel request that arrived meanwhile turns the suspension into ``cancelled``.
        """
        accounted = Ending(Status.CANCELLED, usage=usage, progress=progress).accounted()

        def landed(row: Job) -> bool:
            return row.status == Status.WAITING and row.wait_stage == stage and row.attempts == job.attempts

        def plan(row: Job) -> Fields | None:
            if row.status != Status.RUNNING or row.owner != job.owner:
                return None
            if row.cancel_requested:
                return {"status": Status.CANCELLED, "owner": None, "finished_at": utcnow(), **accounted}
            return {"status": Status.WAITING, "owner": None, "wait_stage": stage, "fan_in_at": None, **accounted}

        applied = self._apply(job, "suspend", plan, landed)
        if applied.applied and applied.row.status == Status.WAITING:
            # Write, then look: chunks that finished before we were waiting are seen here.
            try:
                self.refill_or_fan_in(job.tenant, job.id, stage, job.traceparent)
            except ThematiqError:
                log.warning("job %s: could not look at stage %s now; the reaper will", job.id, stage)
        return applied

    def _queue_pending(self, chunks: list[Chunk], window: int, traceparent: str | None = None) -> int:
        """Queue pending chunks (``pending`` → ``queued``, message sent) until the job's window is full again."""
        in_flight = sum(1 for c in chunks if c.status in (ChunkStatus.QUEUED, ChunkStatus.RUNNING))
        sent = 0
        for chunk in sorted((c for c in chunks if c.status == ChunkStatus.PENDING), key=lambda c: c.index):
            if in_flight + sent >= window:
                break
            applied = self._apply(
                chunk, "dispatch",
                lambda row: {"status": ChunkStatus.QUEUED, "queued_at": utcnow()}
                if row.status == ChunkStatus.PENDING else None,
            )
            if applied.applied:
                self._send_next(applied.row, traceparent=traceparent)
                sent += 1
        return sent

    def refill_or_fan_in(
        self, tenant: str, job_id: str, stage: str, traceparent: str | None = None, listed: list[Chunk] | None = None,
        *, refill: bool = True,
    ) -> StageCheck:
        """After a chunk (or the parent) changed state: refill the window, or fan in if the stage is done.

        ``listed``: the stage as the caller listed it moments ago (the reaper, in the same run), instead of listing
        it again. Every write below is conditional on the row it changes, so a listing a little older decides as a
        fresh one racing the same writers would: a dispatch or fan-in that no longer applies is not written.
        ``refill=False``: the caller knows the job has ended (a chunk that stopped because its job was cancelled), so
        no pending chunk is queued; the fan-in check still runs (it finds the job no longer waiting).
        """
        chunks = self.stores.chunks.list_stage(tenant, job_id, stage) if listed is None else listed
        if not all(c.status.terminal for c in chunks):
            if refill:
                self._queue_pending(chunks, get_settings().max_chunks_in_flight_per_job, traceparent)
            return StageCheck.NOT_DONE
        return self._fan_in(tenant, job_id, stage, chunks)

    def _fan_in(self, tenant: str, job_id: str, stage: str, chunks: list[Chunk]) -> StageCheck:
        """Exactly one of the parties that see the stage complete wins the conditional write and sends the resume."""
        job = self.stores.jobs.get(tenant, job_id)
        total = sum(c.items for c in chunks)
        failed = [c for c in chunks if c.status != ChunkStatus.SUCCEEDED]
        failed_items = sum(c.items for c in failed)
        budget = chunks[0].budget if chunks else 0.0
        stamp = utcnow()
        why = {"check": StageCheck.NOT_WAITING}

        def plan(row: Job) -> Fields | None:
            if row.status != Status.WAITING or row.wait_stage != stage:
                why["check"] = StageCheck.NOT_WAITING
                return None
            if row.fan_in_at is not None:
                why["check"] = StageCheck.ALREADY_FIRED
                return None
            if row.cancel_requested:
                why["check"] = StageCheck.CANCELLED
                return {"status": Status.CANCELLED, "finished_at": utcnow(), "owner": None}
            if failed_items and failed_items > budget * total:
                worst = failed[0]
                reason = (
                    f"map stage {stage!r}: {len(failed)} of {len(chunks)} chunks failed ({failed_items} of {total} "
                    f"items, over the error budget of {budget:.1%}); chunk {worst.index}: "
                    f"{worst.error_type}: {worst.error_message}"
                )
                why["check"] = StageCheck.FAILED
                return {"status": Status.FAILED, "finished_at": utcnow(), "owner": None,
                        "error": JobError.of("ChunkFailed", reason)}
            why["check"] = StageCheck.FIRED
            return {"fan_in_at": stamp, "fan_ins": row.fan_ins + 1}

        applied = self._apply(job, "fan-in", plan, lambda row: row.fan_in_at == stamp)
        if not applied.applied:
            return why["check"]
        row = applied.row
        if row.status == Status.WAITING:
            self.send(JobMessage(row.tenant, row.id, row.attempts, row.traceparent, resume=True))
            telemetry.event("fan_in.fired", job_id=job_id, tenant=tenant, stage=stage, chunks=len(chunks))
            return StageCheck.FIRED
        return StageCheck(row.status.value)


__all__ = [
    "Applied", "ClaimUnresolved", "Ending", "Lifecycle", "StageCheck", "StoredResult", "ThematiqError",
    "new_owner", "result_blob_name", "stage_progress",
]
