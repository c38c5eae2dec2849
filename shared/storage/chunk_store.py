"""Chunk rows in Table Storage, in a partition per job (the model and its keys: ``shared.core.chunks``).

A stage's chunks are one range query inside their job's partition; they are inserted in entity-group
transactions and never overwritten. Rows of the layout before (in the tenant's partition, right after their
job's row) are read too, and moved by :meth:`ChunkStore.move_legacy`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.config.constants import JOB_ROWS_END, TABLE_BATCH_BUDGET_BYTES
from shared.config.settings import get_settings
from shared.core import conditional
from shared.core.chunks import (
    KIND_CHUNK,
    Chunk,
    ChunkStatus,
    MoveReport,
    chunk_partition,
    chunk_row,
    legacy_chunk_row,
    legacy_job_prefix,
    legacy_stage_prefix,
    stage_prefix,
)
from shared.core.errors import AlreadyExists, Contended, EtagMismatch, NotFound, StorageUnavailable
from shared.core.jobs import utcnow
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


def _wire_bytes(entity: Any) -> int:
    """About how much of a $batch body an entity takes (its JSON, base64 for bytes, plus its part's headers): a
    slight overestimate, to keep a transaction under the service's 4 MiB."""
    size = 400
    for key, value in dict(entity).items():
        size += len(key) + 40  # the name, quotes, and an @odata.type annotation
        if isinstance(value, bytes | bytearray):
            size += 4 * ((len(value) + 2) // 3)
        elif isinstance(value, str):
            size += len(json.dumps(value))
        else:
            size += 40
    return size


def _old_first() -> bool:
    """Whether reads start at the layout before: under ``CHUNK_ROWS=tenant``, where new stages are written."""
    return get_settings().chunk_rows == "tenant"


def _whole(chunks: list[Chunk]) -> bool:
    return bool(chunks) and len(chunks) >= chunks[0].of


def _merge(older: list[Chunk], newer: list[Chunk]) -> list[Chunk]:
    """By index; a chunk in both is taken from ``newer`` (the new layout, or the later read)."""
    by_index = {c.index: c for c in older} | {c.index: c for c in newer}
    return [by_index[i] for i in sorted(by_index)]


class ChunkStore:
    def __init__(self, table: TableClient | None = None) -> None:
        self._table = table

    @property
    def table(self) -> TableClient:
        return self._table or get_table_client()

    def create_all(self, chunks: Iterable[Chunk]) -> int:
        """Insert chunks in entity-group transactions of up to 100 (one job's chunks share a partition) and
        ``TABLE_BATCH_BUDGET_BYTES`` (the service refuses a transaction over 4 MiB: 100 chunks of 48 KiB inline input
        are 6.4 MB of base64), in the layout ``CHUNK_ROWS`` names.

        Inserts, never upserts: a replace would reset a chunk that another writer already
        ran to ``pending`` and drop its output. A batch that hits an existing chunk fails
        whole with AlreadyExists; the lifecycle re-lists and inserts only what is missing.
        """
        batches: dict[str, list[Any]] = {}
        sizes: dict[str, int] = {}
        calls = 0
        before = _old_first()  # the layout before, for a deploy beside the code before
        for chunk in chunks:
            chunk = chunk.with_changes(legacy=before)
            entity = chunk.to_entity()
            size = _wire_bytes(entity)
            batch = batches.setdefault(chunk.partition_key, [])
            if batch and (len(batch) == _BATCH or sizes[chunk.partition_key] + size > TABLE_BATCH_BUDGET_BYTES):
                calls += self._submit(batch)
                batch.clear()
                sizes[chunk.partition_key] = 0
            batch.append(("create", entity))
            sizes[chunk.partition_key] = sizes.get(chunk.partition_key, 0) + size
        for batch in batches.values():
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
        """One chunk: a point read; at the layout before if the first finds nothing, then the new key once more.

        A row only ever moves from the layout before to the new one (``move_legacy``: copy, then delete), so a chunk
        missed at the new key and then at the old one may have moved in between: the third read, at the new key
        again, finds it (read old, then new, no moving row is missed). Only a chunk found nowhere costs it."""
        select = None if with_input else _SUMMARY
        new = (chunk_partition(tenant, job_id), chunk_row(stage, index))
        old = (tenant, legacy_chunk_row(job_id, stage, index))
        # Under CHUNK_ROWS=tenant the chunks are written at the old key: look there first (old, then new, is already
        # complete), one read instead of two per chunk read.
        keys = (old, new) if _old_first() else (new, old, new)
        for partition, row in keys:
            try:
                return Chunk.from_entity(self._point(partition, row, select))
            except NotFound:
                pass
        raise NotFound(f"chunk {job_id}/{stage}/{index}: not found")

    def _point(self, partition: str, row: str, select: list[str] | None) -> Any:
        with storage_call("read chunk"):
            return self.table.get_entity(partition, row, select=select)

    def list_stage(self, tenant: str, job_id: str, stage: str) -> list[Chunk]:
        """Every chunk of one stage, by index: a range query inside the job's chunk partition.

        A stage found whole (as many rows as its chunks say it has) is one query. One found short or not at all (a
        stage being created, or one written in the layout before, or moved in part) is looked for in the old range
        too, a second range query. A chunk found in both (a move cut off between its copy and its delete: the row
        could no longer change, so the two are alike) is the new row.

        A row only moves from the old range to the new one, and ``move_legacy`` may move it between the two queries:
        missed by the first (not moved yet) and by the second (moved). A merge still short of the stage's chunks (or
        empty) therefore reads the new range once more: old, then new, misses no moving row. Without it a fan-in
        racing the sweep saw a stage without the rows just moved and decided on the rest (a stage of 3 with one
        failed chunk and an error budget of 50% failed the job: 1 of 1). Costs a third query only for a stage
        short in both layouts (being created, or racing a move)."""
        if _old_first():
            # CHUNK_ROWS=tenant: the stage is written in the old range; read it first, then (if short) the new one.
            legacy = self._range(tenant, legacy_stage_prefix(job_id, stage))
            if _whole(legacy):
                return legacy
            return _merge(legacy, self._range(chunk_partition(tenant, job_id), stage_prefix(stage)))
        found = self._range(chunk_partition(tenant, job_id), stage_prefix(stage))
        if _whole(found):
            return found
        legacy = self._range(tenant, legacy_stage_prefix(job_id, stage))
        merged = _merge(legacy, found)
        if _whole(merged):
            return merged
        return _merge(merged, self._range(chunk_partition(tenant, job_id), stage_prefix(stage)))

    def _range(self, partition: str, prefix: str) -> list[Chunk]:
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
        params = {"pk": partition, **prefix_range(prefix)}
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
        entity = {"PartitionKey": chunk.partition_key, "RowKey": chunk.row_key, **props}
        try:
            with storage_call("update chunk"):
                meta = self.table.update_entity(
                    entity, mode=UpdateMode.MERGE, etag=chunk.etag, match_condition=MatchConditions.IfNotModified
                )
        except NotFound as err:
            if chunk.legacy:
                # Moved to its job's partition since it was read (move_legacy): changed since read, like a 412, so
                # the caller re-reads (``get`` finds the moved row) and plans again on it.
                raise EtagMismatch("update chunk: the row moved to its job's partition") from err
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
        """Delete every chunk row of a job (retention), in transactions of up to 100: its partition (one query,
        bounded by its chunks), then its range of the layout before (one range query, empty once moved)."""
        return (self._delete(chunk_partition(tenant, job_id), "PartitionKey eq @pk", {})
                + self._delete(tenant, "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
                               prefix_range(legacy_job_prefix(job_id))))

    def _delete(self, partition: str, query: str, bounds: dict[str, str]) -> int:
        with storage_call("delete chunks"):
            rows = [
                {"PartitionKey": partition, "RowKey": e["RowKey"]}
                for e in self.table.query_entities(query, parameters={"pk": partition, **bounds}, select=["RowKey"])
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
        """Move a tenant's chunk rows of the layout before (``{job_id}~c~…`` among its job rows) to their jobs'
        partitions: one query of the tenant's job rows (the service filters out what is not a chunk), then per 100
        rows of a job (fewer when their inline inputs would pass ``TABLE_BATCH_BUDGET_BYTES``) one transaction of
        copies and one of deletes.

        Two partitions, so no transaction holds both writes: a row is moved only once it can no longer change, so a
        copy is never stale. That is a finished chunk (no transition leads out of a terminal state), or one that
        never started of a job that has ended, which is first cancelled where it is (the transition a delivery of it
        would make; conditional on its ETag). The copy is an insert (one already there is the copy of a move cut off
        before its delete, and alike), then the old row is deleted if its ETag is still the one read; a reader that
        finds both takes the copy. A chunk of a job still going stays where it is, read and written there, until a
        later run finds it finished. Safe to run while jobs run, twice at once, and again. Raises
        StorageUnavailable when Storage is away.
        """
        query = "PartitionKey eq @pk and RowKey lt @end and kind eq @kind"
        report = MoveReport()
        ended: dict[str, bool] = {}
        batch: list[Any] = []  # rows of one job that can no longer change, up to 100 and TABLE_BATCH_BUDGET_BYTES
        size = [0]

        def flush() -> None:
            if batch:
                moved = self._move(batch)
                report.moved += moved
                report.left += len(batch) - moved
                batch.clear()
                size[0] = 0

        # Page by page (a row carries its inline input, up to 48 KiB): a job's rows are next to each other, so a
        # batch is flushed when the job changes. Deleting rows already read does not disturb the continuation.
        with storage_call("find chunk rows of the layout before"):
            for e in self.table.query_entities(query, parameters={"pk": tenant, "end": JOB_ROWS_END,
                                                                  "kind": KIND_CHUNK}):
                ready = self._ready(tenant, e, report, ended)
                if ready is None:
                    continue
                bytes_ = _wire_bytes(ready)
                if batch and (batch[0]["job_id"] != ready["job_id"] or len(batch) == _BATCH
                              or size[0] + bytes_ > TABLE_BATCH_BUDGET_BYTES):
                    flush()
                batch.append(ready)
                size[0] += bytes_
        flush()
        return report

    def _ready(self, tenant: str, e: Any, report: MoveReport, ended: dict[str, bool]) -> Any | None:
        """The row as it can be moved (cancelled first if it never started and its job ended), or None (counted)."""
        try:
            chunk = Chunk.from_entity(e)
        except (KeyError, TypeError, ValueError):
            log.error("not moving unreadable chunk row %s/%s", tenant, e.get("RowKey"))
            report.unreadable += 1
            return None
        if chunk.status.terminal:
            return e
        if chunk.status not in (ChunkStatus.PENDING, ChunkStatus.QUEUED) or not self._ended(tenant, chunk.job_id, ended):
            report.left += 1  # running, or its job still goes: it moves once it has finished
            return None
        found = self._cancel_in_place(e, chunk)
        if found is None:
            report.left += 1
            return None
        row, cancelled = found
        report.cancelled += cancelled
        return row

    def _ended(self, tenant: str, job_id: str, seen: dict[str, bool]) -> bool:
        """Whether the job has ended (or is gone): nothing will run its chunks that never started."""
        if job_id not in seen:
            try:
                with storage_call("read a job's status"):
                    row = self.table.get_entity(tenant, job_id, select=["status"])
                seen[job_id] = str(row.get("status")) in ("succeeded", "failed", "cancelled")
            except NotFound:
                seen[job_id] = True
        return seen[job_id]

    def _cancel_in_place(self, e: Any, chunk: Chunk) -> tuple[Any, bool] | None:
        """Cancel a never-started chunk of an ended job where it is: the row as it now is once it can no longer change
        (cancelled by this run, or by anyone, or finished) and whether this run cancelled it, or None (it started meanwhile, or is gone).

        Through :func:`shared.core.conditional.apply`: a cancel whose answer was lost (a dropped connection:
        StorageUnavailable) or whose SDK retry came back 412 after it had committed is decided by re-reading the row
        (our ``op`` on it), and one that lost to a writer is planned again on the fresh row. Before review44j the
        first made the tenant's whole move fail and the sweep go unrecorded (the sweep's table scans ran again
        minutes later), the second left a cancelled row unmoved until the next day's sweep."""
        key = {"PartitionKey": e["PartitionKey"], "RowKey": e["RowKey"]}
        latest: dict[str, Any] = {"e": e}

        def read() -> Chunk:
            with storage_call("read a chunk of the layout before"):
                latest["e"] = self.table.get_entity(key["PartitionKey"], key["RowKey"])
            return Chunk.from_entity(latest["e"])

        def write(row: Chunk, fields: dict[str, Any]) -> Chunk:
            with storage_call("cancel a chunk of an ended job"):
                self.table.update_entity({**key, **fields}, mode=UpdateMode.MERGE, etag=row.etag,
                                         match_condition=MatchConditions.IfNotModified)
            return read()

        def plan(row: Chunk) -> dict[str, Any] | None:
            if row.status not in (ChunkStatus.PENDING, ChunkStatus.QUEUED):
                return None
            return {"status": ChunkStatus.CANCELLED.value, "finished_at": utcnow()}

        try:
            done = conditional.apply(chunk, read=read, write=write, plan=plan, name="cancel a chunk of an ended job")
        except (NotFound, Contended):
            log.info("chunk %s/%s changed while being cancelled; the next run looks again", chunk.job_id, chunk.index)
            return None
        if not done.row.status.terminal:
            log.info("chunk %s/%s started while being cancelled; it moves once finished", chunk.job_id, chunk.index)
            return None
        return latest["e"], done.applied

    def delete_job_partition(self, tenant: str, job_id: str) -> int:
        """Delete the chunk rows of a job's own partition (one query): retention again after the job's row is gone,
        while the move still runs (``Lifecycle.expire``)."""
        return self._delete(chunk_partition(tenant, job_id), "PartitionKey eq @pk", {})

    def _move(self, rows: list[Any]) -> int:
        """Move up to 100 rows of one job (``_move_rows``), then read the job's row: if it is gone, a retention
        deleted the job while this move held its rows (a second sweep at once), so the copies go too (platform45).
        Retention deletes the job's partition again after its row while the move runs, so a copy made after
        retention's first look is deleted by one side or the other: by this read if it comes after the row's
        delete, by retention's second look if it comes before. Until platform45 such a copy stayed for ever."""
        moved = self._move_rows(rows)
        first = Chunk.from_entity(rows[0])
        try:
            with storage_call("read the job of moved chunk rows"):
                self.table.get_entity(first.tenant, first.job_id, select=["RowKey"])
        except NotFound:
            log.warning("job %s/%s is gone: deleting the chunk rows just moved for it", first.tenant, first.job_id)
            self._delete(chunk_partition(first.tenant, first.job_id), "PartitionKey eq @pk", {})
        return moved

    def _move_rows(self, rows: list[Any]) -> int:
        """Copy up to 100 rows of one job that can no longer change to its partition, then delete the old ones (on
        their ETags): one transaction each, in the two partitions; row by row when a transaction fails. How many
        old rows are gone."""
        copies = []
        for e in rows:
            chunk = Chunk.from_entity(e)
            copies.append({**dict(e), "PartitionKey": chunk_partition(chunk.tenant, chunk.job_id),
                           "RowKey": chunk_row(chunk.stage, chunk.index)})
        try:
            with storage_call("copy chunk rows"):
                self.table.submit_transaction([("create", c) for c in copies])
        except (AlreadyExists, StorageUnavailable) as err:
            if isinstance(err, StorageUnavailable) and not err.maybe_applied:
                raise
            # A copy is there already (a run cut off before its deletes; the same row, since it could not change),
            # or the answer was lost: each row on its own, a copy already there being done.
            for c in copies:
                try:
                    with storage_call("copy a chunk row"):
                        self.table.create_entity(c)
                except AlreadyExists:
                    pass
        deletes = [("delete", {"PartitionKey": e["PartitionKey"], "RowKey": e["RowKey"]},
                    {"etag": e.metadata["etag"], "match_condition": MatchConditions.IfNotModified}) for e in rows]
        try:
            with storage_call("delete chunk rows of the layout before"):
                try:
                    self.table.submit_transaction(deletes)
                except TableTransactionError as err:
                    if err.status_code != 404:
                        raise
                    raise NotFound("a chunk row of the batch is gone") from err
            return len(rows)
        except (EtagMismatch, NotFound, StorageUnavailable) as err:
            if isinstance(err, StorageUnavailable) and not err.maybe_applied:
                raise
        gone = 0
        for e in rows:  # a row of the batch gone (another run) or changed (only a hand edit changes a finished row)
            try:
                with storage_call("delete a chunk row of the layout before"):
                    self.table.delete_entity(str(e["PartitionKey"]), str(e["RowKey"]), etag=e.metadata["etag"],
                                             match_condition=MatchConditions.IfNotModified)
                gone += 1
            except EtagMismatch:
                log.warning("chunk row %s/%s changed after it finished; left beside its copy", e["PartitionKey"],
                            e["RowKey"])
        return gone
