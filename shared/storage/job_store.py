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
from collections.abc import Iterator
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.config.constants import IDEMPOTENCY_ROW_PREFIX, KIND_IDEMPOTENCY, KIND_JOB
from shared.core.errors import AlreadyExists, BadRequest, NotFound
from shared.core.jobs import Job, error_fields, progress_fields
from shared.storage.connections import get_table_client
from shared.storage.errors import storage_call

log = logging.getLogger(__name__)

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


def encode_cursor(token: Any) -> str | None:
    if not token:
        return None
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, str]:
    try:
        if len(cursor) > 2048:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        token = json.loads(raw)
        if not isinstance(token, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in token.items()):
            raise ValueError("not a token")
        if set(token) - {"PartitionKey", "RowKey"}:
            raise ValueError("unknown keys")
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
        """Insert ``job``; with a key, atomically with its idempotency row (one entity-group transaction).

        Raises :class:`AlreadyExists` if either row exists and :class:`StorageUnavailable` when the
        outcome is unknown. Deciding what an ambiguous insert did is the lifecycle's job
        (``shared.core.lifecycle.Lifecycle.submit``), by reading.
        """
        entity = job.to_entity()
        if idempotency_key is None:
            with storage_call("create job"):
                meta = self.table.create_entity(entity)
            return job.with_changes(etag=meta.get("etag"))
        row = idempotency_row_key(idempotency_key)
        entity["idempotency_row"] = row
        idem = {
            "PartitionKey": job.tenant,
            "RowKey": row,
            "kind": KIND_IDEMPOTENCY,
            "job_id": job.id,
            "request_hash": job.request_hash,
        }
        with storage_call("create job"):
            try:
                result = self.table.submit_transaction([("create", entity), ("create", idem)])
            except TableTransactionError as err:
                if err.status_code == 409:
                    raise AlreadyExists("idempotency key in use") from err
                raise
        etag = result[0].get("etag") if result else None
        return job.with_changes(idempotency_row=row, etag=etag)

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
        """One page of a tenant's jobs, newest first. Only the tenant's partition is read."""
        filters = ["PartitionKey eq @tenant", "kind eq @kind"]
        params: dict[str, Any] = {"tenant": tenant, "kind": KIND_JOB}
        if status:
            filters.append("status eq @status")
            params["status"] = status
        if pipeline:
            filters.append("pipeline eq @pipeline")
            params["pipeline"] = pipeline
        token = decode_cursor(cursor) if cursor else None
        with storage_call("list jobs"):
            pages = self.table.query_entities(
                " and ".join(filters), parameters=params, results_per_page=limit, select=_PUBLIC_COLUMNS
            ).by_page(continuation_token=token)  # type: ignore[arg-type]  # the token is a dict
            page: list[Any] = list(next(pages, []))
            jobs = [Job.from_entity(e) for e in page]
            next_token = pages.continuation_token  # type: ignore[attr-defined]
        return jobs, encode_cursor(next_token)

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

    # -- write ---------------------------------------------------------------
    def update(self, job: Job, **changes: Any) -> Job:
        """Conditionally apply ``changes`` (Job field names) to the stored job.

        Raises :class:`EtagMismatch` if the job changed since ``job`` was read.
        Only the changed properties are sent (MERGE), so a heartbeat does not
        re-upload the inline input.
        """
        if job.etag is None:
            raise ValueError("update needs the ETag the job was read with")
        entity = {"PartitionKey": job.tenant, "RowKey": job.id, **_update_fields(changes)}
        with storage_call("update job"):
            meta = self.table.update_entity(
                entity, mode=UpdateMode.MERGE, etag=job.etag, match_condition=MatchConditions.IfNotModified
            )
        return job.with_changes(**changes, etag=meta.get("etag"))

    def delete(self, job: Job) -> None:
        """Delete a finished job and its idempotency row in one transaction, if unchanged."""
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


__all__ = ["JobStore", "decode_cursor", "encode_cursor", "idempotency_row_key"]
