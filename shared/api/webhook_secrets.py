"""A tenant's webhook signing secrets: create (a rotation starts), list, revoke (a rotation ends).

Each change is a plan (``shared.core.webhooks.plan_rotation`` / ``plan_revocation``) handed to
``shared.core.conditional.apply`` on the tenant's secrets row. A write that commits with its answer
lost is decided by re-reading: the row then carries our ``op`` token (or already holds the new
secret's id, or no longer holds the revoked one), so the caller gets the same answer as if the
answer had arrived, and the secret is added or removed exactly once. A write that never reached
Storage is a 503 with nothing changed; a conflicting writer (another rotation) makes the plan run
again on the fresh row, where it may now refuse (two secrets already active: 409).

The secret's value is returned by the create call (and again by a replay of its Idempotency-Key); listing shows ids
and dates only; nothing here logs a value or a key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from shared.config.settings import get_settings
from shared.core import conditional
from shared.core.conditional import Applied
from shared.core.jobs import utcnow
from shared.core.ports import Stores
from shared.core.webhooks import (
    Secret,
    SecretSet,
    created_with_key,
    idempotency_hash,
    new_secret,
    plan_revocation,
    plan_rotation,
    with_deployment_secret,
)
from shared.storage.webhook_store import WebhookStore, deployment_secret


@dataclass(frozen=True)
class SecretInfo:
    id: str
    created_at: datetime

    def view(self) -> dict[str, str]:
        return {"id": self.id, "created_at": self.created_at.isoformat()}


class WebhookSecrets:
    def __init__(self, stores: Stores) -> None:
        self.store = WebhookStore.of(stores)

    def _current(self, tenant: str) -> SecretSet:
        # The default tenant's WEBHOOK_SECRET is its first secret until it stores a set: the first rotation
        # migrates it into the row (id "deployment"), so receivers keep verifying through the rotation.
        stored = self.store.secrets(tenant)
        return with_deployment_secret(stored, deployment_secret(stored), get_settings().default_tenant)

    def list(self, tenant: str) -> list[SecretInfo]:
        return [SecretInfo(s.id, s.created_at) for s in self._current(tenant).secrets]

    def create(self, tenant: str) -> Secret:
        """A new active secret (the old one stays active until revoked). 409 with two active already."""
        return self.create_once(tenant, None).row

    def create_once(self, tenant: str, idempotency_key: str | None, body: bytes = b"") -> Applied[Secret]:
        """:meth:`create`, answered again for a repeated Idempotency-Key: ``applied`` False is a replay.

        The key is remembered only on the secret it created (its hash and the body's, inside the sealed row), for
        ``SECRET_IDEMPOTENCY_WINDOW`` after the creation and while the secret is active; the replay returns that
        secret's id and value, opened from the row. The same key with another body is a 409 naming the header.
        A write whose answer was lost in this call is decided by re-reading (``conditional.apply``); one that
        this call could not decide (a 503 for a write that happened) is found by its key on the client's retry.
        """
        now = utcnow()
        if idempotency_key is None:
            secret = new_secret(now)
        else:
            secret = new_secret(now, idempotency_hash(idempotency_key), hashlib.sha256(body).hexdigest())
        result = conditional.apply(
            self._current(tenant),
            read=lambda: self._current(tenant),
            write=self.store.write_secrets,
            plan=lambda row: plan_rotation(row, secret),
            landed=lambda row: row.find(secret.id) is not None,
            name=f"tenant {tenant}: webhook secret rotation",
        )
        if result.applied or result.row.find(secret.id) is not None:
            return Applied(secret, True)
        # Not applied: plan_rotation found the secret this key created (an earlier call, or a concurrent one).
        assert secret.key_hash is not None
        earlier = created_with_key(result.row, secret.key_hash, now)
        assert earlier is not None
        return Applied(earlier, False)

    def revoke(self, tenant: str, secret_id: str) -> None:
        """Stop signing with ``secret_id``. 404 if the tenant has no such secret; 409 for its last one."""
        current = self._current(tenant)
        plan_revocation(current, secret_id, seen=False)  # an unknown id or the last secret: refused before writing
        conditional.apply(
            current,
            read=lambda: self._current(tenant),
            write=self.store.write_secrets,
            plan=lambda row: plan_revocation(row, secret_id, seen=True),
            landed=lambda row: row.find(secret_id) is None,
            name=f"tenant {tenant}: webhook secret revocation",
        )


__all__ = ["SecretInfo", "WebhookSecrets"]
