"""Chunks of a map stage: one entity each, in the parent job's partition.

RowKey ``{job_id}~c~{stage}~{index:05d}`` keeps a job's chunks together and in
order, so "the chunks of this stage" is one range query inside one partition.
A chunk has its own status, attempts, owner and heartbeat, claimed with the
same ETag discipline as a job.

Status: ``pending`` (waiting for a slot in the job's window), ``queued`` (has
a message), ``running``, then ``succeeded``, ``failed`` (attempts used up) or
``cancelled`` (the parent ended first).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, UpdateMode

from shared.connections import get_table_client
from shared.constants import ERROR_MESSAGE_MAX_CHARS
from shared.jobs import _dt
from shared.storage_errors import storage_call

KIND_CHUNK = "chunk"
_BATCH = 100  # entity-group transactions hold at most 100 entities


def _prefix_range(prefix: str) -> dict[str, str]:
    """``lo``/``hi`` bounds of the RowKeys that start with ``prefix`` (for ``RowKey ge @lo and RowKey lt @hi``)."""
    return {"lo": prefix, "hi": prefix[:-1] + chr(ord(prefix[-1]) + 1)}


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


def chunk_row(job_id: str, stage: str, index: int) -> str:
    return f"{job_id}~c~{stage}~{index:05d}"


def stage_prefix(job_id: str, stage: str) -> str:
    return f"{job_id}~c~{stage}~"


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
    etag: str | None = None

    @property
    def row_key(self) -> str:
        return chunk_row(self.job_id, self.stage, self.index)

    def with_changes(self, **changes: Any) -> Chunk:
        return replace(self, **changes)

    def to_entity(self) -> dict[str, Any]:
        e: dict[str, Any] = {
            "PartitionKey": self.tenant,
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
        for key in ("input_inline", "input_blob", "output_blob", "owner", "heartbeat_at", "queued_at", "finished_at"):
            value = getattr(self, key)
            if value is not None:
                e[key] = value
        return e

    @classmethod
    def from_entity(cls, e: Any) -> Chunk:
        meta = getattr(e, "metadata", None) or {}
        return cls(
            tenant=e["PartitionKey"],
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
            etag=meta.get("etag"),
        )


# Columns for fan-in checks and progress: everything but the inline input.
_SUMMARY = [
    "PartitionKey",
    "RowKey",
    "kind",
    "job_id",
    "stage",
    "index",
    "status",
    "items",
    "fn_ref",
    "of",
    "plan",
    "budget",
    "attempts",
    "max_attempts",
    "output_blob",
    "owner",
    "heartbeat_at",
    "queued_at",
    "finished_at",
    "processed",
    "error_type",
    "error_message",
    "input_blob",
]


class ChunkStore:
    def __init__(self, table: TableClient | None = None) -> None:
        self._table = table

    @property
    def table(self) -> TableClient:
        return self._table or get_table_client()

    def create_all(self, chunks: Iterable[Chunk]) -> int:
        """Insert chunks in entity-group transactions of up to 100 (upserts, so a replay is harmless)."""
        batch: list[Any] = []
        calls = 0
        for chunk in chunks:
            batch.append(("upsert", chunk.to_entity(), {"mode": UpdateMode.REPLACE}))
            if len(batch) == _BATCH:
                calls += self._submit(batch)
                batch = []
        if batch:
            calls += self._submit(batch)
        return calls

    def _submit(self, batch: list[Any]) -> int:
        with storage_call("create chunks"):
            self.table.submit_transaction(batch)
        return 1

    def get(self, tenant: str, job_id: str, stage: str, index: int, *, with_input: bool = False) -> Chunk:
        with storage_call("read chunk"):
            e = self.table.get_entity(tenant, chunk_row(job_id, stage, index), select=None if with_input else _SUMMARY)
        return Chunk.from_entity(e)

    def list_stage(self, tenant: str, job_id: str, stage: str) -> list[Chunk]:
        """Every chunk of one stage: a range query inside the job's partition."""
        prefix = stage_prefix(job_id, stage)
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        params = {"pk": tenant, **_prefix_range(prefix)}
        with storage_call("list chunks"):
            return [Chunk.from_entity(e) for e in self.table.query_entities(query, parameters=params, select=_SUMMARY)]

    def update(self, chunk: Chunk, **changes: Any) -> Chunk:
        """Conditional MERGE of ``changes``; raises EtagMismatch if the chunk changed since it was read."""
        props: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "status":
                props[key] = value.value
            elif value is None:
                props[key] = ""
            else:
                props[key] = value
        entity = {"PartitionKey": chunk.tenant, "RowKey": chunk.row_key, **props}
        with storage_call("update chunk"):
            meta = self.table.update_entity(
                entity, mode=UpdateMode.MERGE, etag=chunk.etag, match_condition=MatchConditions.IfNotModified
            )
        return chunk.with_changes(**changes, etag=meta.get("etag"))

    def scan(self, query: str, parameters: dict[str, Any]) -> list[Chunk]:
        with storage_call("scan chunks"):
            return [
                Chunk.from_entity(e)
                for e in self.table.query_entities(
                    f"kind eq '{KIND_CHUNK}' and ( {query} )", parameters=parameters, select=_SUMMARY
                )
            ]

    def delete_job_chunks(self, tenant: str, job_id: str) -> int:
        """Delete every chunk row of a job (retention), in transactions of up to 100."""
        prefix = f"{job_id}~c~"
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        params = {"pk": tenant, **_prefix_range(prefix)}
        with storage_call("delete chunks"):
            rows = [
                {"PartitionKey": tenant, "RowKey": e["RowKey"]}
                for e in self.table.query_entities(query, parameters=params, select=["RowKey"])
            ]
            for start in range(0, len(rows), _BATCH):
                self.table.submit_transaction([("delete", r) for r in rows[start : start + _BATCH]])
        return len(rows)
