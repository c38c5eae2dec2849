"""The job record: what a job is, its life cycle, and how it maps to a Table entity."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from shared.constants import ERROR_MESSAGE_MAX_CHARS, KIND_JOB


class Status(StrEnum):
    """Where a job is in its life.

    ``queued``    accepted and committed; a message is on the queue.
    ``running``   claimed by a worker, which renews ``heartbeat_at``.
    ``retrying``  an attempt failed transiently; the next one is due at ``available_at``.
    ``waiting``   the attempt fanned a map stage out into chunks and released its
                  worker; the last chunk to finish wakes it (see ``shared.fanout``).
    ``succeeded`` terminal: the result is in Blob Storage.
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


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_job_id(now_ms: int | None = None) -> str:
    """28 hex digits; ids sort newest first within a partition (inverted time prefix)."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{(0xFFFFFFFFFFFF - ms) & 0xFFFFFFFFFFFF:012x}{secrets.token_hex(8)}"


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
    if value is None:
        return None
    if isinstance(value, datetime):
        # The SDK returns its own datetime subclass; normalise to a plain aware UTC datetime.
        return datetime.fromtimestamp(value.timestamp(), UTC)
    raise TypeError(f"expected datetime, got {type(value).__name__}")


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
    usage: dict[str, float] = field(default_factory=dict)
    traceparent: str | None = None
    requeues: int = 0
    #: The map stage the job is waiting for, and how often a fan-in woke it.
    wait_stage: str | None = None
    fan_ins: int = 0
    fan_in_at: datetime | None = None
    #: ETag of the entity this value was read from; never stored.
    etag: str | None = field(default=None, compare=False)

    def with_changes(self, **changes: Any) -> Job:
        return replace(self, **changes)

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
            "traceparent": self.traceparent,
            "wait_stage": self.wait_stage,
            "fan_in_at": self.fan_in_at,
        }
        e.update({k: v for k, v in optional.items() if v is not None})
        e.update(progress_fields(self.progress))
        e.update(error_fields(self.error))
        if self.usage:
            e["usage"] = json.dumps(self.usage, separators=(",", ":"))
        return e

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
            created_at=_dt(e["created_at"]),  # type: ignore[arg-type]
            available_at=_dt(e.get("available_at") or e["created_at"]),  # type: ignore[arg-type]
            max_attempts=int(e.get("max_attempts", 1)),
            attempts=int(e.get("attempts", 0)),
            input_inline=e.get("input_inline"),
            input_blob=e.get("input_blob"),
            input_bytes=int(e.get("input_bytes", 0)),
            request_hash=e.get("request_hash", ""),
            idempotency_row=e.get("idempotency_row"),
            owner=e.get("owner"),
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
            result_blob=e.get("result_blob"),
            result_bytes=e.get("result_bytes"),
            usage=json.loads(e["usage"]) if e.get("usage") else {},
            traceparent=e.get("traceparent"),
            requeues=int(e.get("requeues", 0)),
            wait_stage=e.get("wait_stage") or None,
            fan_ins=int(e.get("fan_ins", 0)),
            fan_in_at=_dt(e.get("fan_in_at") or None),
            etag=metadata.get("etag"),
        )

    # -- API view ------------------------------------------------------------
    def to_public(self, base_path: str) -> dict[str, Any]:
        """The JSON the API returns. Leaves out storage details and the input."""
        self_link = f"{base_path}/jobs/{self.id}"
        links = {"self": self_link, "cancel": f"{self_link}/cancel"}
        if self.status == Status.SUCCEEDED:
            links["result"] = f"{self_link}/result"
        return {
            "id": self.id,
            "pipeline": self.pipeline,
            "status": self.status.value,
            "params": self.params,
            "progress": asdict(self.progress),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "cancel_requested": self.cancel_requested,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "heartbeat_at": _iso(self.heartbeat_at),
            "finished_at": _iso(self.finished_at),
            "error": asdict(self.error) if self.error else None,
            "usage": self.usage,
            "input_bytes": self.input_bytes,
            "result_bytes": self.result_bytes,
            "links": links,
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


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
