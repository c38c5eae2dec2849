"""What the lifecycle needs from storage, as protocols: the stores are injected, never built here.

``shared.storage`` implements these on the Azure SDK clients, or on the in-memory
fake (``shared.storage.fake``) for the fast test tier. Every method raises the
domain errors of ``shared.core.errors``: ``EtagMismatch`` (412), ``AlreadyExists``
(409), ``NotFound``, and ``StorageUnavailable`` for a call whose outcome is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.core.chunks import Chunk, MoveReport
from shared.core.jobs import Job
from shared.core.messages import ChunkMessage, JobMessage
from shared.core.webhooks import WebhookMessage


@dataclass(frozen=True)
class TenantMark:
    """A tenant's row among the busy tenants (``~busy-{tenant}``): the ETag it was read with, or gone."""

    tenant: str
    etag: str | None
    op: str | None = None
    gone: bool = False
    #: When the marking process named it busy (its clock); None on a row without it.
    marked_at: datetime | None = None


@dataclass(frozen=True)
class IndexState:
    """What the reaper reads first on every run (``JobRepo.index_state``)."""

    #: The tenants an index run looks at: the busy ones (``marks``), or, until the busy tenants were first
    #: recorded (``busy_seeded``), every tenant that ever submitted.
    tenants: tuple[str, ...]
    #: When a full sweep last finished, on any instance; None if never.
    swept_at: datetime | None
    #: When a sweep last found no chunk row of the layout before left to move (``ChunkRepo.move_legacy``).
    chunks_moved_at: datetime | None = None
    #: The busy tenants' rows as read, by tenant (what the reaper's conditional removal of an idle one is on).
    marks: Mapping[str, TenantMark] = field(default_factory=dict)
    #: Whether the busy tenants have been recorded once (``JobRepo.mark_busy_seeded``); until then ``tenants``
    #: names every tenant and the reaper marks the busy ones.
    busy_seeded: bool = True
    #: Whether the one full listing of the container that finds the orphans of the layout before (inputs in their
    #: job's folder, folders of an expiry cut off before retention kept a journal) has run (platform45).
    orphans_dated: bool = True


class JobRepo(Protocol):
    def create(self, job: Job, idempotency_key: str | None = None) -> Job:
        """Insert the job (with its idempotency row, in one transaction). Raises AlreadyExists."""

    def idempotency_target(self, tenant: str, key: str) -> tuple[str, str] | None:
        """``(job_id, request_hash)`` recorded for an Idempotency-Key, or None."""

    def get(self, tenant: str, job_id: str, *, with_input: bool = False) -> Job: ...

    def update(self, job: Job, **changes: Any) -> Job:
        """MERGE ``changes`` if the row still has ``job.etag``; raises EtagMismatch otherwise."""

    def list(
        self, tenant: str, *, status: str | None, pipeline: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Job], str | None]: ...

    def scan(self, query: str, parameters: dict[str, Any], *, with_input: bool = False) -> Iterator[Job]:
        """Jobs of every tenant matching an OData filter; rows that cannot be read are skipped and logged."""

    def index_state(self) -> IndexState:
        """The busy tenants, and when the reaper last swept: one range query of the tenants partition (two until
        the busy tenants were first recorded, the second listing every tenant)."""

    def every_tenant(self) -> tuple[str, ...]:
        """Every tenant that ever submitted (one query of the tenants partition's tenant rows): the daily move only."""

    def active(
        self, tenants: Iterable[str], on_error: Callable[[str, Exception], None],
        on_idle: Callable[[str], None] | None = None,
    ) -> Iterator[Job]:
        """The unfinished jobs of ``tenants``, through the active-jobs index (no cross-partition scan).

        A tenant whose index cannot be read is reported to ``on_error`` and skipped: it never hides the others.
        ``on_idle`` hears of each tenant whose index, read after this call began, named no unfinished job.
        """

    def has_active(self, tenant: str) -> bool:
        """Whether the tenant's active-jobs index has any row (one range query, at most one row back)."""

    def mark_busy(self, tenant: str, at: datetime | None = None) -> None:
        """Name the tenant among the busy ones at ``at`` (now by default): an upsert, so it also changes the row's ETag."""

    def busy_mark(self, tenant: str) -> TenantMark:
        """The tenant's busy row (a point read); ``gone`` if it has none."""

    def unmark_busy(self, mark: TenantMark) -> TenantMark:
        """Remove the tenant's busy row if it still has ``mark.etag``: EtagMismatch if it changed; gone if it is."""

    def mark_busy_seeded(self, at: datetime) -> None:
        """Record that the busy tenants are recorded: index runs read only them from then on."""

    def mark_orphans_dated(self, at: datetime) -> None:
        """Record that the full listing for orphans of the layout before has run: sweeps list by day from then on."""

    def index_job(self, tenant: str, job_id: str, unsent_for: datetime | None = None) -> None:
        """Index a job whose message may not exist (idempotent; a stray is removed later).

        ``unsent_for``: its message's send is known to have failed for the row whose ``available_at`` this is;
        ``active`` reports it as ``Job.unsent_for``, so the next index run re-sends the message once due.
        """

    def reindex(self, jobs: Iterable[Job]) -> int:
        """Give unfinished jobs without an index row (written before the index existed) one; how many got one."""

    def existing(self, tenant: str, job_ids: Iterable[str]) -> set[str]:
        """Which of ``job_ids`` have a job row in ``tenant`` (a few ids per query, the RowKeys only)."""

    def mark_chunks_moved(self, at: datetime | None) -> None:
        """Record that no tenant has chunk rows of the layout before left (the sweep stops looking); None: look again."""

    def mark_swept(self, at: datetime) -> None:
        """Record that a full sweep finished at ``at`` (what ``index_state`` reports next)."""

    def delete(self, job: Job) -> None: ...


class ChunkRepo(Protocol):
    def create_all(self, chunks: Iterable[Chunk]) -> int:
        """Insert chunks (never overwrite). Raises AlreadyExists if any of a batch exists."""

    def get(self, tenant: str, job_id: str, stage: str, index: int, *, with_input: bool = False) -> Chunk: ...

    def list_stage(self, tenant: str, job_id: str, stage: str) -> list[Chunk]: ...

    def update(self, chunk: Chunk, **changes: Any) -> Chunk: ...

    def scan(self, query: str, parameters: dict[str, Any]) -> list[Chunk]: ...

    def delete_job_chunks(self, tenant: str, job_id: str) -> int: ...

    def delete_job_partition(self, tenant: str, job_id: str) -> int:
        """Delete the chunk rows in the job's own partition only (retention's second look while the move runs)."""

    def move_legacy(self, tenant: str) -> MoveReport:
        """Move the tenant's chunk rows of the layout before into their jobs' partitions (``shared.core.chunks``)."""


class Messages(Protocol):
    def send(self, message: JobMessage | ChunkMessage | WebhookMessage, delay: timedelta | None = None) -> None:
        """A job message to the jobs queue, a chunk message to the chunks queue, a webhook delivery to the
        callbacks queue (optionally delayed)."""

    def send_poison(self, text: str, queue: str | None = None) -> None: ...

    def oldest_visible(self, queue: str | None = None) -> datetime | None:
        """Insertion time of the oldest visible message of a queue (the jobs queue by default), or None if empty."""

    def depth(self, queue: str | None = None) -> int:
        """Approximate number of messages in a queue (the jobs queue by default)."""


class Blobs(Protocol):
    def put(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None: ...

    def get(self, name: str) -> bytes: ...

    def get_optional(self, name: str) -> bytes | None: ...

    def size(self, name: str) -> int | None:
        """The blob's size, or None if it does not exist."""

    def delete_prefix(self, prefix: str, also: Iterable[str] = ()) -> int:
        """Delete every blob under ``prefix`` and the blobs named in ``also`` (gone already is deleted)."""

    def written(self, prefix: str | None = None) -> list[tuple[str, datetime]]:
        """Every blob's name (under ``prefix``) and when it was last written (one listing)."""


@dataclass(frozen=True)
class Stores:
    """Everything stateful the platform touches, injected as one value."""

    jobs: JobRepo
    chunks: ChunkRepo
    messages: Messages
    blobs: Blobs
