"""The job record: what a job is, its life cycle, and how it maps to a Table entity."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from shared.config.constants import ERROR_MESSAGE_MAX_CHARS, KIND_JOB


class WebhookStatus(StrEnum):
    """How a job's completion webhook stands (``callback.status``; ``shared.runtime.webhooks`` moves it)."""

    PENDING = "pending"
    RETRYING = "retrying"
    DELIVERED = "delivered"
    FAILED = "failed"

    @property
    def settled(self) -> bool:
        return self in (WebhookStatus.DELIVERED, WebhookStatus.FAILED)

    @classmethod
    def of(cls, job: Job) -> WebhookStatus:
        """The job's webhook status (a row without one has not been attempted: pending)."""
        return cls(job.callback_status) if job.callback_status else cls.PENDING


class Status(StrEnum):
    """Where a job is in its life.

    ``queued``    accepted and committed; a message is on the queue.
    ``running``   claimed by a worker, which renews ``heartbeat_at``.
    ``retrying``  an attempt failed transiently; the next one is due at ``available_at``.
    ``waiting``   the attempt fanned a map stage out into chunks and released its
                  worker; the last chunk to finish wakes it (see ``shared.runtime.fanout``).
    ``succeeded`` terminal: the result is in the row (small) or in Blob Storage.
    ``failed``    terminal: ``error`` says why.
    ``cancelled`` terminal: cancelled by the client.
    """

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def claimable(self) -> bool:
        return self in (Status.QUEUED, Status.RETRYING)


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})


#: The platform's clock. Every timestamp a transition writes, and every staleness the reaper
#: judges, comes from here, so the fast test tier can move time instead of sleeping.
_clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


def utcnow() -> datetime:
    return _clock()


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """Replace the clock (tests); None restores real time."""
    global _clock
    _clock = clock or (lambda: datetime.now(UTC))


_last_id_ms = 0
_id_lock = threading.Lock()


def new_job_id(now_ms: int | None = None) -> str:
    """28 hex digits; ids sort newest first within a partition (inverted time prefix).

    Without ``now_ms``, a process's ids are strictly ordered by the call: a second id in the same millisecond takes
    the next one (at most a few ms ahead of the clock in a burst). The fair-share wait list orders a tenant's parked
    jobs by this prefix (``fairness.wait_order``), and two submissions in one millisecond were ordered by the
    random suffix, so the later could run first."""
    global _last_id_ms
    if now_ms is None:
        with _id_lock:
            now_ms = _last_id_ms = max(int(time.time() * 1000), _last_id_ms + 1)
    return f"{(0xFFFFFFFFFFFF - now_ms) & 0xFFFFFFFFFFFF:012x}{secrets.token_hex(8)}"


@dataclass(frozen=True)
class Progress:
    stage: str = ""
    processed: int = 0
    total: int | None = None
    message: str = ""


@dataclass(frozen=True)
class JobError:
    type: str
    message: str

    @classmethod
    def of(cls, type_: str, message: str) -> JobError:
        return cls(type_, message[:ERROR_MESSAGE_MAX_CHARS])


def _dt(value: Any) -> datetime | None:
    # MERGE cannot remove a property, so a cleared datetime is stored as "" and reads back as None.
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        # The SDK returns its own datetime subclass; normalise to a plain aware UTC datetime.
        return datetime.fromtimestamp(value.timestamp(), UTC)
    raise TypeError(f"expected datetime, got {type(value).__name__}")


def _required_dt(value: Any) -> datetime:
    dt = _dt(value)
    if dt is None:
        raise TypeError("a required datetime is missing")
    return dt


def _opt_int(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


@dataclass(frozen=True)
class Job:
    """One job, as stored in the jobs table (PartitionKey = tenant, RowKey = id)."""

    tenant: str
    id: str
    pipeline: str
    status: Status
    params: dict[str, Any]
    created_at: datetime
    available_at: datetime
    max_attempts: int
    attempts: int = 0
    input_inline: bytes | None = None
    input_blob: str | None = None
    input_bytes: int = 0
    request_hash: str = ""
    idempotency_row: str | None = None
    owner: str | None = None
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None
    progress: Progress = field(default_factory=Progress)
    error: JobError | None = None
    cancel_requested: bool = False
    result_blob: str | None = None
    result_bytes: int | None = None
    #: A small result (at most ``RESULT_INLINE_MAX_BYTES``) kept in the row instead of a blob;
    #: ``result_blob`` still names the attempt's result, which is how "this attempt stored it" is told.
    result_inline: bytes | None = None
    usage: dict[str, float] = field(default_factory=dict)
    traceparent: str | None = None
    requeues: int = 0
    #: The map stage the job is waiting for, and how often a fan-in woke it.
    wait_stage: str | None = None
    fan_ins: int = 0
    fan_in_at: datetime | None = None
    #: Token of the lifecycle write that last changed the row: how a writer whose answer was lost
    #: recognises, on re-reading, that its own write landed (``shared.core.conditional``).
    op: str | None = None
    #: Completion webhook (shared.runtime.webhooks): the URL, and how its delivery stands
    #: (``pending``, ``retrying``, ``delivered``, ``failed``), after how many attempts, the last error.
    callback_url: str | None = None
    callback_status: WebhookStatus | None = None
    callback_attempts: int = 0
    callback_error: str | None = None
    #: This failure's message is owed a copy in the poison queue (``Ending.poison``), written with the FAILED
    #: status, so a redelivery of that message sends the copy its first delivery may not have made. Never cleared
    #: (that would cost every failed job a write): the copy is sent at least once.
    poison_copy: bool = False
    #: ETag of the entity this value was read from; never stored.
    etag: str | None = field(default=None, compare=False)
    #: From the job's active-index row, not the job row (``JobRepo.active``): the ``available_at`` of a
    #: message whose send failed (``Lifecycle._enqueue``). While it still equals ``available_at`` the reaper's
    #: next index run re-sends the message once it is due, instead of waiting ``QUEUED_STALE_SECONDS``.
    unsent_for: datetime | None = field(default=None, compare=False)

    def with_changes(self, **changes: Any) -> Job:
        return replace(self, **changes)

    @property
    def in_queue_only(self) -> bool:
        """``queued`` and never claimed (``started_at`` unset; a released claim keeps it): the job's message
        is its record, and it has no active-index row unless its send failed (``JobRepo.index_job``)."""
        return self.status is Status.QUEUED and self.started_at is None

    # -- Table mapping -------------------------------------------------------
    def to_entity(self) -> dict[str, Any]:
        e: dict[str, Any] = {
            "PartitionKey": self.tenant,
            "RowKey": self.id,
            "kind": KIND_JOB,
            "pipeline": self.pipeline,
            "status": self.status.value,
            "params": json.dumps(self.params, separators=(",", ":")),
            "created_at": self.created_at,
            "available_at": self.available_at,
            "max_attempts": self.max_attempts,
            "attempts": self.attempts,
            "input_bytes": self.input_bytes,
            "request_hash": self.request_hash,
            "cancel_requested": self.cancel_requested,
            "requeues": self.requeues,
            "fan_ins": self.fan_ins,
        }
        optional = {
            "input_inline": self.input_inline,
            "input_blob": self.input_blob,
            "idempotency_row": self.idempotency_row,
            "owner": self.owner,
            "started_at": self.started_at,
            "heartbeat_at": self.heartbeat_at,
            "finished_at": self.finished_at,
            "result_blob": self.result_blob,
            "result_bytes": self.result_bytes,
            "result_inline": self.result_inline,
            "traceparent": self.traceparent,
            "wait_stage": self.wait_stage,
            "fan_in_at": self.fan_in_at,
            "op": self.op,
            "callback_url": self.callback_url,
            "callback_status": self.callback_status,
            "callback_error": self.callback_error,
            "poison_copy": True if self.poison_copy else None,
        }
        if self.callback_attempts:
            e["callback_attempts"] = self.callback_attempts
        e.update({k: v for k, v in optional.items() if v is not None})
        e.update(progress_fields(self.progress))
        e.update(error_fields(self.error))
        if self.usage:
            e["usage"] = json.dumps(self.usage, separators=(",", ":"))
        return e

    def snapshot(self) -> dict[str, Any]:
        """The row as stored, JSON-safe (datetimes and bytes tagged): what the first message carries."""
        out: dict[str, Any] = {}
        for key, value in self.to_entity().items():
            if isinstance(value, datetime):
                out[key] = {"$dt": value.isoformat()}
            elif isinstance(value, bytes | bytearray):
                out[key] = {"$b": base64.b64encode(bytes(value)).decode("ascii")}
            else:
                out[key] = value
        return out

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any], etag: str) -> Job:
        """The row a :meth:`snapshot` describes, as of ``etag`` (a conditional write on it proves it is current)."""
        entity: dict[str, Any] = {}
        for key, value in snapshot.items():
            if isinstance(value, dict) and "$dt" in value:
                entity[key] = datetime.fromisoformat(value["$dt"])
            elif isinstance(value, dict) and "$b" in value:
                entity[key] = base64.b64decode(value["$b"])
            else:
                entity[key] = value
        return cls.from_entity(entity).with_changes(etag=etag)

    @classmethod
    def from_entity(cls, e: Any) -> Job:
        metadata = getattr(e, "metadata", None) or {}
        total = e.get("progress_total")
        error = JobError(e["error_type"], e.get("error_message", "")) if e.get("error_type") else None
        return cls(
            tenant=e["PartitionKey"],
            id=e["RowKey"],
            pipeline=e["pipeline"],
            status=Status(e["status"]),
            params=json.loads(e.get("params") or "{}"),
            created_at=_required_dt(e["created_at"]),
            available_at=_required_dt(e.get("available_at") or e["created_at"]),
            max_attempts=int(e.get("max_attempts", 1)),
            attempts=int(e.get("attempts", 0)),
            input_inline=e.get("input_inline"),
            input_blob=e.get("input_blob") or None,
            input_bytes=int(e.get("input_bytes", 0)),
            request_hash=e.get("request_hash", ""),
            idempotency_row=e.get("idempotency_row") or None,
            owner=e.get("owner") or None,
            started_at=_dt(e.get("started_at")),
            heartbeat_at=_dt(e.get("heartbeat_at")),
            finished_at=_dt(e.get("finished_at")),
            progress=Progress(
                stage=e.get("progress_stage", ""),
                processed=int(e.get("progress_processed", 0)),
                total=None if total is None or total < 0 else int(total),
                message=e.get("progress_message", ""),
            ),
            error=error,
            cancel_requested=bool(e.get("cancel_requested", False)),
            result_blob=e.get("result_blob") or None,
            result_bytes=_opt_int(e.get("result_bytes")),
            result_inline=e.get("result_inline") or None,
            usage=json.loads(e["usage"]) if e.get("usage") else {},
            traceparent=e.get("traceparent") or None,
            requeues=int(e.get("requeues", 0)),
            wait_stage=e.get("wait_stage") or None,
            fan_ins=int(e.get("fan_ins", 0)),
            fan_in_at=_dt(e.get("fan_in_at") or None),
            op=e.get("op") or None,
            callback_url=e.get("callback_url") or None,
            callback_status=WebhookStatus(e["callback_status"]) if e.get("callback_status") else None,
            callback_attempts=int(e.get("callback_attempts", 0)),
            callback_error=e.get("callback_error") or None,
            poison_copy=bool(e.get("poison_copy")),
            etag=metadata.get("etag"),
        )


def progress_fields(p: Progress) -> dict[str, Any]:
    return {
        "progress_stage": p.stage[:200],
        "progress_processed": int(p.processed),
        # Table properties cannot be null; -1 stands for "unknown total".
        "progress_total": -1 if p.total is None else int(p.total),
        "progress_message": p.message[:500],
    }


def error_fields(err: JobError | None) -> dict[str, Any]:
    if err is None:
        return {"error_type": "", "error_message": ""}
    return {"error_type": err.type[:200], "error_message": err.message[:ERROR_MESSAGE_MAX_CHARS]}
