"""Jobs and chunks are both *leased rows*; this module says, once per kind, what each lease transition writes.

A leased row is claimed by one delivery (``owner``, ``attempts`` + 1, a
heartbeat), renewed while its attempt runs, and then released (the claim given
back), finished, or reaped when its heartbeat went stale. The flow of each
transition (the guard "still running under this claim", the conditional write,
the telemetry, the message sent after the write landed) is written once, in
``shared.core.lifecycle``; what differs between a job and a chunk (which fields
a claim or a finish writes, which message follows) is a :class:`RowKind`:
:data:`JOBS` or :data:`CHUNKS`, picked by :func:`kind_of` from the row itself.

The typed changes a caller hands to the lifecycle live here too:
:class:`Ending` (how a running attempt ended, for ``Lifecycle.finish``) and
:class:`StoredResult` (an attempt's result as stored).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, cast

from shared.core.chunks import Chunk, ChunkStatus
from shared.core.jobs import Job, JobError, Progress, Status
from shared.core.names import result_blob_name
from shared.core.ports import Stores

Fields = dict[str, Any]

#: A leased row: a job or a chunk (constrained, so each generic transition is checked for both).
R = TypeVar("R", Job, Chunk)


@dataclass(frozen=True)
class StoredResult:
    """An attempt's result as stored: its blob's name and size, and the bytes when they live in the row too."""

    blob: str
    size: int
    inline: bytes | None = None


@dataclass(frozen=True)
class Ending:
    """How a running attempt ended: the typed change ``Lifecycle.finish`` writes.

    ``status`` is ``succeeded``, ``failed``, ``cancelled`` or ``retrying`` (for a chunk, a retry puts it back in
    the queue). ``retry_in`` is the backoff of a retry: the next attempt's message is sent with it. ``poison``:
    a job's failure whose message the worker copies to the poison queue after the write (``Job.poison_copy``).
    """

    status: Status
    error: JobError | None = None
    result: StoredResult | None = None
    usage: dict[str, float] | None = None
    progress: Progress | None = None
    retry_in: timedelta = timedelta(0)
    poison: bool = False

    def __post_init__(self) -> None:
        if self.status not in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.RETRYING):
            raise ValueError(f"an attempt does not end {self.status}")

    def accounted(self) -> Fields:
        """What the attempt used and how far it got: written with any ending, a cancelled one included."""
        fields: Fields = {}
        if self.usage is not None:
            fields["usage"] = self.usage
        if self.progress is not None:
            fields["progress"] = self.progress
        return fields


def succeeded_from(found: StoredResult, now: datetime) -> Fields:
    """The fields that finish a job from a result blob found in storage (the reaper, or a retry of a reaped attempt)."""
    return {"status": Status.SUCCEEDED, "owner": None, "finished_at": now, "error": None,
            "result_blob": found.blob, "result_bytes": found.size}


def finish_from_stored(row: Job, attempt: int, found: StoredResult | None, now: datetime) -> Fields | None:
    """The one decision "attempt ``attempt``'s result is stored: finish the job from it, never run it again".

    Asked by every claim and every resume, before anything runs. Three ways a result is stored without the
    job being finished:

    * a delivery stored it, then had to give its claim back (``release`` keeps the pointer): the row is
      claimable one attempt short, or waiting on this very attempt (a resumed attempt), and points at the blob;
    * the reaper handed the attempt on while its worker was still uploading (a slow upload): the row is
      ``retrying`` after that attempt, and ``found`` is the blob the caller found for it (one listing, only
      on that path).

    None when neither holds: the attempt runs.
    """
    name = result_blob_name(row.tenant, row.id, attempt)
    released = row.status.claimable and row.attempts == attempt - 1
    resumed = row.status == Status.WAITING and row.attempts == attempt
    if (released or resumed) and row.result_blob == name:
        return {
            "status": Status.SUCCEEDED, "attempts": attempt, "owner": None, "finished_at": now,
            "error": None, "started_at": row.started_at or now, "wait_stage": None, "fan_in_at": None,
        }
    if found is not None and row.status == Status.RETRYING and row.attempts == attempt - 1:
        return succeeded_from(found, now)
    return None


class RowKind(ABC, Generic[R]):
    """What a lease transition writes on one kind of row. Only the lifecycle uses it."""

    #: The ``kind`` label of the transition metric.
    name: str

    @abstractmethod
    def read(self, stores: Stores, row: R, *, with_input: bool = False) -> R: ...

    @abstractmethod
    def write(self, stores: Stores, row: R, fields: Fields) -> R: ...

    @abstractmethod
    def label(self, row: R) -> str: ...

    @abstractmethod
    def claim(self, row: R, attempt: int, owner: str, now: datetime) -> Fields | None:
        """The claim's fields, if ``row`` is waiting for attempt ``attempt``."""

    @abstractmethod
    def renew(self, row: R, progress: Progress | None, now: datetime) -> Fields: ...

    @abstractmethod
    def release(self, row: R, before: R, stored: StoredResult | None) -> Fields: ...

    @abstractmethod
    def finish(self, row: R, ending: Ending, now: datetime) -> Fields: ...

    @abstractmethod
    def reap(self, row: R, found: StoredResult | None, now: datetime) -> Fields: ...

    @abstractmethod
    def requeue(self, row: R, seen: R, now: datetime) -> Fields | None:
        """A queued row whose message is lost: the fields that move its due time on, if it is still as seen."""

    @abstractmethod
    def postpone(self, row: R, seen: R, due: datetime) -> Fields | None:
        """A queued row whose delivery was deferred (no memory on this host): the fields that make it due at
        ``due`` at the earliest, so the reaper does not take it for a row whose message was lost."""

    @abstractmethod
    def retried(self, row: R) -> bool:
        """Whether a write left ``row`` waiting for its next attempt's message (a retry, a reap, a requeue)."""

    @staticmethod
    def holds(row: R, claim: R) -> bool:
        """The guard of every transition of a claim holder: the row still runs under this claim."""
        return row.status == "running" and row.owner == claim.owner


class JobRows(RowKind[Job]):
    name = "job"

    def read(self, stores: Stores, row: Job, *, with_input: bool = False) -> Job:
        return stores.jobs.get(row.tenant, row.id, with_input=with_input)

    def write(self, stores: Stores, row: Job, fields: Fields) -> Job:
        return stores.jobs.update(row, **fields)

    def label(self, row: Job) -> str:
        return f"job {row.id}"

    def claim(self, row: Job, attempt: int, owner: str, now: datetime) -> Fields | None:
        if not row.status.claimable or row.attempts != attempt - 1 or row.cancel_requested:
            return None
        return {"status": Status.RUNNING, "attempts": attempt, "owner": owner,
                "started_at": row.started_at or now, "heartbeat_at": now}

    def renew(self, row: Job, progress: Progress | None, now: datetime) -> Fields:
        return {"heartbeat_at": now, **({"progress": progress} if progress is not None else {})}

    def release(self, row: Job, before: Job, stored: StoredResult | None) -> Fields:
        fields: Fields = {"status": before.status, "attempts": before.attempts, "owner": None,
                          "wait_stage": before.wait_stage, "fan_in_at": before.fan_in_at}
        if stored is not None:
            fields.update(result_blob=stored.blob, result_bytes=stored.size)
            if stored.inline is not None:
                fields["result_inline"] = stored.inline  # a small result lives in the row: keep it there
        return fields

    def finish(self, row: Job, ending: Ending, now: datetime) -> Fields:
        if row.cancel_requested and ending.status == Status.RETRYING:
            # A cancel request that arrived meanwhile wins over a retry.
            return {"status": Status.CANCELLED, "owner": None, "finished_at": now, **ending.accounted()}
        fields: Fields = {"status": ending.status, "owner": None, **ending.accounted()}
        if ending.status == Status.SUCCEEDED:
            fields["error"] = None
            if ending.result is not None:
                fields.update(result_blob=ending.result.blob, result_bytes=ending.result.size)
                if ending.result.inline is not None:
                    fields["result_inline"] = ending.result.inline
        elif ending.error is not None:
            fields["error"] = ending.error
        if ending.poison and ending.status == Status.FAILED:
            fields["poison_copy"] = True  # in the FAILED write itself: a redelivery knows the copy is owed
        if ending.status == Status.RETRYING:
            fields["available_at"] = now + ending.retry_in
        else:
            fields["finished_at"] = now
        return fields

    def reap(self, row: Job, found: StoredResult | None, now: datetime) -> Fields:
        if found is not None:
            return succeeded_from(found, now)
        if row.cancel_requested:
            return {"owner": None, "status": Status.CANCELLED, "finished_at": now}
        # Not the owner (host name, process id): the error is the tenant's to read; the reaper logs the owner.
        lost = f"attempt {row.attempts} stopped sending heartbeats (its worker is presumed dead)"
        if row.attempts >= row.max_attempts:
            why = f"{lost}; attempts exhausted ({row.attempts}/{row.max_attempts})"
            return {"owner": None, "status": Status.FAILED, "finished_at": now, "error": JobError.of("WorkerLost", why)}
        return {"owner": None, "status": Status.RETRYING, "available_at": now,
                "error": JobError.of("WorkerLost", lost), "requeues": row.requeues + 1}

    def retried(self, row: Job) -> bool:
        return row.status == Status.RETRYING

    def requeue(self, row: Job, seen: Job, now: datetime) -> Fields | None:
        if not row.status.claimable or row.available_at != seen.available_at or row.attempts != seen.attempts:
            return None
        return {"available_at": now, "requeues": row.requeues + 1}

    def postpone(self, row: Job, seen: Job, due: datetime) -> Fields | None:
        if not row.status.claimable or row.attempts != seen.attempts:
            return None
        return {"available_at": max(row.available_at, due)}


class ChunkRows(RowKind[Chunk]):
    name = "chunk"

    def read(self, stores: Stores, row: Chunk, *, with_input: bool = False) -> Chunk:
        return stores.chunks.get(row.tenant, row.job_id, row.stage, row.index, with_input=with_input)

    def write(self, stores: Stores, row: Chunk, fields: Fields) -> Chunk:
        return stores.chunks.update(row, **fields)

    def label(self, row: Chunk) -> str:
        return f"chunk {row.job_id}/{row.stage}/{row.index}"

    def claim(self, row: Chunk, attempt: int, owner: str, now: datetime) -> Fields | None:
        if row.status != ChunkStatus.QUEUED or row.attempts != attempt - 1:
            return None
        return {"status": ChunkStatus.RUNNING, "attempts": attempt, "owner": owner, "heartbeat_at": now}

    def renew(self, row: Chunk, progress: Progress | None, now: datetime) -> Fields:
        fields: Fields = {"heartbeat_at": now}
        if progress is not None:
            fields["processed"] = min(progress.processed, row.items)
        return fields

    def release(self, row: Chunk, before: Chunk, stored: StoredResult | None) -> Fields:
        return {"status": before.status, "attempts": before.attempts, "owner": None}

    def finish(self, row: Chunk, ending: Ending, now: datetime) -> Fields:
        error = {"error_type": ending.error.type if ending.error else "",
                 "error_message": ending.error.message if ending.error else ""}
        if ending.status == Status.RETRYING:
            return {"status": ChunkStatus.QUEUED, "owner": None, "queued_at": now, **error}
        fields: Fields = {"status": ChunkStatus(ending.status.value), "owner": None, "finished_at": now}
        if ending.status == Status.SUCCEEDED:
            fields.update(output_blob=ending.result.blob if ending.result else None, processed=row.items)
        elif ending.status == Status.FAILED:
            fields.update(error)
        return fields

    def reap(self, row: Chunk, found: StoredResult | None, now: datetime) -> Fields:
        if row.attempts >= row.max_attempts:
            return {"status": ChunkStatus.FAILED, "owner": None, "finished_at": now, "error_type": "WorkerLost",
                    "error_message": f"attempt {row.attempts} stopped sending heartbeats; attempts exhausted"}
        return {"status": ChunkStatus.QUEUED, "owner": None, "queued_at": now,
                "error_type": "WorkerLost", "error_message": "stale heartbeat"}

    def retried(self, row: Chunk) -> bool:
        return row.status == ChunkStatus.QUEUED

    def requeue(self, row: Chunk, seen: Chunk, now: datetime) -> Fields | None:
        if row.status != ChunkStatus.QUEUED or row.queued_at != seen.queued_at:
            return None
        return {"queued_at": now}

    def postpone(self, row: Chunk, seen: Chunk, due: datetime) -> Fields | None:
        if row.status != ChunkStatus.QUEUED or row.attempts != seen.attempts:
            return None
        return {"queued_at": due if row.queued_at is None else max(row.queued_at, due)}


JOBS = JobRows()
CHUNKS = ChunkRows()


def kind_of(row: R) -> RowKind[R]:
    """The kind of a leased row, from its type."""
    return cast("RowKind[R]", JOBS if isinstance(row, Job) else CHUNKS)


__all__ = ["CHUNKS", "JOBS", "Ending", "RowKind", "StoredResult", "finish_from_stored", "kind_of"]
