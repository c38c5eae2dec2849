"""The per-tenant fairness window in Table Storage (``shared.core.fairness`` says what each row means).

Rows, all in the jobs table: a tenant's slots (``~fair~slot~NNN``) and wait list
(``~fair~wait~<ms>~<job id>``) in its own partition, and one marker row per tenant with parked
jobs in the ``~fair`` partition. The tenant's rows start with ``~`` like its other bookkeeping
rows, so job listings (``RowKey lt '~'``) never see them, and they carry no ``status``, so no
status scan does either.
"""

from __future__ import annotations

from typing import Any

from azure.data.tables import UpdateMode

from shared.core import fairness
from shared.core.errors import NotFound
from shared.core.fairness import Parked, Slot, View
from shared.storage.errors import storage_call
from shared.storage.jobs_table import OnJobsTable

PREFIX = "~fair~"
SLOT = PREFIX + "slot~"
WAIT = PREFIX + "wait~"
#: Sorts after every slot and wait row.
END = PREFIX + "~"
MARKERS = "~fair"
KIND_SLOT = "fair-slot"
KIND_WAIT = "fair-wait"
KIND_MARK = "fair-tenant"


def slot_key(index: int) -> str:
    return f"{SLOT}{index:03d}"


def wait_key(job_id: str) -> str:
    return f"{WAIT}{fairness.wait_order(job_id)}~{job_id}"


def _slot(tenant: str, e: Any) -> Slot:
    return Slot(tenant, int(str(e["RowKey"])[len(SLOT):]), str(e.get("job_id") or ""),
                e.metadata.get("etag"), str(e.get("op") or "") or None)


class FairnessStore(OnJobsTable):
    def view(self, tenant: str, size: int, parked: int) -> View:
        # Slots sort before wait rows, so one page of (stored slots + parked) rows holds both. Slots above
        # the window (it was made smaller) are listed too and counted as held until their jobs end.
        with storage_call("read the fairness window"):
            pages = self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
                parameters={"pk": tenant, "lo": SLOT, "hi": END}, results_per_page=size + parked + 4,
                select=["RowKey", "job_id", "op", "traceparent"],
            ).by_page()
            page = list(next(pages, []))
        slots = tuple(_slot(tenant, e) for e in page if str(e["RowKey"]).startswith(SLOT))
        waiting = tuple(Parked(tenant, str(e.get("job_id")), e.get("traceparent") or None)
                        for e in page if str(e["RowKey"]).startswith(WAIT))[:parked]
        return View(tenant, slots, waiting, size)

    def slot(self, tenant: str, index: int) -> Slot:
        try:
            with storage_call("read a fairness slot"):
                return _slot(tenant, self.table.get_entity(tenant, slot_key(index)))
        except NotFound:
            return Slot(tenant, index)

    def write_slot(self, slot: Slot, fields: dict[str, Any]) -> Slot:
        entity = {"PartitionKey": slot.tenant, "RowKey": slot_key(slot.index), "kind": KIND_SLOT,
                  "job_id": fields["job_id"], "op": fields.get("op", "")}
        with storage_call("write a fairness slot"):
            meta = self.insert_or_replace(entity, slot.etag, "fairness slot")
        return Slot(slot.tenant, slot.index, str(fields["job_id"]), meta.get("etag"), fields.get("op"))

    def park(self, item: Parked) -> None:
        entity: dict[str, Any] = {"PartitionKey": item.tenant, "RowKey": wait_key(item.job_id), "kind": KIND_WAIT,
                                  "job_id": item.job_id}
        if item.traceparent:
            entity["traceparent"] = item.traceparent
        with storage_call("park a job"):
            self.table.upsert_entity(entity, mode=UpdateMode.REPLACE)

    def unpark(self, tenant: str, job_id: str) -> None:
        self._delete(tenant, wait_key(job_id), "unpark a job")

    def mark(self, tenant: str) -> None:
        with storage_call("mark a tenant with parked jobs"):
            self.table.upsert_entity({"PartitionKey": MARKERS, "RowKey": tenant, "kind": KIND_MARK},
                                     mode=UpdateMode.MERGE)

    def unmark(self, tenant: str) -> None:
        self._delete(MARKERS, tenant, "unmark a tenant")

    def marked(self) -> list[str]:
        with storage_call("list tenants with parked jobs"):
            return [str(e["RowKey"]) for e in self.table.query_entities(
                "PartitionKey eq @pk", parameters={"pk": MARKERS}, select=["RowKey"])]

    def parked_ids(self, tenant: str) -> set[str]:
        with storage_call("list parked jobs"):
            return {str(e["job_id"]) for e in self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi",
                parameters={"pk": tenant, "lo": WAIT, "hi": END}, select=["job_id"])}

    def position(self, tenant: str, job_id: str) -> int | None:
        # The tenant's wait rows up to and including this job's, oldest first: one page, the keys alone.
        with storage_call("find a job in the wait list"):
            page = list(next(self.table.query_entities(
                "PartitionKey eq @pk and RowKey ge @lo and RowKey le @hi",
                parameters={"pk": tenant, "lo": WAIT, "hi": wait_key(job_id)},
                results_per_page=fairness.POSITION_PAGE, select=["RowKey"],
            ).by_page(), []))
        if page and str(page[-1]["RowKey"]) == wait_key(job_id):
            return len(page)
        if len(page) < fairness.POSITION_PAGE:
            return None
        try:  # more than a page ahead of it: is it parked at all?
            with storage_call("read a wait row"):
                self.table.get_entity(tenant, wait_key(job_id), select=["RowKey"])
        except NotFound:
            return None
        return fairness.POSITION_PAGE + 1

    def _delete(self, pk: str, rk: str, what: str) -> None:
        try:
            with storage_call(what):
                self.table.delete_entity(pk, rk)
        except NotFound:
            pass  # gone already (or our own earlier delete whose answer was lost)


fairness.register(FairnessStore.of)

__all__ = ["FairnessStore", "slot_key", "wait_key"]
