"""Per-tenant fairness: a window of at most W jobs per tenant in the jobs queue or running, the rest parked.

Why: the jobs queue is one FIFO. A tenant that submits 500 jobs puts 500 messages in front of
everybody else's, and a host runs only ``batchSize + newBatchThreshold`` (5) at once, so another
tenant's first job used to wait for all of them. With a window, a tenant has at most
``TENANT_MAX_IN_FLIGHT`` (W) messages in the queue or attempts running; a submission past that is
stored as a normal ``queued`` job row (answered 202 at once) but *parked*: no message yet, only a
row in the tenant's wait list. When one of the tenant's windowed jobs ends, its slot is handed to the
tenant's oldest parked job, whose message is sent then. So at most W of one tenant's messages are
ever ahead of another tenant's first job: with W no larger than what a host runs at once, that job
starts when the next attempt ends, within one attempt's time.

**Storage** (in the tenant's own partition of the jobs table, ``shared.storage.fairness_store``):

* ``~fair~slot~NNN`` (N < W): a slot, holding the id of the job it admitted (``""`` when free);
* ``~fair~wait~<submit ms, ascending>~<job id>``: a parked job, oldest first;
* one row per tenant with parked jobs in the ``~fair`` partition, so the reaper finds the tenants to
  repair with one query and never scans the table.

One query (``WindowStore.view``) returns every slot and the oldest parked rows (slots sort first).

**Every slot write is a plan for** :func:`shared.core.conditional.apply` (take, hand over, free), so a
write whose answer was lost is decided by re-reading the slot: it shows our job id / our op token, or
another writer's, and the plan is made again on what it shows. The wait-list and tenant-marker rows
are idempotent upserts and deletes of *hints*: a lost answer is harmless, the write is made again.

**Who runs what, and its cost in storage operations:**

* submit (through :class:`Gate`, the jobs-queue port the submit path uses): one query, then either
  one slot write and the send (2 + send), or, the window being full, one wait-row upsert and one
  query again (3; + the tenant marker when it had no parked job). The second query closes the race
  with a release that freed a slot between our first query and our wait row: parker and releaser
  both *write, then read* (Dekker), so at least one of them sees the other.
* a windowed job ending (:func:`job_ended`, called by the lifecycle once a terminal write landed):
  one query; with parked jobs one slot hand-over, the send and the wait-row delete (4); without,
  freeing the slot and one query again (3). A parked job ending (cancelled) deletes its wait row (2).
  Never a scan: O(1) operations per finished job, whatever the tenant's backlog.
* the reaper (:func:`repair`): one query of the markers per run (idle: 1); per marked tenant one query
  and, only when its window is full, a read of each slot's job, to give a slot held by a job that
  ended without its release (the release's writes failed) to the next parked job.

What a failure leaves: a send that never goes after a slot was handed over is recorded in the
active-jobs index (``JobRepo.index_job``), like any unsent message, and the reaper re-sends it. A
submission whose window check cannot reach storage is sent unwindowed by the lifecycle's own
unsent-message path (the window is a fairness bound, never a reason to lose a job).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.config.settings import raw
from shared.core import conditional
from shared.core.errors import NotFound, ThematiqError
from shared.core.jobs import Job, Status
from shared.core.messages import ChunkMessage, JobMessage
from shared.core.ports import Messages, Stores
from shared.core.webhooks import WebhookMessage

log = logging.getLogger(__name__)

#: Job ids start with 12 hex digits of inverted milliseconds (``shared.core.jobs.new_job_id``).
_ID_TIME_MAX = 0xFFFFFFFFFFFF


def window() -> int:
    """``TENANT_MAX_IN_FLIGHT``: jobs per tenant in the queue or running at once; 0 turns fairness off."""
    try:
        return max(0, int(raw("TENANT_MAX_IN_FLIGHT")))
    except ValueError:
        return 0


def wait_order(job_id: str) -> str:
    """The submit time as 15 ascending digits of milliseconds, from the id, so a wait list lists oldest first."""
    return f"{_ID_TIME_MAX - int(job_id[:12], 16):015d}"


@dataclass(frozen=True)
class Slot:
    """One of a tenant's W places in the queue; ``job_id`` "" when free. No ETag: not stored yet (free)."""

    tenant: str
    index: int
    job_id: str = ""
    etag: str | None = None
    op: str | None = None


@dataclass(frozen=True)
class Parked:
    """A job waiting for a slot (a hint: the job row is the truth)."""

    tenant: str
    job_id: str
    traceparent: str | None = None


@dataclass(frozen=True)
class View:
    """One query's picture of a tenant's window: every stored slot, and the oldest parked jobs."""

    tenant: str
    slots: tuple[Slot, ...]
    parked: tuple[Parked, ...]
    size: int

    def holding(self, job_id: str) -> Slot | None:
        return next((s for s in self.slots if s.job_id == job_id), None)

    def free(self) -> list[Slot]:
        """Free slots below the window (a slot never stored is free), lowest index first."""
        stored = {s.index: s for s in self.slots}
        slots = [stored.get(i, Slot(self.tenant, i)) for i in range(self.size)]
        return [s for s in slots if not s.job_id]


class WindowStore(Protocol):
    def view(self, tenant: str, size: int, parked: int) -> View:
        """Every slot of ``tenant`` and its ``parked`` oldest parked jobs: one query."""

    def slot(self, tenant: str, index: int) -> Slot:
        """Re-read one slot (a free, never-stored one without an ETag)."""

    def write_slot(self, slot: Slot, fields: dict[str, Any]) -> Slot:
        """Insert (no ETag) or MERGE on ``slot.etag``; EtagMismatch when someone else wrote first."""

    def park(self, item: Parked) -> None:
        """Upsert the wait row (idempotent)."""

    def unpark(self, tenant: str, job_id: str) -> None:
        """Delete the wait row (gone already is a success)."""

    def mark(self, tenant: str) -> None:
        """Upsert the tenant's marker: it has parked jobs (idempotent)."""

    def unmark(self, tenant: str) -> None:
        """Delete the tenant's marker (gone already is a success)."""

    def marked(self) -> list[str]:
        """Tenants with a marker: one query of a small partition."""

    def parked_ids(self, tenant: str) -> set[str]:
        """Every parked job id of ``tenant`` (the daily sweep's filter; pages of 1,000)."""

    def position(self, tenant: str, job_id: str) -> int | None:
        """The job's place in its tenant's wait list (1: next in), None if it is not parked: one query of up to
        ``POSITION_PAGE`` keys (and a point read when more than that are ahead of it: ``POSITION_PAGE + 1``)."""


#: How many wait rows a poll's look for a job's place lists at most (one page of the service's).
POSITION_PAGE = 1000

_FACTORY: list[Callable[[Stores], WindowStore]] = []


def register(factory: Callable[[Stores], WindowStore]) -> None:
    """Called by ``shared.storage`` on import: this layer may not import the layer that implements its port."""
    _FACTORY[:] = [factory]


def store_of(stores: Stores) -> WindowStore:
    if not _FACTORY:
        raise RuntimeError("no window store registered (import shared.storage)")
    return _FACTORY[0](stores)


# == the slot transitions, each a plan for the conditional primitive ================================
def _apply(store: WindowStore, slot: Slot, name: str, plan: Callable[[Slot], dict[str, Any] | None],
           landed: Callable[[Slot], bool]) -> bool:
    return conditional.apply(
        slot, read=lambda: store.slot(slot.tenant, slot.index), write=store.write_slot, plan=plan,
        landed=landed, name=f"tenant {slot.tenant} slot {slot.index}: {name}",
    ).applied


def take(store: WindowStore, slot: Slot, job_id: str) -> bool:
    """A free slot → held by ``job_id``. A lost answer: the re-read slot holding ``job_id`` is ours."""
    return _apply(store, slot, "take", lambda s: {"job_id": job_id} if not s.job_id else None,
                  lambda s: s.job_id == job_id)


def hand_over(store: WindowStore, slot: Slot, ended: str, to: str) -> bool:
    """The slot of a job that ended → its successor, only while it still holds the ended job."""
    return _apply(store, slot, "hand over", lambda s: {"job_id": to} if s.job_id == ended else None,
                  lambda s: s.job_id == to)


def free(store: WindowStore, slot: Slot, ended: str) -> bool:
    """The slot of a job that ended → free. A lost answer is decided by the op token (someone may have taken it)."""
    return _apply(store, slot, "free", lambda s: {"job_id": ""} if s.job_id == ended else None,
                  lambda s: False)


def may_be_parked(job: Job) -> bool:
    """Fairness is on and the job is ``queued`` before its first attempt: only then can it be parked (and a poll
    looks for it in the wait list, :func:`place`)."""
    return window() > 0 and job.status == Status.QUEUED and not job.attempts


def place(stores: Stores, job: Job) -> int | None:
    """Where a ``queued`` job stands in its tenant's wait list (1: next in), None if it is not parked (or fairness is
    off, or the look failed: a hint for its poller, never a reason to fail the read). One query, on a queued
    job's poll only; a job that has had an attempt is never parked again."""
    if not may_be_parked(job):
        return None
    try:
        return store_of(stores).position(job.tenant, job.id)
    except ThematiqError as err:
        log.info("job %s: could not look for it in the wait list (%s)", job.id, type(err).__name__)
        return None


# == submission ===================================================================================
Sender = Callable[[JobMessage], bool]


@dataclass
class Gate:
    """The jobs-queue port of the submit path: a job's first message goes out only if its tenant has a free slot.

    Everything else (chunk and webhook messages, later attempts) passes straight through. Errors of the
    window's own storage calls propagate to the caller's send (``Lifecycle.send``), which retries or records
    the send as failed; the reaper then re-sends the job's message unwindowed.
    """

    inner: Messages
    store: WindowStore
    size: int
    #: Job ids this gate parked (for the submit answer's hint and the tests).
    parked: set[str] = field(default_factory=set)

    def send(self, message: JobMessage | ChunkMessage | WebhookMessage, delay: timedelta | None = None) -> None:
        if isinstance(message, JobMessage) and message.attempt == 1 and not message.resume and delay is None:
            if not admit(self.store, self.size, message, lambda m: _send_now(self.inner, m)):
                self.parked.add(message.job_id)
                return
            self.parked.discard(message.job_id)
        self.inner.send(message, delay)

    # The rest of the port is the inner one's.
    def send_poison(self, text: str, queue: str | None = None) -> None:
        self.inner.send_poison(text, queue)

    def oldest_visible(self, queue: str | None = None) -> datetime | None:
        return self.inner.oldest_visible(queue)

    def depth(self, queue: str | None = None) -> int:
        return self.inner.depth(queue)


def _send_now(messages: Messages, message: JobMessage) -> bool:
    try:
        messages.send(message)
        return True
    except ThematiqError:
        log.warning("job %s: its message could not be sent on release; the reaper re-sends it", message.job_id)
        return False


def gated(stores: Stores) -> Stores:
    """``stores`` with the submit path's jobs-queue port windowed per tenant (unchanged when fairness is off)."""
    size = window()
    if size <= 0:
        return stores
    from dataclasses import replace

    return replace(stores, messages=Gate(stores.messages, store_of(stores), size))


def admit(store: WindowStore, size: int, message: JobMessage, send_other: Sender) -> bool:
    """True: ``message``'s job holds a slot, send its message. False: it is parked (or was let in by a release
    that already sent its message). ``send_other`` sends the message of an older parked job let in here."""
    tenant, job_id = message.tenant, message.job_id
    view = store.view(tenant, size, parked=2)
    if view.holding(job_id) is not None:
        return True  # a replay of a submission already admitted: its message may never have gone
    for slot in view.free():
        if take(store, slot, job_id):
            return True
    had_parked = bool(view.parked)
    store.park(Parked(tenant, job_id, message.traceparent))
    if not had_parked:
        store.mark(tenant)
    # Write, then read: a release that freed a slot after our first query and before our wait row existed
    # found no one to hand it to; this second look finds its slot free.
    let_in = _fill(store, store.view(tenant, size, parked=size), send_other, skip_send=job_id)
    return job_id in let_in


def _fill(store: WindowStore, view: View, send: Sender, *, skip_send: str | None = None) -> set[str]:
    """Give each free slot of ``view`` to the oldest parked job without one; send their messages.

    The message is sent before the wait row is deleted: a crash between them leaves a parked row for a job
    that holds a slot, which the next fill skips and deletes (a job never holds two slots: ``view.holding``).
    """
    let_in: set[str] = set()
    free_slots = view.free()
    for item in view.parked:
        if view.holding(item.job_id) is not None:
            store.unpark(item.tenant, item.job_id)  # let in before; its wait row was left behind
            continue
        if not free_slots:
            break
        if not take(store, free_slots.pop(0), item.job_id):
            break  # taken meanwhile (a submission): the window is full again
        let_in.add(item.job_id)
        if item.job_id != skip_send:
            send(JobMessage(item.tenant, item.job_id, 1, item.traceparent))
        store.unpark(item.tenant, item.job_id)
    return let_in


# == a job ended ==================================================================================
def job_ended(stores: Stores, job: Job, send: Sender | None = None) -> None:
    """The lifecycle's hook once a terminal write landed: hand the job's slot to its tenant's oldest parked job.

    Best effort: a storage error is logged and left to :func:`repair` (the slot stays held by an ended job
    until the reaper finds it). ``send`` is the lifecycle's retrying send (False: it never went).
    """
    size = window()
    if size <= 0:
        return
    store = store_of(stores)
    sender = send or (lambda m: _send_now(stores.messages, m))

    def send_or_index(message: JobMessage) -> bool:
        if sender(message):
            return True
        try:
            stores.jobs.index_job(message.tenant, message.job_id)  # the reaper's next index run re-sends it
        except ThematiqError:
            log.error("job %s: neither sent nor indexed; the daily sweep re-sends it", message.job_id)
        return False

    try:
        release(store, size, job, send_or_index)
    except ThematiqError as err:
        log.warning("job %s: its fairness slot was not released (%s); the reaper will", job.id, type(err).__name__)


def release(store: WindowStore, size: int, job: Job, send: Sender) -> None:
    view = store.view(job.tenant, size, parked=2)
    mine = view.holding(job.id)
    if mine is None:
        store.unpark(job.tenant, job.id)  # a parked job cancelled (or a job submitted unwindowed): no slot
        return
    for item in view.parked:
        if item.job_id == job.id or view.holding(item.job_id) is not None:
            # Let in before, its wait row left behind (a crash between the send and the delete): drop it, or a
            # later fill would let in a job that already ran (or, for this one, has ended).
            store.unpark(item.tenant, item.job_id)
            continue
        if hand_over(store, mine, job.id, item.job_id):
            send(JobMessage(item.tenant, item.job_id, 1, item.traceparent))
            store.unpark(item.tenant, item.job_id)
        return
    if free(store, mine, job.id):
        # Write, then read (see ``admit``): a job parked after our query finds no free slot, we find it.
        again = store.view(job.tenant, size, parked=size)
        if again.parked:
            _fill(store, again, send)


# == the reaper ===================================================================================
@dataclass
class RepairReport:
    let_in: list[str] = field(default_factory=list)
    reclaimed: int = 0
    errors: int = 0


def repair(stores: Stores, report: RepairReport) -> None:
    """Let in parked jobs a lost release left waiting: free slots filled, slots of ended jobs handed over."""
    size = window()
    if size <= 0:
        return
    store = store_of(stores)
    for tenant in store.marked():
        try:
            _repair_tenant(stores, store, size, tenant, report)
        except ThematiqError as err:
            report.errors += 1
            log.warning("fairness: could not repair tenant %s (%s)", tenant, type(err).__name__)


def _repair_tenant(stores: Stores, store: WindowStore, size: int, tenant: str, report: RepairReport) -> None:
    def send(message: JobMessage) -> bool:
        return _send_now(stores.messages, message)

    view = store.view(tenant, size, parked=size)
    if not view.parked:
        store.unmark(tenant)
        if store.view(tenant, size, parked=1).parked:
            store.mark(tenant)  # parked between our two looks (write, then read, as everywhere here)
        return
    if not view.free():
        for slot in view.slots:
            if slot.index < size and _ended(stores, tenant, slot.job_id):
                report.reclaimed += int(free(store, slot, slot.job_id))
        view = store.view(tenant, size, parked=size)
    report.let_in.extend(sorted(_fill(store, view, send)))


def _ended(stores: Stores, tenant: str, job_id: str) -> bool:
    try:
        return stores.jobs.get(tenant, job_id).status.terminal
    except NotFound:
        return True


def not_parked(stores: Stores, jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` less the parked ones (the daily sweep must not send a parked job's message: it has none on purpose).

    One listing of each tenant's wait list, only for tenants with a never-claimed candidate.
    """
    if window() <= 0 or not jobs:
        return list(jobs)
    store = store_of(stores)
    tenants: Iterable[str] = sorted({j.tenant for j in jobs if j.attempts == 0})
    parked: set[tuple[str, str]] = set()
    for tenant in tenants:
        parked.update((tenant, i) for i in store.parked_ids(tenant))
    return [j for j in jobs if (j.tenant, j.id) not in parked]


__all__ = ["Gate", "Parked", "RepairReport", "Slot", "View", "WindowStore", "admit", "gated", "job_ended",
           "not_parked", "register", "release", "repair", "window"]
