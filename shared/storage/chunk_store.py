"""Chunk rows in Table Storage, in the parent job's partition (the model and its row keys: ``shared.core.chunks``).

A stage's chunks are one range query inside one partition; they are inserted in
entity-group transactions and never overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.core.chunks import KIND_CHUNK, Chunk, chunk_row, stage_prefix
from shared.core.errors import AlreadyExists
from shared.storage.connections import get_table_client
from shared.storage.errors import storage_call
from shared.storage.keys import prefix_range

log = logging.getLogger(__name__)
_BATCH = 100  # entity-group transactions hold at most 100 entities


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
    "op",
]


class ChunkStore:
    def __init__(self, table: TableClient | None = None) -> None:
        self._table = table

    @property
    def table(self) -> TableClient:
        return self._table or get_table_client()

    def create_all(self, chunks: Iterable[Chunk]) -> int:
        """Insert chunks in entity-group transactions of up to 100.

        Inserts, never upserts: a replace would reset a chunk that another writer already
        ran to ``pending`` and drop its output. A batch that hits an existing chunk fails
        whole with AlreadyExists; the lifecycle re-lists and inserts only what is missing.
        """
        batch: list[Any] = []
        calls = 0
        for chunk in chunks:
            batch.append(("create", chunk.to_entity()))
            if len(batch) == _BATCH:
                calls += self._submit(batch)
                batch = []
        if batch:
            calls += self._submit(batch)
        return calls

    def _submit(self, batch: list[Any]) -> int:
        with storage_call("create chunks"):
            try:
                self.table.submit_transaction(batch)
            except TableTransactionError as err:
                if err.status_code == 409:
                    raise AlreadyExists("a chunk of the batch exists") from err
                raise
        return 1

    def get(self, tenant: str, job_id: str, stage: str, index: int, *, with_input: bool = False) -> Chunk:
        with storage_call("read chunk"):
            e = self.table.get_entity(tenant, chunk_row(job_id, stage, index), select=None if with_input else _SUMMARY)
        return Chunk.from_entity(e)

    def list_stage(self, tenant: str, job_id: str, stage: str) -> list[Chunk]:
        """Every chunk of one stage: a range query inside the job's partition."""
        prefix = stage_prefix(job_id, stage)
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        params = {"pk": tenant, **prefix_range(prefix)}
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
        out: list[Chunk] = []
        with storage_call("scan chunks"):
            for e in self.table.query_entities(
                f"kind eq '{KIND_CHUNK}' and ( {query} )", parameters=parameters, select=_SUMMARY
            ):
                try:
                    out.append(Chunk.from_entity(e))
                except (KeyError, TypeError, ValueError) as err:
                    # One unreadable row must not stop chunk recovery for every tenant.
                    log.error("skipping unreadable chunk row %s/%s (%s)", e.get("PartitionKey"), e.get("RowKey"),
                              type(err).__name__)
        return out

    def delete_job_chunks(self, tenant: str, job_id: str) -> int:
        """Delete every chunk row of a job (retention), in transactions of up to 100."""
        prefix = f"{job_id}~c~"
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        params = {"pk": tenant, **prefix_range(prefix)}
        with storage_call("delete chunks"):
            rows = [
                {"PartitionKey": tenant, "RowKey": e["RowKey"]}
                for e in self.table.query_entities(query, parameters=params, select=["RowKey"])
            ]
            for start in range(0, len(rows), _BATCH):
                part = rows[start : start + _BATCH]
                try:
                    self.table.submit_transaction([("delete", r) for r in part])
                except TableTransactionError as err:
                    if err.status_code != 404:
                        raise
                    # A row of the batch is gone: a batch that committed, was answered 5xx and retried by the SDK
                    # (or a delete racing this one). Gone is what was asked: delete the rest one by one.
                    for r in part:
                        self.table.delete_entity(r["PartitionKey"], r["RowKey"])
        return len(rows)
