"""Webhooks in Table Storage: the webhook index the sweep reads, and each tenant's signing secrets.

**The webhook index** is one small partition (``~webhooks``) of the jobs table, one row per job whose
webhook is not settled yet (``<tenant>~<job id>``): written at submission *before* the job row
(so no job with a callback is ever outside it), removed once the webhook is ``delivered`` or
``failed``. The sweep reads only the rows that are due (``due_at lt now``), so its idle cost is one
query whatever the table holds, and it skips from one tenant's rows to the next with a RowKey
range, so one tenant's backlog never uses up another's turn. Each write is an idempotent upsert or
delete of a hint: the job row stays the truth, and a write whose answer was lost is simply made
again by the next sweep.

**Secrets** live in the tenant's own partition, one row (``~webhook-secrets``) holding its active
secrets. The API reads only the caller's partition, so no tenant can read another's. Writes are
conditional (``shared.core.conditional``): the first inserts, later ones MERGE on the ETag, and each
carries the primitive's ``op`` token so a write whose answer was lost is recognised on re-reading.
The secrets are sealed (``shared.storage.sealed``: envelope encryption under ``WEBHOOK_SECRETS_KEY``, a Key Vault
reference in Azure), so the table holds no secret in the clear.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import UpdateMode

from shared.core import webhooks
from shared.core.errors import EtagMismatch, NotFound
from shared.core.jobs import utcnow
from shared.core.ports import Stores
from shared.core.webhooks import Secret, SecretSet
from shared.storage import sealed
from shared.storage.errors import storage_call
from shared.storage.jobs_table import OnJobsTable

log = logging.getLogger(__name__)

WEBHOOK_PARTITION = "~webhooks"
#: Where the sweep stopped when its budget ran out (sorts after every ``<tenant>~<job>`` key).
CURSOR_ROW = "~~cursor"
SECRETS_ROW = "~webhook-secrets"
KIND_WEBHOOK = "webhook"
KIND_SECRETS = "webhook-secrets"
#: Sorts after every character a tenant or job id may hold, so ``<tenant>~~`` is past all of a tenant's rows.
_AFTER = "~~"
#: Tenants whose resume point the cursor row keeps (each about 80 bytes of JSON).
MAX_RESUME_TENANTS = 500


@dataclass(frozen=True)
class SweepCursor:
    """The webhook sweep's saved state (the index's cursor row)."""

    #: Where the last run whose budget ran out stopped ("" from the start).
    after: str = ""
    #: When the index was last healed.
    healed_at: datetime | None = None
    #: Per tenant whose share ran out: the last row taken, where its next turn continues.
    tenants: dict[str, str] = field(default_factory=dict)
    #: Heals in a row that found nothing to index, and when the heal was recorded done (it never runs again).
    heals_clean: int = 0
    heal_done_at: datetime | None = None


@dataclass(frozen=True)
class IndexRow:
    """A job whose webhook is not settled, as the sweep sees it."""

    tenant: str
    job_id: str
    due_at: datetime
    #: The job's ``callback_attempts`` when the sweep last looked, and when that was.
    seen: int = -1
    seen_at: datetime | None = None
    #: How often the sweep re-sent it without seeing an attempt recorded.
    sweeps: int = 0
    #: When a terminal write of its job was announced (``shared.core.webhooks.job_ending``, just before the write).
    ending_at: datetime | None = None
    #: As read (the sweep's "in flight" write is conditional on it), and the token of the last conditional write.
    etag: str | None = field(default=None, compare=False)
    op: str | None = None

    @property
    def key(self) -> str:
        return index_key(self.tenant, self.job_id)


def index_key(tenant: str, job_id: str) -> str:
    return f"{tenant}~{job_id}"


def _row(e: Any) -> IndexRow | None:
    try:
        seen_at, ending_at = e.get("seen_at"), e.get("ending_at")
        metadata = getattr(e, "metadata", None) or {}
        return IndexRow(str(e["tenant"]), str(e["job_id"]), e["due_at"], int(e.get("seen", -1)),
                        seen_at if isinstance(seen_at, datetime) else None, int(e.get("sweeps", 0)),
                        ending_at if isinstance(ending_at, datetime) else None, metadata.get("etag"),
                        str(e.get("op") or "") or None)
    except (KeyError, TypeError, ValueError):
        return None


class WebhookStore(OnJobsTable):
    # -- the index ---------------------------------------------------------------------------------
    def put_index_row(self, row: IndexRow) -> None:
        """Upsert the row (idempotent: an answer lost is harmless, the caller may write it again)."""
        entity: dict[str, Any] = {
            "PartitionKey": WEBHOOK_PARTITION, "RowKey": row.key, "kind": KIND_WEBHOOK, "tenant": row.tenant,
            "job_id": row.job_id, "due_at": row.due_at, "seen": row.seen, "sweeps": row.sweeps,
        }
        if row.seen_at is not None:
            entity["seen_at"] = row.seen_at
        if row.ending_at is not None:
            entity["ending_at"] = row.ending_at
        with storage_call("write a webhook-index row"):
            self.table.upsert_entity(entity, mode=UpdateMode.REPLACE)

    def index_row(self, tenant: str, job_id: str) -> IndexRow | None:
        """The row as stored, with its ETag; None if there is none (or it cannot be read)."""
        try:
            with storage_call("read a webhook-index row"):
                e = self.table.get_entity(WEBHOOK_PARTITION, index_key(tenant, job_id))
        except NotFound:
            return None
        return _row(e)

    def write_index_row(self, current: IndexRow | None, fields: dict[str, Any]) -> IndexRow:
        """MERGE ``fields`` (``due_at``, ``op``) into the row on ``current.etag``: EtagMismatch when it changed since,
        or is gone (the conditional primitive then re-reads and plans again)."""
        if current is None or current.etag is None:
            raise EtagMismatch("webhook-index row: gone")
        entity = {"PartitionKey": WEBHOOK_PARTITION, "RowKey": current.key, **fields}
        try:
            with storage_call("write a webhook-index row"):
                meta = self.table.update_entity(
                    entity, mode=UpdateMode.MERGE, etag=current.etag, match_condition=MatchConditions.IfNotModified
                )
        except NotFound as err:
            raise EtagMismatch("webhook-index row: gone") from err
        return replace(current, due_at=fields.get("due_at", current.due_at), op=fields.get("op"),
                       etag=dict(meta).get("etag"))

    def remove_index_row(self, tenant: str, job_id: str) -> None:
        """Remove the row (a delete of a row already gone is a success)."""
        try:
            with storage_call("remove a webhook-index row"):
                self.table.delete_entity(WEBHOOK_PARTITION, index_key(tenant, job_id))
        except NotFound:
            pass

    def due(
        self, now: datetime, after: str, per_tenant: int,
        resume: Mapping[str, str] | None = None, stopped: dict[str, str] | None = None,
    ) -> Iterator[IndexRow]:
        """Due rows with a RowKey past ``after``, in key order, at most ``per_tenant`` of each tenant.

        When a tenant's share is used up the next query starts past all of its rows (``<tenant>~~``):
        reading a tenant's thousand stuck rows costs one page, not a thousand rows. Where its share ran
        out is put in ``stopped``; given back as ``resume`` on the next run, that tenant's rows are read from
        there, so a tenant with more due rows than its share has them all looked at in turn (job ids sort
        newest first: without this its newest rows would take its share on every run). A tenant whose rows
        past its resume point run out starts from its first row again on the run after.
        """
        lo = after
        taken: dict[str, int] = {}
        entered: set[str] = set()
        token: dict[str, str] | None = None
        while True:
            with storage_call("read the webhook index"):
                pages = self.table.query_entities(
                    "PartitionKey eq @pk and RowKey gt @lo and RowKey lt @hi and due_at lt @now",
                    parameters={"pk": WEBHOOK_PARTITION, "lo": lo, "hi": CURSOR_ROW, "now": now},
                    results_per_page=per_tenant,
                ).by_page(continuation_token=token)  # type: ignore[arg-type]  # the token is a dict
                page = list(next(pages, []))
                # A filtered query may come back short, even empty, with a token (the service stops a request
                # after 1,000 rows scanned or 5 s): only the absence of a token says nothing more is due.
                token = pages.continuation_token  # type: ignore[attr-defined]
            skipped = False
            for e in page:
                row = _row(e)
                if row is None:
                    log.error("skipping unreadable webhook-index row %s", e.get("RowKey"))
                    lo = str(e.get("RowKey"))
                    continue
                if row.tenant not in entered:
                    entered.add(row.tenant)
                    point = (resume or {}).get(row.tenant)
                    if point is not None and row.key <= point < row.tenant + _AFTER:
                        lo, skipped = point, True  # this tenant's turn continues where its last one stopped
                        break
                if taken.get(row.tenant, 0) >= per_tenant:
                    if stopped is not None:
                        stopped[row.tenant] = lo  # the last row of this tenant that was taken
                    lo, skipped = row.tenant + _AFTER, True
                    break
                taken[row.tenant] = taken.get(row.tenant, 0) + 1
                lo = row.key
                yield row
            if skipped:
                token = None  # a new range (another tenant, or a resume point): a new query, not the old one's token
            elif not token:
                return  # the last page: nothing due after it

    def keys(self) -> dict[str, datetime | None]:
        """Every row key of the index and its ``due_at`` (the daily heal's view of what is indexed, and of which
        rows still wait for their job's terminal write)."""
        with storage_call("list the webhook index"):
            return {str(e["RowKey"]): (e.get("due_at") if isinstance(e.get("due_at"), datetime) else None)
                    for e in self.table.query_entities(
                        "PartitionKey eq @pk and RowKey lt @hi", parameters={"pk": WEBHOOK_PARTITION, "hi": CURSOR_ROW},
                        select=["RowKey", "due_at"],
                    )}

    def mark_due(self, tenant: str, job_id: str, due_at: datetime) -> None:
        """The job is about to end (``shared.core.webhooks.job_ending``): its row is due at ``due_at``, and says when
        the end was announced (``ending_at``). A MERGE upsert of those two alone, keeping what the sweep noted; a row
        that was removed meanwhile is written again whole, and the sweep removes it if settled. It changes the
        row's ETag, so a sweep's "in flight" write based on an earlier read of the row fails and is planned again."""
        entity = {"PartitionKey": WEBHOOK_PARTITION, "RowKey": index_key(tenant, job_id), "kind": KIND_WEBHOOK,
                  "tenant": tenant, "job_id": job_id, "due_at": due_at, "ending_at": utcnow()}
        with storage_call("make a webhook-index row due"):
            self.table.upsert_entity(entity, mode=UpdateMode.MERGE)

    def cursor(self) -> SweepCursor:
        """Where the last sweep whose budget ran out stopped, each tenant's resume point, the last heal."""
        try:
            with storage_call("read the webhook sweep cursor"):
                e = self.table.get_entity(WEBHOOK_PARTITION, CURSOR_ROW)
        except NotFound:
            return SweepCursor()
        healed = e.get("healed_at")
        try:
            tenants = json.loads(str(e.get("tenants") or "{}"))
        except ValueError:
            tenants = {}
        if not isinstance(tenants, dict):
            tenants = {}
        done = e.get("heal_done_at")
        return SweepCursor(
            str(e.get("after", "")), healed if isinstance(healed, datetime) else None,
            {str(k): str(v) for k, v in tenants.items()}, int(e.get("heals_clean") or 0),
            done if isinstance(done, datetime) else None,
        )

    def set_cursor(
        self, after: str | None = None, healed_at: datetime | None = None, tenants: Mapping[str, str] | None = None,
        heals_clean: int | None = None, heal_done_at: datetime | None = None,
    ) -> None:
        """Record the sweep's position, the tenants' resume points and/or the last heal (a MERGE upsert: the
        fields not given are kept; sent again after a lost answer it writes the same values)."""
        entity: dict[str, Any] = {"PartitionKey": WEBHOOK_PARTITION, "RowKey": CURSOR_ROW, "kind": KIND_WEBHOOK}
        if after is not None:
            entity["after"] = after
        if healed_at is not None:
            entity["healed_at"] = healed_at
        if heals_clean is not None:
            entity["heals_clean"] = heals_clean
        if heal_done_at is not None:
            entity["heal_done_at"] = heal_done_at
        if tenants is not None:
            # At most MAX_RESUME_TENANTS points (a string property holds 64 KiB); a tenant left out starts
            # from its first row, as before: later, never lost.
            entity["tenants"] = json.dumps(dict(sorted(tenants.items())[:MAX_RESUME_TENANTS]), separators=(",", ":"))
        with storage_call("write the webhook sweep cursor"):
            self.table.upsert_entity(entity, mode=UpdateMode.MERGE)

    # -- secrets -----------------------------------------------------------------------------------
    def secrets(self, tenant: str) -> SecretSet:
        """The tenant's secrets; an empty set without an ETag if it has none stored."""
        try:
            with storage_call("read webhook secrets"):
                e = self.table.get_entity(tenant, SECRETS_ROW)
        except NotFound:
            return SecretSet(tenant)
        if e.get("sealed"):
            items = json.loads(sealed.unseal(dict(e), _context(tenant)))
        else:
            # Written before secrets were sealed: read as stored; the next rotation or revocation seals the row.
            items = json.loads(str(e.get("secrets") or "[]"))
        stored = tuple(Secret(str(i["id"]), str(i["value"]), _utc(str(i["created_at"])),
                              _optional(i.get("ik")), _optional(i.get("rh"))) for i in items)
        return SecretSet(tenant, stored, e.metadata.get("etag"), str(e.get("op") or "") or None)

    def write_secrets(self, current: SecretSet, fields: dict[str, Any]) -> SecretSet:
        """Insert (no row yet) or MERGE on ``current.etag``; EtagMismatch when someone else wrote first."""
        secrets: tuple[Secret, ...] = fields["secrets"]
        plain = json.dumps(
            [_item(s) for s in secrets],
            separators=(",", ":"),
        ).encode()
        # Sealed (envelope-encrypted with WEBHOOK_SECRETS_KEY, bound to this tenant's row): a reader of the table
        # without the key, another tenant's row included, learns nothing. REPLACE drops a legacy plain property.
        entity = {
            "PartitionKey": current.tenant, "RowKey": SECRETS_ROW, "kind": KIND_SECRETS, "op": fields.get("op", ""),
            **sealed.seal(plain, _context(current.tenant)),
        }
        with storage_call("write webhook secrets"):
            meta = self.insert_or_replace(entity, current.etag, "webhook secrets")
        return SecretSet(current.tenant, secrets, meta.get("etag"), fields.get("op"))



def _item(s: Secret) -> dict[str, str]:
    """One secret as stored (inside the sealed value): its Idempotency-Key's hash and body hash only when it had one."""
    item = {"id": s.id, "value": s.value, "created_at": s.created_at.isoformat()}
    if s.key_hash is not None:
        item["ik"] = s.key_hash
        item["rh"] = s.request_hash or ""
    return item


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def _utc(text: str) -> datetime:
    """A stored ``created_at`` in UTC. Naive ones (the deployment secret as migrated before review45w, written as
    ``datetime.fromtimestamp(0)``) are read as UTC, the instances' time zone, not as this process's local time."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _context(tenant: str) -> str:
    """What a sealed secrets value is bound to: this tenant's secrets row, nowhere else."""
    return f"{tenant}/{SECRETS_ROW}"


def deployment_secret(stored: SecretSet) -> str | None:
    """``WEBHOOK_SECRET``, read only where it can count: for the default tenant while it has no row of its own.

    Every other tenant signs with its own secrets only, so the setting is not even read for it: an unresolved
    Key Vault reference in ``WEBHOOK_SECRET`` (which raises ``UnresolvedSecret``) must not stop another tenant's
    deliveries, its secrets routes or its submissions with a callback; and in Azure, where ``DEFAULT_TENANT`` is
    empty, it is read for nobody.
    """
    from shared.config.settings import get_settings, secret

    default = get_settings().default_tenant
    if not default or stored.tenant != default or stored.secrets or stored.etag is not None:
        return None
    return secret("WEBHOOK_SECRET") or None


def active_secrets(store: WebhookStore, tenant: str) -> SecretSet:
    """The tenant's signing secrets, the deployment's ``WEBHOOK_SECRET`` standing in for the default tenant's first."""
    from shared.config.settings import get_settings
    from shared.core.webhooks import with_deployment_secret

    stored = store.secrets(tenant)
    return with_deployment_secret(stored, deployment_secret(stored), get_settings().default_tenant)


def _mark_due(stores: Stores) -> Callable[[str, str, datetime], None]:
    return WebhookStore.of(stores).mark_due


webhooks.register_index(_mark_due)

__all__ = ["IndexRow", "WebhookStore", "active_secrets", "deployment_secret", "index_key"]
