"""What the stores that keep their rows beside the jobs (webhook index and secrets, fairness window) share."""

from __future__ import annotations

from typing import Any, Self

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient, UpdateMode

from shared.core.errors import EtagMismatch
from shared.core.ports import Stores
from shared.storage.connections import get_table_client


class OnJobsTable:
    """A store on the jobs table: the stores' own table client when given (tests: the same fault injection)."""

    def __init__(self, table: TableClient | None = None) -> None:
        self._table = table

    @classmethod
    def of(cls, stores: Stores) -> Self:
        """On the same table (and, in tests, the same fault injection) as the stores' jobs."""
        return cls(getattr(stores.jobs, "table", None))

    @property
    def table(self) -> TableClient:
        return self._table or get_table_client()

    def insert_or_replace(self, entity: dict[str, Any], etag: str | None, what: str) -> dict[str, Any]:
        """Insert (no ETag: the row should not exist) or REPLACE on ``etag``; EtagMismatch when someone else wrote
        first, the insert's 409 included (it lost to another writer exactly as a 412 does). Call inside
        ``storage_call``."""
        try:
            if etag is None:
                return dict(self.table.create_entity(entity))
            return dict(self.table.update_entity(
                entity, mode=UpdateMode.REPLACE, etag=etag, match_condition=MatchConditions.IfNotModified,
            ))
        except ResourceExistsError as err:
            raise EtagMismatch(f"{what}: written by someone else") from err


__all__ = ["OnJobsTable"]
