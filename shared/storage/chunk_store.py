"""Chunk rows in Table Storage, in the parent job's partition (the model and its row keys: ``shared.core.chunks``).

A stage's chunks are one range query inside one partition, in a RowKey range of their own past the tenant's job
rows; they are inserted in entity-group transactions and never overwritten. Rows of the layout before (right after
their job's row) are read too, until :meth:`ChunkStore.move_legacy` has moved them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.config.constants import JOB_ROWS_END
from shared.core.chunks import (
    KIND_CHUNK,
    Chunk,
    MoveReport,
    chunk_row,
    job_prefix,
    legacy_chunk_row,
    legacy_job_prefix,
    legacy_stage_prefix,
    stage_prefix,
)
from shared.core.errors import AlreadyExists, EtagMismatch, NotFound, StorageError, StorageUnavailable
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
        """One chunk: a point read; a second one at the layout before if the first finds nothing."""
        select = None if with_input else _SUMMARY
        try:
            with storage_call("read chunk"):
                e = self.table.get_entity(tenant, chunk_row(job_id, stage, index), select=select)
        except NotFound:
            with storage_call("read chunk"):
                e = self.table.get_entity(tenant, legacy_chunk_row(job_id, stage, index), select=select)
        return Chunk.from_entity(e)

    def list_stage(self, tenant: str, job_id: str, stage: str) -> list[Chunk]:
        """Every chunk of one stage, by index: a range query inside the job's partition.

        A stage found whole (as many rows as its chunks say it has) is one query. One found short or not at all
        (a stage being created, or one written in the layout before) is looked for in the old range too, a second
        range query; a chunk found in both (only a writer of the old code beside the new could make one) is the
        new row."""
        found = self._range(tenant, stage_prefix(job_id, stage))
        if found and len(found) >= found[0].of:
            return found
        legacy = self._range(tenant, legacy_stage_prefix(job_id, stage))
        if not legacy:
            return found
        by_index = {c.index: c for c in legacy} | {c.index: c for c in found}
        return [by_index[i] for i in sorted(by_index)]

    def _range(self, tenant: str, prefix: str) -> list[Chunk]:
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
        try:
            with storage_call("update chunk"):
                meta = self.table.update_entity(
                    entity, mode=UpdateMode.MERGE, etag=chunk.etag, match_condition=MatchConditions.IfNotModified
                )
        except NotFound as err:
            if chunk.legacy:
                # Moved to its own range since it was read (move_legacy): changed since read, like a 412, so the
                # caller re-reads (``get`` finds the moved row) and plans again on it.
                raise EtagMismatch("update chunk: the row moved to the chunk range") from err
            raise
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
        """Delete every chunk row of a job (retention), in transactions of up to 100: the job's chunk range, then
        its range of the layout before (one more range query, empty once ``move_legacy`` has run)."""
        return self._delete_range(tenant, job_prefix(job_id)) + self._delete_range(tenant, legacy_job_prefix(job_id))

    def _delete_range(self, tenant: str, prefix: str) -> int:
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

    # -- the migration from the layout before --------------------------------------------------------------------
    def move_legacy(self, tenant: str) -> MoveReport:
        """Move a tenant's chunk rows of the layout before (``{job_id}~c~…``, among its job rows) to their own range.

        One query of the tenant's job range (the one scan of it; rows that are not chunks are filtered out by the
        service), then per row one entity-group transaction, in the partition they share: insert the row at its new
        key, delete the old one if its ETag is still the one read. Both or neither, so no reader ever sees a chunk
        twice or not at all, and a write that lands on the old row first makes the move fail whole (412) and be
        read and tried again. A writer holding the old row afterwards gets 404, which ``update`` turns into
        ``EtagMismatch``: it re-reads, finds the new row, and plans again. Safe to run while jobs run, twice at
        once, and again: a row already moved is not found. Raises StorageUnavailable when Storage is away.
        """
        query = "PartitionKey eq @pk and RowKey lt @end and kind eq @kind"
        with storage_call("find chunk rows of the layout before"):
            rows = list(self.table.query_entities(
                query, parameters={"pk": tenant, "end": JOB_ROWS_END, "kind": KIND_CHUNK}
            ))
        report = MoveReport()
        for e in rows:
            outcome = self._move_one(e)
            setattr(report, outcome, getattr(report, outcome) + 1)
        return report

    def _move_one(self, e: Any, tries: int = 3) -> str:
        tenant, old = str(e["PartitionKey"]), str(e["RowKey"])
        for _ in range(tries):
            try:
                chunk = Chunk.from_entity(e)
            except (KeyError, TypeError, ValueError):
                log.error("not moving unreadable chunk row %s/%s", tenant, old)
                return "left"
            entity = {**dict(e), "RowKey": chunk_row(chunk.job_id, chunk.stage, chunk.index)}
            delete = ("delete", {"PartitionKey": tenant, "RowKey": old},
                      {"etag": e.metadata["etag"], "match_condition": MatchConditions.IfNotModified})
            try:
                with storage_call("move a chunk row"):
                    self.table.submit_transaction([("create", entity), delete])
                return "moved"
            except AlreadyExists:
                # The new row exists beside the old (a writer of the old code made the old one after the new): the
                # readers take the new row, so the old one is dropped, if it is still as read.
                try:
                    with storage_call("drop a chunk row of the layout before"):
                        self.table.delete_entity(tenant, old, etag=e.metadata["etag"],
                                                 match_condition=MatchConditions.IfNotModified)
                    return "dropped"
                except EtagMismatch:
                    pass
            except EtagMismatch:
                pass  # written since it was read: read it again and move what is there now
            except StorageUnavailable as err:
                if not err.maybe_applied:
                    raise
            except StorageError:
                pass  # a 404 inside the batch: the old row is gone (moved by another run, or retention)
            try:
                with storage_call("read a chunk row of the layout before"):
                    e = self.table.get_entity(tenant, old)
            except NotFound:
                return "moved"  # by this try (its answer lost), by another run, or deleted by retention
        return "left"
