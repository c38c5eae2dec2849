"""Chunks of a map stage: one entity each, in a partition of their job's own.

PartitionKey ``{tenant}~{job_id}`` (a tenant never contains ``~``), RowKey ``{stage}~{index:05d}``: a job's
chunks together and in order, so "the chunks of this stage" is one range query inside one partition, a chunk is
a point read, and retention deletes a job's chunks with one partition query. The tenant's own partition keeps
only its job rows and their bookkeeping, so a job listing reads no chunk row, the reaper's fetch of active jobs
(an ``or`` of RowKeys, which the service answers by scanning the partition) reads none either, and the chunk
writes of a tenant's fan-outs are spread over partitions instead of sharing the tenant's 2,000 entities/s. A
chunk has its own status, attempts, owner and heartbeat, claimed with the same ETag discipline as a job; no
transaction spans a job row and a chunk row.

The layout before 2026-12-07 (the tenant's partition, RowKey ``{job_id}~c~{stage}~{index:05d}``, right after the
job's own row, so a listing read every chunk of every job) is still read: :attr:`Chunk.legacy` says a row came
from there, and its writes go back there. ``shared.storage.chunk_store.ChunkStore.move_legacy`` moves such rows
once they can no longer change (see there).

Status: ``pending`` (waiting for a slot in the job's window), ``queued`` (has
a message), ``running``, then ``succeeded``, ``failed`` (attempts used up) or
``cancelled`` (the parent ended first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.config.constants import ERROR_MESSAGE_MAX_CHARS
from shared.core.jobs import _dt

KIND_CHUNK = "chunk"


class ChunkStatus(StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (ChunkStatus.SUCCEEDED, ChunkStatus.FAILED, ChunkStatus.CANCELLED)


def chunk_partition(tenant: str, job_id: str) -> str:
    """The PartitionKey of a job's chunks."""
    return f"{tenant}~{job_id}"


def chunk_row(stage: str, index: int) -> str:
    return f"{stage_prefix(stage)}{index:05d}"


def stage_prefix(stage: str) -> str:
    return f"{stage}~"


# The layout before (up to 2026-12-07): right after the job's row, so a job listing scanned every chunk of every job.
def legacy_chunk_row(job_id: str, stage: str, index: int) -> str:
    return f"{legacy_stage_prefix(job_id, stage)}{index:05d}"


def legacy_stage_prefix(job_id: str, stage: str) -> str:
    return f"{legacy_job_prefix(job_id)}{stage}~"


def legacy_job_prefix(job_id: str) -> str:
    return f"{job_id}~c~"


@dataclass(frozen=True)
class Chunk:
    tenant: str
    job_id: str
    stage: str
    index: int
    status: ChunkStatus
    items: int
    fn_ref: str
    #: How many chunks the stage has, and a fingerprint of how the input was split.
    of: int = 1
    plan: str = ""
    #: Fraction of the stage's items that may fail before the whole job fails.
    budget: float = 0.0
    attempts: int = 0
    max_attempts: int = 3
    input_inline: bytes | None = None
    input_blob: str | None = None
    output_blob: str | None = None
    owner: str | None = None
    heartbeat_at: datetime | None = None
    queued_at: datetime | None = None
    finished_at: datetime | None = None
    processed: int = 0
    error_type: str = ""
    error_message: str = ""
    #: Token of the lifecycle write that last changed the row (see ``Job.op``).
    op: str | None = None
    etag: str | None = None
    #: Read from the layout before (``legacy_chunk_row``): its writes go to that row until it is moved.
    legacy: bool = False

    @property
    def partition_key(self) -> str:
        return self.tenant if self.legacy else chunk_partition(self.tenant, self.job_id)

    @property
    def row_key(self) -> str:
        if self.legacy:
            return legacy_chunk_row(self.job_id, self.stage, self.index)
        return chunk_row(self.stage, self.index)

    def with_changes(self, **changes: Any) -> Chunk:
        return replace(self, **changes)

    def to_entity(self) -> dict[str, Any]:
        e: dict[str, Any] = {
            "PartitionKey": self.partition_key,
            "RowKey": self.row_key,
            "kind": KIND_CHUNK,
            "job_id": self.job_id,
            "stage": self.stage,
            "index": self.index,
            "status": self.status.value,
            "items": self.items,
            "fn_ref": self.fn_ref,
            "of": self.of,
            "plan": self.plan,
            "budget": self.budget,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "processed": self.processed,
            "error_type": self.error_type,
            "error_message": self.error_message[:ERROR_MESSAGE_MAX_CHARS],
        }
        for key in (
            "input_inline", "input_blob", "output_blob", "owner", "heartbeat_at", "queued_at", "finished_at", "op"
        ):
            value = getattr(self, key)
            if value is not None:
                e[key] = value
        return e

    @classmethod
    def from_entity(cls, e: Any) -> Chunk:
        meta = getattr(e, "metadata", None) or {}
        partition = str(e["PartitionKey"])
        return cls(
            tenant=partition.split("~", 1)[0],
            job_id=e["job_id"],
            stage=e["stage"],
            index=int(e["index"]),
            status=ChunkStatus(e["status"]),
            items=int(e.get("items", 0)),
            fn_ref=e.get("fn_ref", ""),
            of=int(e.get("of", 1)),
            plan=e.get("plan", ""),
            budget=float(e.get("budget", 0.0)),
            attempts=int(e.get("attempts", 0)),
            max_attempts=int(e.get("max_attempts", 3)),
            input_inline=e.get("input_inline"),
            input_blob=e.get("input_blob") or None,
            output_blob=e.get("output_blob") or None,
            owner=e.get("owner") or None,
            heartbeat_at=_dt(e.get("heartbeat_at") or None),
            queued_at=_dt(e.get("queued_at") or None),
            finished_at=_dt(e.get("finished_at") or None),
            processed=int(e.get("processed", 0)),
            error_type=e.get("error_type", ""),
            error_message=e.get("error_message", ""),
            op=e.get("op") or None,
            etag=meta.get("etag"),
            legacy="~" not in partition,
        )


@dataclass
class MoveReport:
    """What one ``move_legacy`` run did with the chunk rows of the layout before it found."""

    moved: int = 0
    #: Chunks of a job that had ended, never started (``pending``/``queued``): cancelled where they were, then moved.
    cancelled: int = 0
    #: Still in the old layout: a chunk of a job still going (it moves once it has finished), or one that changed
    #: while being moved. Readers still read them; the next run tries again.
    left: int = 0
    #: Rows that cannot be read as a chunk (a hand edit): logged and left where they are, for an operator; they do not
    #: keep the sweep looking.
    unreadable: int = 0
