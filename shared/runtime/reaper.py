"""The reaper: recover jobs whose worker vanished or whose message was lost, and apply retention.

Runs on a timer (``REAPER_SCHEDULE``). Every change it makes is a lifecycle
transition, conditional on the row it read, so two reapers running at once (two
instances, or a timer that fired twice) cannot both re-enqueue the same attempt.

Each phase and each row is isolated: a row that cannot be read or recovered is
logged and counted, and the run goes on for every other tenant and phase.

Where the rows come from. Every run reads the **active-jobs index**
(``JobRepo.active``): the busy tenants (rows of the tenants partition), then per busy
tenant its index range and its unfinished rows, so an idle run costs 1 query plus one per
tenant with work in flight (not per tenant that ever submitted: a tenant whose index is
empty is taken off the busy tenants, ``Lifecycle.idle_tenant``) and never touches a
finished row or another partition; chunks are read only for the jobs that wait on
them. A job that was never claimed is indexed only if its send failed, if its message
was redelivered, or if the sweep left it for later (otherwise its message is its
record: ``Job.in_queue_only``). The **full sweep** (the cross-partition
scans by status, and retention) runs once every ``REAPER_SWEEP_SECONDS``, on whichever
instance's run finds it due (the last sweep's time is a row of the tenants partition,
read with the tenants): it applies retention, finds what the index cannot name (a
never-claimed job whose message is lost, rows written before the index existed) and
gives the claimed ones their index entry. Both feed the same phases, so both decide alike.

The lost-message pass does not trust age alone. A job that waits behind a deep
backlog is not lost: its message is still in the queue. So a queued job is
re-enqueued only if the oldest visible message of the queue is younger than the
job's due time (its message cannot be behind it), and at most
``REAPER_MAX_REQUEUES_PER_RUN`` per run.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from shared.config.constants import (
    ORPHAN_INPUT_AGE_SECONDS,
    QUEUE_TIME_GRANULARITY,
    REAPER_MAX_REQUEUES_PER_RUN,
    REAPER_SWEEP_SECONDS,
    RETENTION_JOURNAL_JOBS,
)
from shared.config.settings import get_settings
from shared.core import fairness
from shared.core.chunks import Chunk, ChunkStatus
from shared.core.errors import ThematiqError
from shared.core.jobs import Job, Status, utcnow
from shared.core.lifecycle import Lifecycle
from shared.core.names import (
    INPUTS_ROOT,
    RETENTION_JOURNALS,
    dated_input_owner,
    input_blob_name,
    inputs_of_day,
    job_prefix,
)
from shared.core.ports import IndexState, Stores
from shared.observability import telemetry

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class ReapReport:
    requeued_stale: list[str] = field(default_factory=list)
    fairness: fairness.RepairReport = field(default_factory=fairness.RepairReport)
    failed_stale: list[str] = field(default_factory=list)
    cancelled_stale: list[str] = field(default_factory=list)
    recovered_results: list[str] = field(default_factory=list)
    requeued_lost: list[str] = field(default_factory=list)
    backlog_skipped: int = 0
    deleted: list[str] = field(default_factory=list)
    #: Jobs whose input blob was deleted because the job row never existed (or is gone).
    orphans_deleted: list[str] = field(default_factory=list)
    chunks_requeued: list[str] = field(default_factory=list)
    chunks_failed: list[str] = field(default_factory=list)
    resumes_resent: list[str] = field(default_factory=list)
    #: Chunk rows of the layout before moved to their jobs' partitions (``Reaper._move_chunk_rows``).
    chunk_rows_moved: int = 0
    waiting_settled: list[str] = field(default_factory=list)
    #: Busy tenants whose index named no unfinished job, taken off (``Lifecycle.idle_tenant``), and tenants with
    #: unfinished jobs named busy again (platform45).
    tenants_idled: list[str] = field(default_factory=list)
    tenants_marked: list[str] = field(default_factory=list)
    conflicts: int = 0
    errors: int = 0
    #: Whether this run was the full sweep (daily) rather than an index run.
    swept: bool = False

    def summary(self) -> str:
        return (
            f"requeued {len(self.requeued_stale)} stale, failed {len(self.failed_stale)}, "
            f"cancelled {len(self.cancelled_stale)}, finished {len(self.recovered_results)} from stored results, "
            f"re-enqueued {len(self.requeued_lost)} lost ({self.backlog_skipped} behind a backlog), "
            f"deleted {len(self.deleted)} (and {len(self.orphans_deleted)} orphaned inputs), chunks requeued {len(self.chunks_requeued)}, "
            f"chunks failed {len(self.chunks_failed)}, resumes re-sent {len(self.resumes_resent)}, "
            f"{self.conflicts} conflicts, {self.errors} errors" + (" (full sweep)" if self.swept else "")
            + (f", {self.chunk_rows_moved} chunk rows moved to job partitions" if self.chunk_rows_moved else "")
        )


@dataclass(frozen=True)
class _Candidates:
    """The rows one run looks at, from the index or from the sweep; the phases do not care which."""

    stale: list[Job]
    lost: list[Job]
    waiting: list[Job]
    stale_chunks: list[Chunk]
    lost_chunks: list[Chunk]
    #: A waiting job's stage as the index run listed it (job id → its chunks), so settling the stage lists it no
    #: more; the sweep finds chunks by its scans and leaves this empty.
    stages: dict[str, list[Chunk]] = field(default_factory=dict)


class Reaper:
    def __init__(self, stores: Stores, *, sweep: bool | None = None) -> None:
        """``sweep`` forces (True) or skips (False) the full sweep; by default it is due once a day."""
        self.stores = stores
        self.lifecycle = Lifecycle(self.stores)
        self.settings = get_settings()
        self.sweep = sweep

    def run(self) -> ReapReport:
        report = ReapReport()
        try:
            state = self.stores.jobs.index_state()
            sweeping = self._sweep_due(state) if self.sweep is None else self.sweep
            errors_before = report.errors
            report.swept = sweeping
            found = self._swept(state, report) if sweeping else self._indexed(state, report)
        except Exception:
            # Storage away while listing: count it, still report the queue metrics; the next run tries again.
            report.errors += 1
            log.exception("reaper: could not list the rows to look at")
            self._queue_metrics()
            return report
        phases: list[Callable[[], None]] = [
            lambda: self._stale_running(report, found.stale),
            lambda: self._lost_messages(report, found.lost, index_skipped=sweeping),
            lambda: self._stale_chunks(report, found.stale_chunks, found.lost_chunks),
            lambda: self._waiting(report, found.waiting, found.stages),
        ]
        names = ["stale", "lost", "chunks", "waiting"]
        # Parked jobs a lost release left waiting (shared.core.fairness): one query when none are parked.
        phases.append(lambda: fairness.repair(self.stores, report.fairness))
        names.append("fairness")
        if sweeping:
            phases.append(lambda: self._orphaned_inputs(report, state))
            names.append("orphaned inputs")
        if sweeping and self.settings.retention_days > 0:
            moving = state.chunks_moved_at is None and self.settings.chunk_rows == "job"
            phases.append(lambda: self._retention(report, moving=moving))
            names.append("retention")
        if sweeping and state.chunks_moved_at is None and self.settings.chunk_rows == "job":
            phases.append(lambda: self._move_chunk_rows(report, state))
            names.append("chunk rows")
        elif sweeping and state.chunks_moved_at is not None and self.settings.chunk_rows == "tenant":
            # CHUNK_ROWS=tenant again after the move was recorded (a deploy beside code that reads only the layout
            # before): the stages it writes are rows to move once it is unset, so the sweeps look again then.
            # Before review44j they stayed in the tenant's partition until retention, read by every listing.
            phases.append(lambda: self.stores.jobs.mark_chunks_moved(None))
            names.append("chunk rows")
        for name, phase in zip(names, phases, strict=True):
            try:
                phase()
            except Exception:
                # A phase that cannot even list its rows (storage away) must not stop the others.
                report.errors += 1
                log.exception("reaper: phase %s failed", name)
        if sweeping and report.errors == errors_before:
            try:
                self.stores.jobs.mark_swept(utcnow())
            except ThematiqError:
                log.warning("reaper: could not record the sweep; the next run sweeps again")
        self._queue_metrics()
        return report

    def _sweep_due(self, state: IndexState) -> bool:
        return state.swept_at is None or (utcnow() - state.swept_at).total_seconds() >= REAPER_SWEEP_SECONDS

    def _active(self, state: IndexState, report: ReapReport, also: Iterable[str] = ()) -> list[Job]:
        """The unfinished jobs of the busy tenants (and of ``also``: the sweep adds the tenants of what its scan
        found), through the index; then the busy tenants are brought in line with what it named (platform45).

        A busy tenant whose index named no unfinished job is taken off (``Lifecycle.idle_tenant``, conditional on
        the row read before the index was), so the next index runs do not query it; a tenant with unfinished
        jobs and no busy row (one whose mark failed, or every tenant before the busy tenants were first recorded)
        is named busy. The first run that can list every tenant's index records the busy tenants as complete.
        """
        errors = report.errors
        idle: list[str] = []

        def failed(tenant: str, err: Exception) -> None:
            report.errors += 1  # that tenant waits for the next run; the others go on

        tenants = list(dict.fromkeys([*state.tenants, *also]))
        jobs = list(self.stores.jobs.active(tenants, failed, idle.append))
        for tenant in idle:
            mark = state.marks.get(tenant)
            if mark is None:
                continue
            try:
                if self.lifecycle.idle_tenant(mark).applied:
                    report.tenants_idled.append(tenant)
            except ThematiqError as err:
                # It stays busy: the next run looks at its index again.
                log.warning("reaper: could not take tenant %s off the busy tenants (%s)", tenant, type(err).__name__)
        for tenant in sorted({j.tenant for j in jobs} - set(state.marks)):
            try:
                self.stores.jobs.mark_busy(tenant)
                report.tenants_marked.append(tenant)
            except ThematiqError as err:
                report.errors += 1
                log.warning("reaper: could not name tenant %s busy (%s)", tenant, type(err).__name__)
        if not state.busy_seeded and report.errors == errors:
            try:
                self.stores.jobs.mark_busy_seeded(utcnow())
            except ThematiqError:
                log.warning("reaper: could not record the busy tenants; the next run lists every tenant again")
        return jobs

    def _cutoffs(self) -> tuple[datetime, datetime]:
        return utcnow_minus(self.settings.heartbeat_stale_seconds), utcnow_minus(self.settings.queued_stale_seconds)

    def _due(
        self, unfinished: list[Job], stale_chunks: list[Chunk], lost_chunks: list[Chunk],
        stages: dict[str, list[Chunk]] | None = None,
    ) -> _Candidates:
        """The unfinished jobs the phases act on, picked by the same rules whichever way they were found."""
        stale_at, lost_at = self._cutoffs()
        now = utcnow()
        return _Candidates(
            stale=[j for j in unfinished if j.status == Status.RUNNING and j.heartbeat_at is not None
                   and j.heartbeat_at < stale_at],
            # Lost: due long ago with no claim, or due now and its send is known to have failed (``_unsent``).
            lost=[j for j in unfinished if j.status in (Status.QUEUED, Status.RETRYING)
                  and (j.available_at < lost_at or (_unsent(j) and j.available_at <= now))],
            waiting=[j for j in unfinished if j.status == Status.WAITING],
            stale_chunks=stale_chunks,
            lost_chunks=lost_chunks,
            stages=stages or {},
        )

    def _indexed(self, state: IndexState, report: ReapReport) -> _Candidates:
        stale_at, lost_at = self._cutoffs()
        active = self._active(state, report)
        stale_chunks: list[Chunk] = []
        lost_chunks: list[Chunk] = []
        stages: dict[str, list[Chunk]] = {}
        for job in active:
            if job.status != Status.WAITING or not job.wait_stage:
                continue
            try:
                # Only a waiting job has chunks in flight: one range query of its stage.
                chunks = stages[job.id] = self.stores.chunks.list_stage(job.tenant, job.id, job.wait_stage)
            except (ThematiqError, KeyError, TypeError, ValueError) as err:
                # Storage away, or a row of that stage that cannot be read: the other jobs go on.
                report.errors += 1
                log.warning("reaper: could not list the chunks of %s (%s)", job.id, type(err).__name__)
                continue
            for chunk in chunks:
                if chunk.status == ChunkStatus.RUNNING and chunk.heartbeat_at is not None \
                        and chunk.heartbeat_at < stale_at:
                    stale_chunks.append(chunk)
                elif chunk.status == ChunkStatus.QUEUED and chunk.queued_at is not None and chunk.queued_at < lost_at:
                    lost_chunks.append(chunk)
        return self._due(active, stale_chunks, lost_chunks, stages)

    def _swept(self, state: IndexState, report: ReapReport) -> _Candidates:
        stale_at, lost_at = self._cutoffs()
        jobs, chunks = self.stores.jobs, self.stores.chunks
        # One cross-partition scan of every unfinished job: the phases pick from it in memory, as from the index.
        unfinished = list(jobs.scan("status eq 'queued' or status eq 'running' or status eq 'retrying' or "
                                    "status eq 'waiting'", {}))
        # Heal the index: an unfinished job it does not name (written before it existed) gets its row, so its
        # next recovery does not wait for the next sweep. Not a job that never left the queue: its message is
        # its record, and if that is lost this sweep's lost-message pass re-sends it.
        indexed = {j.id: j for j in self._active(state, report, also=sorted({j.tenant for j in unfinished}))}
        healed = jobs.reindex(j for j in unfinished if j.id not in indexed and not j.in_queue_only)
        if healed:
            log.warning("reaper: %d unfinished jobs had no active-index row; indexed them", healed)
        # The index rows' unsent marks go with the scanned rows, so the sweep decides as an index run would.
        unfinished = [j.with_changes(unsent_for=indexed[j.id].unsent_for) if j.id in indexed else j
                      for j in unfinished]
        return self._due(
            unfinished,
            chunks.scan("status eq 'running' and heartbeat_at lt @cutoff", {"cutoff": stale_at}),
            chunks.scan("status eq 'queued' and queued_at lt @cutoff", {"cutoff": lost_at}),
        )

    def _each(self, rows: Iterable[T], what: str, report: ReapReport, fn: Callable[[T], None]) -> None:
        for row in rows:
            try:
                fn(row)
            except ThematiqError as err:
                report.errors += 1
                log.warning("reaper: could not %s (%s)", what, type(err).__name__)

    def _stale_running(self, report: ReapReport, stale: list[Job]) -> None:
        def recover(job: Job) -> None:
            reaped = self.lifecycle.reap(job)
            if not reaped.applied:
                report.conflicts += 1  # the worker woke up, or another reaper got there first
                return
            outcome = reaped.row.status
            {
                Status.RETRYING: report.requeued_stale, Status.FAILED: report.failed_stale,
                Status.CANCELLED: report.cancelled_stale, Status.SUCCEEDED: report.recovered_results,
            }[outcome].append(job.id)
            # The owner (host:pid:token) is said here, for the operator; the job's error does not name it.
            if outcome == Status.RETRYING:
                log.warning("reaper: job %s re-enqueued for attempt %d (stale heartbeat of worker %s)", job.id,
                            job.attempts + 1, job.owner)
            else:
                log.warning("reaper: job %s %s (stale heartbeat of worker %s on attempt %d)", job.id, outcome,
                            job.owner, job.attempts)

        self._each(stale, "recover a stale job", report, recover)

    def _lost_messages(self, report: ReapReport, candidates: list[Job], *, index_skipped: bool = False) -> None:
        # A queued or retrying job that should have started long ago: its message was lost
        # (a crash between the row commit and the send, or a send that never went).
        #
        # ``index_skipped`` (the sweep): a never-claimed job the sweep found lost but leaves for later (past
        # this run's budget) is indexed, so the next 5-minute run looks at it again rather than the next day's
        # sweep. Not one held back by the backlog rule: its message is most likely still in the queue, and
        # indexing a whole stale backlog would cost a write each and a read in every index run.
        if index_skipped:
            candidates = fairness.not_parked(self.stores, candidates)  # a parked job has no message on purpose
        if not candidates:
            return
        oldest = self.stores.messages.oldest_visible()
        budget = max_requeues_per_run()

        def requeue(job: Job) -> None:
            nonlocal budget
            if not _unsent(job) and _behind(oldest, job.available_at):
                # Messages older than the job's due time are still waiting: its own may be among them.
                report.backlog_skipped += 1
                return
            if budget <= 0:
                if index_skipped and job.in_queue_only:
                    self._index_for_next_run(job)
                return
            if self.lifecycle.requeue_lost(job).applied:
                budget -= 1
                report.requeued_lost.append(job.id)
                log.warning("reaper: job %s had no live message; re-enqueued", job.id)
            else:
                report.conflicts += 1

        self._each(candidates, "re-enqueue a lost job", report, requeue)

    def _index_for_next_run(self, job: Job) -> None:
        """Best effort: if the write fails, the next sweep finds the job again."""
        try:
            self.lifecycle.index_job(job.tenant, job.id)
        except ThematiqError:
            log.error("job %s: its index row could not be written; if its message is lost too, the daily "
                      "sweep re-sends it", job.id)

    def _stale_chunks(self, report: ReapReport, stale: list[Chunk], candidates: list[Chunk]) -> None:
        """Chunks whose worker vanished (stale heartbeat) or whose message was lost; same rules as jobs."""

        def recover(chunk: Chunk) -> None:
            label = f"{chunk.job_id}/{chunk.stage}/{chunk.index}"
            reaped = self.lifecycle.reap(chunk)
            if not reaped.applied:
                report.conflicts += 1
            elif reaped.row.status == ChunkStatus.QUEUED:
                report.chunks_requeued.append(label)
            else:
                report.chunks_failed.append(label)
                self.lifecycle.refill_or_fan_in(chunk.tenant, chunk.job_id, chunk.stage)

        self._each(stale, "recover a stale chunk", report, recover)
        if not candidates:
            return
        # The same backlog rule and cap as for jobs: a chunk behind a deep chunks queue is not lost.
        oldest = self.stores.messages.oldest_visible(self.settings.chunks_queue)
        budget = max_requeues_per_run()

        def resend(chunk: Chunk) -> None:
            nonlocal budget
            if chunk.queued_at is not None and _behind(oldest, chunk.queued_at):
                report.backlog_skipped += 1
                return
            if budget <= 0:
                return
            if self.lifecycle.requeue_lost(chunk).applied:
                budget -= 1
                report.chunks_requeued.append(f"{chunk.job_id}/{chunk.stage}/{chunk.index}")
            else:
                report.conflicts += 1

        self._each(candidates, "re-send a lost chunk", report, resend)

    def _waiting(self, report: ReapReport, waiting: list[Job], stages: dict[str, list[Chunk]]) -> None:
        """Waiting jobs: re-send a resume that was lost, or fan in a stage whose last finisher crashed.

        A stage the index run listed is settled from that listing, not listed again (one range query per waiting
        job and run, not two). A chunk that ended since is seen unfinished, which leaves the fan-in to its finisher
        or the next run; a terminal chunk never changes, so a stage seen complete is complete.
        """
        if not waiting:
            return  # no queue read for nothing: an idle run stays at 1 query and the metrics
        lost = utcnow_minus(self.settings.queued_stale_seconds)
        oldest = self.stores.messages.oldest_visible()

        def check(job: Job) -> None:
            if job.fan_in_at is not None:
                if job.fan_in_at < lost and _behind(oldest, job.fan_in_at):
                    report.backlog_skipped += 1  # its resume may still be waiting in the jobs queue
                elif job.fan_in_at < lost and self.lifecycle.resend_resume(job).applied:
                    report.resumes_resent.append(job.id)
            elif job.wait_stage:
                self.lifecycle.refill_or_fan_in(job.tenant, job.id, job.wait_stage, job.traceparent,
                                                stages.get(job.id))
                report.waiting_settled.append(job.id)

        self._each(waiting, "look at a waiting job's stage", report, check)

    def _retention(self, report: ReapReport, *, moving: bool = False) -> None:
        """Expire the jobs finished before the cutoff, ``RETENTION_JOURNAL_JOBS`` at a time, each lot named first in
        a journal blob (``~retention/…``) that is deleted once all of its jobs are expired. An expiry deletes the
        row before the blobs, so a sweep cut off between the two (a timeout, a crash) or a blob delete that failed
        leaves blobs with no row: the journal names them for the next sweep (``_orphaned_inputs``), which is what
        lets that sweep list the journals instead of the whole container. 1 write and 2 requests per lot."""
        cutoff = utcnow_minus(self.settings.retention_days * 86400)
        query = "( status eq 'succeeded' or status eq 'failed' or status eq 'cancelled' ) and finished_at lt @cutoff"

        def expire(job: Job) -> None:
            if self.lifecycle.expire(job, job_prefix(job.tenant, job.id), cutoff, moving=moving):
                report.deleted.append(job.id)

        lot: list[Job] = []
        for job in self.stores.jobs.scan(query, {"cutoff": cutoff}):
            lot.append(job)
            if len(lot) == RETENTION_JOURNAL_JOBS:
                self._expire_lot(report, lot, expire)
                lot = []
        if lot:
            self._expire_lot(report, lot, expire)

    def _expire_lot(self, report: ReapReport, lot: list[Job], expire: Callable[[Job], None]) -> None:
        journal = f"{RETENTION_JOURNALS}{utcnow():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}.json"
        entries = [[j.tenant, j.id, j.input_blob or ""] for j in lot]
        # Raises when Storage is away: nothing is expired without its journal.
        self.stores.blobs.put(journal, json.dumps(entries, separators=(",", ":")).encode(), "application/json")
        errors = report.errors
        self._each(lot, "delete an expired job", report, expire)
        if report.errors == errors:
            self.stores.blobs.delete_prefix(journal)

    def _move_chunk_rows(self, report: ReapReport, state: IndexState) -> None:
        """Move chunk rows of the layout before (``ChunkRepo.move_legacy``), one query of each tenant's job rows, until
        a sweep finds none left in any tenant; then it is recorded and no later sweep looks again."""
        done = True
        for tenant in self.stores.jobs.every_tenant():
            try:
                moved = self.stores.chunks.move_legacy(tenant)
            except ThematiqError as err:
                report.errors += 1
                done = False
                log.warning("reaper: could not move the chunk rows of tenant %s (%s)", tenant, type(err).__name__)
                continue
            report.chunk_rows_moved += moved.moved
            done = done and moved.left == 0
        if done:
            self.stores.jobs.mark_chunks_moved(utcnow())

    def _orphaned_inputs(self, report: ReapReport, state: IndexState) -> None:
        """Blobs with no job row: claim-checked inputs old enough that no insert can still be deciding, and the
        blobs of jobs an expiry cut off between their row and their blobs.

        A submission deletes its blob itself when a re-read shows its insert did not commit; this finds what
        it could not (the table away for the re-read too, the API killed between the blob and the row, a delete
        that failed). Daily, in the sweep, and listing only what can be orphaned (platform45): the dated inputs of
        the days since the last completed sweep (``~inputs/{day}/``, a listing of a day's claim-checked
        submissions), and retention's journals left by an expiry that did not finish (``~retention/``, none after
        a sweep that went well). One query per 14 inputs or journal entries checks their rows. Until then it was
        one listing of the whole container, every blob of every retained job; that listing still runs once, to
        find the orphans of the layout before (``_orphans_of_the_layout_before``), and is then recorded on the
        sweep row. A delete that fails, or whose answer is lost, counts as an error, so this sweep is not recorded
        and the next run sweeps the same window again: no orphan stays for ever.
        """
        errors = report.errors
        swept_at = state.swept_at
        since = None if swept_at is None else swept_at - timedelta(seconds=2 * ORPHAN_INPUT_AGE_SECONDS)
        young = utcnow_minus(ORPHAN_INPUT_AGE_SECONDS)
        by_tenant: dict[str, dict[str, list[str]]] = {}
        for prefix in _days(since, young):
            for name, at in self.stores.blobs.written(prefix):
                owner = dated_input_owner(name)
                if owner is not None and at < young and (since is None or at >= since):
                    by_tenant.setdefault(owner[0], {})[owner[1]] = [name]
        journals = [name for name, at in self.stores.blobs.written(RETENTION_JOURNALS) if at < young]
        for journal in journals:
            for tenant, job_id, input_blob in self._journal(journal):
                by_tenant.setdefault(tenant, {}).setdefault(job_id, []).extend(
                    [job_prefix(tenant, job_id), input_blob])
        # The layout before: until one full listing finds no input of it too young to judge (one written within the
        # hour before the deploy, or by an instance of the code before beside it), the next sweep lists again.
        complete = state.orphans_dated or self._orphans_of_the_layout_before(since, young, by_tenant)
        self._drop_orphans(report, by_tenant)
        if report.errors != errors:
            return
        for journal in journals:
            self.stores.blobs.delete_prefix(journal)
        if not state.orphans_dated and complete:
            self.stores.jobs.mark_orphans_dated(utcnow())

    def _journal(self, name: str) -> list[tuple[str, str, str]]:
        """A retention journal's entries; none for one another sweep deleted meanwhile, or one that does not read (a
        hand edit: logged, and deleted with the others, so it cannot keep every later sweep from being recorded)."""
        data = self.stores.blobs.get_optional(name)
        try:
            return [(str(t), str(j), str(i)) for t, j, i in json.loads(data or b"[]")]
        except (ValueError, TypeError) as err:
            log.error("reaper: retention journal %s does not read (%s); ignored", name, type(err).__name__)
            return []

    def _orphans_of_the_layout_before(
        self, since: datetime | None, young: datetime, by_tenant: dict[str, dict[str, list[str]]]
    ) -> bool:
        """The listing before platform45, until it has done its work: inputs in their job's folder written in the
        window, and job folders whose newest blob is past retention (an expiry cut off before retention kept a
        journal). False when it saw an input of that layout too young to judge: the next sweep looks again."""
        complete = True
        days = self.settings.retention_days
        expired = utcnow_minus(days * 86400 + ORPHAN_INPUT_AGE_SECONDS) if days > 0 else None
        newest: dict[tuple[str, str], datetime] = {}
        for name, at in self.stores.blobs.written():
            tenant, job_id, *rest = name.split("/")
            if not rest or tenant.startswith("~"):
                continue  # not in a job's folder (a dated input, a journal)
            newest[tenant, job_id] = max(at, newest.get((tenant, job_id), at))
            if input_blob_name(tenant, job_id) == name:
                complete = complete and at < young
                if at < young and (since is None or at >= since):
                    by_tenant.setdefault(tenant, {}).setdefault(job_id, []).append(name)
        for (tenant, job_id), at in newest.items():
            if expired is not None and at < expired:
                by_tenant.setdefault(tenant, {}).setdefault(job_id, []).append(job_prefix(tenant, job_id))
        return complete

    def _drop_orphans(self, report: ReapReport, by_tenant: dict[str, dict[str, list[str]]]) -> None:
        def drop(item: tuple[str, dict[str, list[str]]]) -> None:
            tenant, names = item
            for job_id in sorted(names.keys() - self.stores.jobs.existing(tenant, names)):
                wanted = [n for n in dict.fromkeys(names[job_id]) if n]
                # A folder is a prefix; an input is one name, deleted in the folder's batch when there is one.
                folders, single = [n for n in wanted if n.endswith("/")], [n for n in wanted if not n.endswith("/")]
                first, *rest = folders or single
                self.stores.blobs.delete_prefix(first, also=single)
                for folder in rest:
                    self.stores.blobs.delete_prefix(folder)
                report.orphans_deleted.append(job_id)
                log.warning("reaper: deleted the blobs of %s/%s (%s), which has no job row", tenant, job_id,
                            ", ".join(names[job_id]))

        self._each(by_tenant.items(), "delete orphaned inputs", report, drop)

    def _queue_metrics(self) -> None:
        """Queue depth, the oldest waiting message's age and the poison depth: what the alerts watch."""
        try:
            depth, oldest_at = self.stores.messages.depth(), self.stores.messages.oldest_visible()
            poison = self.stores.messages.depth(self.settings.poison_queue)
        except ThematiqError:
            log.warning("reaper: could not read queue metrics")
            return
        oldest = max(0.0, (utcnow() - oldest_at).total_seconds()) if oldest_at is not None else 0.0
        telemetry.QUEUE_DEPTH.set(depth)
        telemetry.QUEUE_OLDEST.set(oldest)
        telemetry.POISON_DEPTH.set(poison)
        telemetry.event("queue.metrics", depth=depth, oldest_age_seconds=round(oldest, 1), poison_depth=poison)


def max_requeues_per_run() -> int:
    """How many lost messages one run re-sends, per kind (a module function, so a test can lower it)."""
    return REAPER_MAX_REQUEUES_PER_RUN


def _unsent(job: Job) -> bool:
    """Whether the job's message for its current due time is known not to have gone (``Lifecycle._enqueue``)."""
    return job.unsent_for is not None and job.unsent_for == job.available_at


def _behind(oldest_visible: datetime | None, sent_by: datetime) -> bool:
    """Whether a message sent by ``sent_by`` may still be waiting: the queue holds a message at least as old."""
    return oldest_visible is not None and oldest_visible <= sent_by + QUEUE_TIME_GRANULARITY


def _days(since: datetime | None, until: datetime) -> list[str]:
    """The dated inputs' prefixes of the UTC days from ``since`` to ``until``; their whole root without a ``since``
    (never swept: every input still retained)."""
    if since is None:
        return [INPUTS_ROOT]
    first, last = since.date(), until.date()
    return [inputs_of_day(first + timedelta(days=i)) for i in range((last - first).days + 1)]


def utcnow_minus(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)
