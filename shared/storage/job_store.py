"""Jobs in Table Storage: create (with idempotency), read, conditional update, list, delete.

Every write that changes a job's state is conditional on the ETag the caller
read, so two parties (workers, the reaper, the API's cancel) can never both
win. When a conditional write fails with 412 the caller re-reads and decides:
the SDK may have retried a write that in fact succeeded the first time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.config.constants import (
    ACTIVE_ROW_PREFIX,
    ACTIVE_ROWS_PER_QUERY,
    BUSY_MARK_CACHE_SECONDS,
    BUSY_ROW_PREFIX,
    IDEMPOTENCY_ROW_PREFIX,
    JOB_ROWS_END,
    KIND_ACTIVE,
    KIND_BUSY,
    KIND_IDEMPOTENCY,
    KIND_JOB,
    KIND_SWEEP,
    KIND_TENANT,
    LIST_MAX_SERVICE_PAGES,
    SWEEP_ROW,
    TENANTS_PARTITION,
)
from shared.core.errors import (
    AlreadyExists,
    BadRequest,
    NotFound,
    StorageError,
    StorageUnavailable,
    ThematiqError,
)
from shared.core.jobs import Job, Status, error_fields, progress_fields, utcnow
from shared.core.ports import IndexState, TenantMark
from shared.storage.connections import get_table_client
from shared.storage.errors import storage_call
from shared.storage.keys import prefix_range

log = logging.getLogger(__name__)
#: One value of a continuation token: Azure's (``1!8!bG9jYWw-``) and Azurite's (base64) are visible ASCII.
_TOKEN_VALUE = re.compile(r"[\x21-\x7e]{1,1024}")

# Columns the API needs; the inline input (up to 48 KiB) stays in Storage.
_PUBLIC_COLUMNS = [
    "PartitionKey",
    "RowKey",
    "kind",
    "pipeline",
    "status",
    "params",
    "created_at",
    "available_at",
    "max_attempts",
    "attempts",
    "input_bytes",
    "request_hash",
    "idempotency_row",
    "owner",
    "started_at",
    "heartbeat_at",
    "finished_at",
    "progress_stage",
    "progress_processed",
    "progress_total",
    "progress_message",
    "error_type",
    "error_message",
    "cancel_requested",
    "result_blob",
    "result_bytes",
    "usage",
    "traceparent",
    "requeues",
    "wait_stage",
    "fan_ins",
    "fan_in_at",
    "op",
    "callback_url",
    "callback_status",
    "callback_attempts",
    "callback_error",
    "input_blob",
]


def idempotency_row_key(key: str) -> str:
    return IDEMPOTENCY_ROW_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:48]


#: The tenants each table client has named in the tenants partition: one upsert per tenant per process (the
#: clients are cached per process), whichever JobStore object makes the insert.
_NAMED_TENANTS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


#: When this process last named each tenant busy, per table client (``JobStore._mark_quietly``).
_MARKED_TENANTS: weakref.WeakKeyDictionary[Any, dict[str, datetime]] = weakref.WeakKeyDictionary()


def active_row_key(job_id: str) -> str:
    """The RowKey of a job's entry in the active-jobs index (in the job's own partition)."""
    return ACTIVE_ROW_PREFIX + job_id


def _active_row(tenant: str, job_id: str) -> dict[str, Any]:
    return {"PartitionKey": tenant, "RowKey": active_row_key(job_id), "kind": KIND_ACTIVE, "job_id": job_id}


#: The index row's column naming the ``available_at`` of a job whose send failed (``JobStore.index_job``).
_UNSENT_FOR = "unsent_for"


def _index_op(job: Job, status: Status | None) -> tuple[str, dict[str, Any]] | None:
    """The index write that goes in the same transaction as a job write moving ``job`` to ``status``."""
    if status is None or status is job.status:
        return None
    if status.terminal and not job.status.terminal:
        # A job that never left the queue has no row to delete (a rare tracked one becomes a stray that
        # the reaper's next run removes); every other unfinished job has one.
        return None if job.in_queue_only else ("delete", _active_row(job.tenant, job.id))
    if not status.terminal and (job.status.terminal or job.in_queue_only):
        return ("upsert", _active_row(job.tenant, job.id))  # the first claim, or a finished job brought back
    return None


def _etag_of(entity: Any) -> str | None:
    etag = getattr(entity, "metadata", {}).get("etag")
    return str(etag) if etag else None


def _mark_of(tenant: str, e: Any) -> TenantMark:
    at = e.get("marked_at")
    return TenantMark(tenant, _etag_of(e), e.get("op") or None, marked_at=at if isinstance(at, datetime) else None)


def encode_cursor(token: Any) -> str | None:
    # The service may answer a NextPartitionKey without a NextRowKey (a large table split across servers); the
    # SDK's token then holds RowKey None, which is left out here: sent back empty (``NextRowKey=``) it is a 400.
    kept = {k: v for k, v in (token or {}).items() if v}
    if not kept:
        return None
    return base64.urlsafe_b64encode(json.dumps(kept, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, str]:
    try:
        if len(cursor) > 2048:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        token = json.loads(raw)
        if not isinstance(token, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in token.items()):
            raise ValueError("not a token")
        if not token or set(token) - {"PartitionKey", "RowKey"}:
            raise ValueError("unknown keys")
        if not all(_TOKEN_VALUE.fullmatch(v) for v in token.values()):
            # The service's continuation values are short printable ASCII: anything else would reach the
            # request URL as a NextPartitionKey/NextRowKey the service refuses.
            raise ValueError("not a continuation value")
        return token
    except (ValueError, binascii.Error, UnicodeDecodeError) as err:
        raise BadRequest("cursor is not a valid continuation token", field="cursor") from err


def _update_fields(changes: dict[str, Any]) -> dict[str, Any]:
    """Flatten a ``Job.with_changes`` dict into entity properties."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if key == "progress":
            out.update(progress_fields(value))
        elif key == "error":
            out.update(error_fields(value))
        elif key == "status":
            out["status"] = value.value
        elif key in ("params", "usage"):
            out[key] = json.dumps(value, separators=(",", ":"))
        elif value is None:
            # MERGE cannot remove a property; an empty value reads back as "unset".
            out[key] = ""
        else:
            out[key] = value
    return out


class JobStore:
    def __init__(self, table: TableClient | None = None) -> None:
        self._table = table

    @property
    def table(self) -> TableClient:
        return self._table or get_table_client()

    # -- create --------------------------------------------------------------
    def create(self, job: Job, idempotency_key: str | None = None) -> Job:
        """Insert ``job`` and, with a key, its idempotency row: one entity-group transaction, so the two exist
        together or not at all. Without a key it is a single insert.

        A new (``queued``) job gets no active-index row: until its first claim its message in the queue is
        its record (``index_job`` indexes one whose send failed), and the claim writes the index row in its own
        transaction. A job created past the queue (``running`` or later: imports, tests) is indexed here, in
        the same transaction.

        The tenant is named in the tenants partition first (once per tenant per process), so the reaper
        can find every partition that may hold an unfinished job. Raises :class:`AlreadyExists` if a row
        exists and :class:`StorageUnavailable` when the outcome is unknown. Deciding what an ambiguous
        insert did is the lifecycle's job (``shared.core.lifecycle.Lifecycle.submit``), by reading.
        """
        self._register_tenant(job.tenant)
        entity = job.to_entity()
        ops: list[Any] = [("create", entity)]
        if not job.in_queue_only:
            ops.append(("create", _active_row(job.tenant, job.id)))
        row = None
        if idempotency_key is not None:
            row = idempotency_row_key(idempotency_key)
            entity["idempotency_row"] = row
            ops.append((
                "create",
                {
                    "PartitionKey": job.tenant,
                    "RowKey": row,
                    "kind": KIND_IDEMPOTENCY,
                    "job_id": job.id,
                    "request_hash": job.request_hash,
                },
            ))
        with self._marking(job.tenant, not job.in_queue_only), storage_call("create job"):
            if len(ops) == 1:
                # One write, not a $batch of one: the submission's only table write (issue 13). Without
                # "Prefer: return-no-content" the service echoes the whole entity back (the inline input
                # is up to 48 KiB) for the SDK to parse; the ETag, all we need, is a header either way.
                etag = self.table.create_entity(entity, response_preference="return-no-content").get("etag")
            else:
                try:
                    result = self.table.submit_transaction(ops)
                except TableTransactionError as err:
                    if err.status_code == 409:
                        raise AlreadyExists("the job or its idempotency key exists") from err
                    raise
                etag = result[0].get("etag") if result else None
        return job.with_changes(idempotency_row=row, etag=etag)

    def _register_tenant(self, tenant: str) -> None:
        # An upsert is idempotent, so an ambiguous answer needs no decision: a failure answers the
        # submission 503 before anything else was written, and a retry names the tenant again.
        table = self.table
        named = _NAMED_TENANTS.setdefault(table, set())
        if tenant in named:
            return
        with storage_call("name the tenant"):
            table.upsert_entity(
                {"PartitionKey": TENANTS_PARTITION, "RowKey": tenant, "kind": KIND_TENANT}, mode=UpdateMode.MERGE
            )
        named.add(tenant)

    def idempotency_target(self, tenant: str, key: str) -> tuple[str, str] | None:
        """``(job_id, request_hash)`` stored for an Idempotency-Key, or None if the key is unused."""
        try:
            with storage_call("read idempotency key"):
                existing = self.table.get_entity(tenant, idempotency_row_key(key))
        except NotFound:
            return None
        return str(existing["job_id"]), str(existing.get("request_hash", ""))

    # -- read ----------------------------------------------------------------
    def get(self, tenant: str, job_id: str, *, with_input: bool = False) -> Job:
        with storage_call("read job"):
            entity = self.table.get_entity(tenant, job_id, select=None if with_input else _PUBLIC_COLUMNS)
        if entity.get("kind") != KIND_JOB:
            raise NotFound("job not found")
        return Job.from_entity(entity)

    def list(
        self, tenant: str, *, status: str | None, pipeline: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Job], str | None]:
        """One page of a tenant's jobs, newest first: up to ``limit``, fewer only when the listing is done or
        after ``LIST_MAX_SERVICE_PAGES`` service requests. Only the tenant's job rows are read: its RowKeys before
        ``JOB_ROWS_END`` (its bookkeeping rows sort after; chunks have partitions of their own), so the service scans
        no other row (but chunk rows of the layout before, until ``ChunkStore.move_legacy`` moves them)."""
        filters = ["PartitionKey eq @tenant", "RowKey lt @end", "kind eq @kind"]
        params: dict[str, Any] = {"tenant": tenant, "end": JOB_ROWS_END, "kind": KIND_JOB}
        if status:
            filters.append("status eq @status")
            params["status"] = status
        if pipeline:
            filters.append("pipeline eq @pipeline")
            params["pipeline"] = pipeline
        token: dict[str, str] | None = decode_cursor(cursor) if cursor else None
        jobs: list[Job] = []
        # A filtered query may come back short, even empty, with a token (the service stops a request after
        # 1,000 rows scanned or 5 s): follow the token for what is still missing, at most
        # LIST_MAX_SERVICE_PAGES requests, then answer what there is with the cursor to go on from.
        for request in range(LIST_MAX_SERVICE_PAGES):
            try:
                with storage_call("list jobs"):
                    pages = self.table.query_entities(
                        " and ".join(filters), parameters=params, results_per_page=limit - len(jobs),
                        select=_PUBLIC_COLUMNS,
                    ).by_page(continuation_token=token)  # type: ignore[arg-type]  # the token is a dict
                    page: list[Any] = list(next(pages, []))
                    token = pages.continuation_token  # type: ignore[attr-defined]
            except StorageError as err:
                if request == 0 and cursor and getattr(err.__cause__, "status_code", None) == 400:
                    # The service refused the client's cursor (one it never issued): the client's error, not ours.
                    raise BadRequest("cursor is not a valid continuation token", field="cursor") from err
                raise
            jobs.extend(self._readable(page))
            if not token or len(jobs) >= limit:
                break
        return jobs, encode_cursor(token)

    @staticmethod
    def _readable(entities: Iterable[Any]) -> Iterator[Job]:
        """The jobs of a page, less a row that cannot be read (a hand-edited entity): logged and skipped, as the
        reaper's scans do, so one such row does not make every listing of its tenant a 500."""
        for entity in entities:
            try:
                yield Job.from_entity(entity)
            except (KeyError, TypeError, ValueError) as err:
                log.error("skipping unreadable job row %s/%s in a listing (%s)", entity.get("PartitionKey"),
                          entity.get("RowKey"), type(err).__name__)

    def scan(self, query: str, parameters: dict[str, Any], *, with_input: bool = False) -> Iterator[Job]:
        """Jobs of every tenant matching an OData filter (the reaper's query). Values go in ``parameters``."""
        with storage_call("scan jobs"):
            for entity in self.table.query_entities(
                # The SDK substitutes @params only where they stand between spaces.
                f"kind eq '{KIND_JOB}' and ( {query} )",
                parameters=parameters,
                select=None if with_input else _PUBLIC_COLUMNS,
            ):
                try:
                    job = Job.from_entity(entity)
                except (KeyError, TypeError, ValueError) as err:
                    # One unreadable row must not stop the reaper for every tenant.
                    log.error("skipping unreadable job row %s/%s (%s)", entity.get("PartitionKey"),
                              entity.get("RowKey"), type(err).__name__)
                    continue
                yield job

    def index_state(self) -> IndexState:
        """The busy tenants and the sweep row: one range query of the tenants partition, from ``~`` on.

        The sweep marker lives in the same partition (``~sweep`` cannot be a tenant), so reading it costs
        nothing more: on Flex Consumption an instance rarely lives from one timer run to the next, so
        process memory could not say when the last sweep was. The tenant rows (``RowKey lt '~'``, every tenant
        that ever submitted) are not read, so the query's cost follows the busy tenants (platform45). Until the
        busy tenants were first recorded (``busy_seeded_at`` on the sweep row) it lists every tenant too, once.
        """
        swept_at: datetime | None = None
        moved_at: datetime | None = None
        seeded = dated = False
        marks: dict[str, TenantMark] = {}
        with storage_call("read the tenants partition"):
            for e in self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo", parameters={"pk": TENANTS_PARTITION, "lo": JOB_ROWS_END}
            ):
                key = str(e.get("RowKey"))
                if e.get("kind") == KIND_BUSY and key.startswith(BUSY_ROW_PREFIX):
                    tenant = key[len(BUSY_ROW_PREFIX):]
                    marks[tenant] = _mark_of(tenant, e)
                elif key == SWEEP_ROW:
                    swept_at = e["swept_at"] if isinstance(e.get("swept_at"), datetime) else None
                    moved_at = e["chunks_moved_at"] if isinstance(e.get("chunks_moved_at"), datetime) else None
                    seeded = isinstance(e.get("busy_seeded_at"), datetime)
                    dated = isinstance(e.get("orphans_dated_at"), datetime)
        tenants = sorted(marks) if seeded else sorted({*self.every_tenant(), *marks})
        return IndexState(tuple(tenants), swept_at, moved_at, marks, seeded, dated)

    def every_tenant(self) -> tuple[str, ...]:
        """Every tenant that ever submitted: the tenants partition's tenant rows (``RowKey lt '~'``)."""
        with storage_call("list the tenants"):
            return tuple(str(e["RowKey"]) for e in self.table.query_entities(
                "PartitionKey eq @pk and RowKey lt @end", parameters={"pk": TENANTS_PARTITION, "end": JOB_ROWS_END},
                select=["RowKey", "kind"],
            ) if e.get("kind") == KIND_TENANT)

    # -- the busy tenants (platform45) -------------------------------------------------------------------------
    @contextmanager
    def _marking(self, tenant: str, adds_index_row: bool) -> Iterator[None]:
        """Name ``tenant`` busy after a write that adds an index row: after it, whatever it answered (but a call
        that never went), so a reaper that found the tenant's index empty before the row existed removes the busy
        row only on an ETag this upsert has not changed yet, and one that removes it first sees it written again.
        Best effort: a failure is logged, and the daily sweep, which reads every unfinished job, marks it again."""
        try:
            yield
        except StorageUnavailable as err:
            if adds_index_row and err.maybe_applied:
                self._mark_quietly(tenant)
            raise
        except Exception:
            if adds_index_row:
                self._mark_quietly(tenant)  # a 412 may be the SDK's retry of a write that committed
            raise
        if adds_index_row:
            self._mark_quietly(tenant)

    def _mark_quietly(self, tenant: str) -> None:
        """Name the tenant busy unless this process did within ``BUSY_MARK_CACHE_SECONDS``: its mark still covers
        the write, since the reaper removes a mark only once it is ``BUSY_STALE_SECONDS`` old."""
        table = self.table
        marked = _MARKED_TENANTS.setdefault(table, {})
        now = utcnow()
        last = marked.get(tenant)
        if last is not None and (now - last).total_seconds() < BUSY_MARK_CACHE_SECONDS:
            return
        try:
            self.mark_busy(tenant, now)
        except ThematiqError as err:
            log.error("tenant %s: could not name it busy (%s); the daily sweep does", tenant, type(err).__name__)
            return
        marked[tenant] = now

    def mark_busy(self, tenant: str, at: datetime | None = None) -> None:
        with storage_call("name the tenant busy"):
            self.table.upsert_entity(
                {"PartitionKey": TENANTS_PARTITION, "RowKey": BUSY_ROW_PREFIX + tenant, "kind": KIND_BUSY,
                 "marked_at": at or utcnow()},
                mode=UpdateMode.MERGE,
            )

    def busy_mark(self, tenant: str) -> TenantMark:
        try:
            with storage_call("read a busy tenant"):
                e = self.table.get_entity(TENANTS_PARTITION, BUSY_ROW_PREFIX + tenant)
        except NotFound:
            return TenantMark(tenant, None, gone=True)
        return _mark_of(tenant, e)

    def unmark_busy(self, mark: TenantMark) -> TenantMark:
        """Delete the busy row on the ETag it was read with (EtagMismatch if it changed). A row already gone is
        what was asked: the SDK takes a 404 as deleted, which is also what its retry of a delete that committed
        gets."""
        with storage_call("remove an idle tenant"):
            self.table.delete_entity(TENANTS_PARTITION, BUSY_ROW_PREFIX + mark.tenant, etag=mark.etag,
                                     match_condition=MatchConditions.IfNotModified)
        return TenantMark(mark.tenant, None, gone=True)

    def has_active(self, tenant: str) -> bool:
        with storage_call("look at the active-jobs index"):
            rows = self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
                parameters={"pk": tenant, **prefix_range(ACTIVE_ROW_PREFIX)}, select=["RowKey"], results_per_page=1,
            ).by_page()
            return bool(list(next(rows, [])))

    def mark_busy_seeded(self, at: datetime) -> None:
        self._mark_sweep_row("busy_seeded_at", at)

    def mark_orphans_dated(self, at: datetime) -> None:
        self._mark_sweep_row("orphans_dated_at", at)

    def _mark_sweep_row(self, column: str, at: datetime) -> None:
        with storage_call(f"record {column} on the sweep row"):
            self.table.upsert_entity(
                {"PartitionKey": TENANTS_PARTITION, "RowKey": SWEEP_ROW, "kind": KIND_SWEEP, column: at},
                mode=UpdateMode.MERGE,
            )

    def mark_chunks_moved(self, at: datetime | None) -> None:
        # On the sweep row (MERGE: its swept_at stays), read with the tenants at no extra cost. None clears it (an
        # empty string: a MERGE leaves out a None), read back as not moved.
        with storage_call("mark the chunk rows moved"):
            self.table.upsert_entity(
                {"PartitionKey": TENANTS_PARTITION, "RowKey": SWEEP_ROW, "kind": KIND_SWEEP,
                 "chunks_moved_at": "" if at is None else at},
                mode=UpdateMode.MERGE,
            )

    def mark_swept(self, at: datetime) -> None:
        # Unconditional: two reapers that both swept only make the next sweep come a little later.
        with storage_call("mark the sweep"):
            self.table.upsert_entity(
                {"PartitionKey": TENANTS_PARTITION, "RowKey": SWEEP_ROW, "kind": KIND_SWEEP, "swept_at": at},
                mode=UpdateMode.MERGE,
            )

    def active(
        self, tenants: Iterable[str], on_error: Callable[[str, Exception], None],
        on_idle: Callable[[str], None] | None = None,
    ) -> Iterator[Job]:
        """The unfinished jobs of ``tenants``, through the active-jobs index: per tenant one RowKey-range query
        of its index rows, then its job rows ``ACTIVE_ROWS_PER_QUERY`` at a time. No cross-partition scan,
        and no finished row comes back. A tenant that cannot be read goes to ``on_error`` and the others go on;
        an unreadable row is logged and skipped; an index row whose job finished or is gone (only a bug or a
        hand edit leaves one) is removed. A tenant whose index named no unfinished job (and no row that could not
        be read) goes to ``on_idle``."""
        for tenant in tenants:
            held: set[str] = set()
            try:
                for job in self._active_of(tenant, held):
                    held.add(job.id)
                    yield job
            except ThematiqError as err:
                log.warning("could not read the active jobs of tenant %s (%s)", tenant, type(err).__name__)
                on_error(tenant, err)
                continue
            if not held and on_idle is not None:
                on_idle(tenant)

    def _active_of(self, tenant: str, held: set[str]) -> Iterator[Job]:
        ids: list[str] = []
        unsent: dict[str, datetime] = {}
        with storage_call("read the active-jobs index"):
            for e in self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
                parameters={"pk": tenant, **prefix_range(ACTIVE_ROW_PREFIX)},
                select=["RowKey", "job_id", _UNSENT_FOR],
            ):
                job_id = e.get("job_id")
                if isinstance(job_id, str) and job_id:
                    ids.append(job_id)
                    if isinstance(e.get(_UNSENT_FOR), datetime):
                        unsent[job_id] = e[_UNSENT_FOR]
                else:
                    log.error("skipping unreadable index row %s/%s", tenant, e.get("RowKey"))
                    held.add(str(e.get("RowKey")))
        for part, entities in self._by_ids(tenant, ids, _PUBLIC_COLUMNS, "read active jobs"):
            seen: set[str] = set()
            for entity in entities:
                seen.add(str(entity.get("RowKey")))
                try:
                    job = Job.from_entity(entity)
                except (KeyError, TypeError, ValueError) as err:
                    log.error("skipping unreadable job row %s/%s (%s)", tenant, entity.get("RowKey"),
                              type(err).__name__)
                    held.add(str(entity.get("RowKey")))
                    continue
                if job.status.terminal:
                    self._drop_stray(tenant, job.id)
                    continue
                yield job.with_changes(unsent_for=unsent.get(job.id))
            for job_id in set(part) - seen:
                self._drop_stray(tenant, job_id)

    def _by_ids(
        self, tenant: str, ids: Sequence[str], select: Sequence[str], what: str
    ) -> Iterator[tuple[Sequence[str], Sequence[Any]]]:
        """The rows of ``ids`` in ``tenant``, ``ACTIVE_ROWS_PER_QUERY`` per query: ``(ids asked, rows found)``."""
        for start in range(0, len(ids), ACTIVE_ROWS_PER_QUERY):
            part = ids[start : start + ACTIVE_ROWS_PER_QUERY]
            # The SDK substitutes @params only where they stand between spaces.
            terms = " or ".join(f"RowKey eq @r{i}" for i in range(len(part)))
            params: dict[str, Any] = {"pk": tenant, **{f"r{i}": job_id for i, job_id in enumerate(part)}}
            with storage_call(what):
                entities = [*self.table.query_entities(
                    f"PartitionKey eq @pk and ( {terms} )", parameters=params, select=[*select]
                )]
            yield part, entities

    def existing(self, tenant: str, job_ids: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for _, entities in self._by_ids(tenant, sorted(set(job_ids)), ["RowKey", "kind"], "check job rows"):
            found.update(str(e["RowKey"]) for e in entities if e.get("kind") == KIND_JOB)
        return found

    def _drop_stray(self, tenant: str, job_id: str) -> None:
        # Best effort: a later run tries again. Never racing a live job: an index row is only ever written
        # once its job row exists, and no transition leads out of a terminal state.
        log.warning("removing the index row of %s/%s: the job is finished or gone", tenant, job_id)
        try:
            with storage_call("remove a stray index row"):
                self.table.delete_entity(tenant, active_row_key(job_id))
        except ThematiqError:
            pass

    def index_job(self, tenant: str, job_id: str, unsent_for: datetime | None = None) -> None:
        """Give a job its index row, because its message may not exist (a send that failed, a message being
        redelivered, a lost one the sweep leaves for later). An idempotent upsert (MERGE: a claimed job's row
        only gains the mark): a job that is finished or gone only gets a stray row, which the next index run
        removes. ``unsent_for`` marks the send as failed for the row with that ``available_at``; the mark needs
        no clearing, since the re-send moves ``available_at`` on and a terminal write deletes the row."""
        row = _active_row(tenant, job_id)
        if unsent_for is not None:
            row[_UNSENT_FOR] = unsent_for
        with self._marking(tenant, True), storage_call("write an active-index row"):
            self.table.upsert_entity(row, mode=UpdateMode.MERGE)

    def reindex(self, jobs: Iterable[Job]) -> int:
        """Give unfinished jobs without an index row (written before the index existed) one.

        Upsert the index row, then re-read the job: one that finished meanwhile (its terminal write came
        before the upsert, so it had nothing to delete) loses the row again; a terminal write after the
        upsert deletes it in its own transaction. Either way no unfinished job stays out of the index and
        no finished one keeps a row.
        """
        added = 0
        for job in jobs:
            if job.status.terminal:
                continue
            self.index_job(job.tenant, job.id)
            try:
                fresh: Job | None = self.get(job.tenant, job.id)
            except NotFound:
                fresh = None
            if fresh is None or fresh.status.terminal:
                self._drop_stray(job.tenant, job.id)
            else:
                added += 1
        return added

    # -- write ---------------------------------------------------------------
    def update(self, job: Job, **changes: Any) -> Job:
        """Conditionally apply ``changes`` (Job field names) to the stored job.

        Raises :class:`EtagMismatch` if the job changed since ``job`` was read.
        Only the changed properties are sent (MERGE), so a heartbeat does not
        re-upload the inline input. The first claim writes the job's active-index
        row in the same transaction, a write that finishes the job removes it, and
        one that brings a finished job back restores it (``_index_op``), so the
        index never disagrees with the row.
        """
        if job.etag is None:
            raise ValueError("update needs the ETag the job was read with")
        entity = {"PartitionKey": job.tenant, "RowKey": job.id, **_update_fields(changes)}
        index_op = _index_op(job, changes.get("status"))
        with self._marking(job.tenant, index_op is not None and index_op[0] == "upsert"), storage_call("update job"):
            if index_op is None:
                meta = self._merge(entity, job.etag)
            else:
                meta = self._merge_with_index(entity, job.etag, index_op)
        return job.with_changes(**changes, etag=meta.get("etag"))

    def _merge(self, entity: dict[str, Any], etag: str) -> dict[str, Any]:
        return dict(self.table.update_entity(
            entity, mode=UpdateMode.MERGE, etag=etag, match_condition=MatchConditions.IfNotModified
        ))

    def _merge_with_index(self, entity: dict[str, Any], etag: str, index_op: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        merge = ("update", entity, {"mode": UpdateMode.MERGE, "etag": etag,
                                    "match_condition": MatchConditions.IfNotModified})
        try:
            result = self.table.submit_transaction([merge, index_op])
        except TableTransactionError as err:
            if err.status_code == 404 and index_op[0] == "delete":
                # No index row (a job written before the index existed), or no job row: the plain conditional
                # write finishes the first and raises NotFound for the second. Not decided by err.index, which
                # the SDK reports as 0 whenever it cannot parse the service's message.
                return self._merge(entity, etag)
            if err.status_code == 404:
                raise NotFound("job not found") from err
            raise
        return dict(result[0])

    def delete(self, job: Job) -> None:
        """Delete a finished job and its idempotency row in one transaction, if unchanged.

        A job already gone is a success: a delete that committed and was answered 5xx comes back 404 from the
        SDK's own retry (a ``$batch`` is retried on 500/503/504 too), and that is the row gone, as asked. Without
        an idempotency row it is one DELETE, not a ``$batch`` of one, so that 404 is the plain ``NotFound``.
        """
        if not job.idempotency_row:
            try:
                with storage_call("delete job"):
                    self.table.delete_entity(
                        job.tenant, job.id, etag=job.etag, match_condition=MatchConditions.IfNotModified
                    )
            except NotFound:
                pass
            return
        ops: list[Any] = [
            (
                "delete",
                {"PartitionKey": job.tenant, "RowKey": job.id},
                {"etag": job.etag, "match_condition": MatchConditions.IfNotModified},
            )
        ]
        if job.idempotency_row:
            ops.append(("delete", {"PartitionKey": job.tenant, "RowKey": job.idempotency_row}))
        try:
            with storage_call("delete job"):
                try:
                    self.table.submit_transaction(ops)
                except TableTransactionError as err:
                    if err.status_code == 404 and job.idempotency_row:
                        # The idempotency row is already gone: delete the job alone.
                        self.table.delete_entity(
                            job.tenant, job.id, etag=job.etag, match_condition=MatchConditions.IfNotModified
                        )
                        return
                    raise
        except NotFound:
            pass


__all__ = ["JobStore", "active_row_key", "decode_cursor", "encode_cursor", "idempotency_row_key"]
