"""Webhook signing secrets at rest: sealed in the table (envelope encryption under WEBHOOK_SECRETS_KEY), so a row
read without the key, or moved into another tenant's partition, reveals nothing. On the fake and on Azurite."""

from __future__ import annotations

import json
import time

import pytest
from azure.core.exceptions import ResourceNotFoundError

from shared.api.webhook_secrets import WebhookSecrets
from shared.config.settings import UnresolvedSecret
from shared.core.webhooks import WebhookMessage, delivery_id
from shared.storage.sealed import DEV_KEY_TEXT, Unsealable, key_of
from shared.storage.webhook_store import SECRETS_ROW, WebhookStore
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job

KEY = "test-key-" + "k" * 32


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", KEY)
    monkeypatch.delenv("WEBHOOK_SECRETS_KEY_PREVIOUS", raising=False)


def _raw(backend: Backend, tenant: str) -> dict[str, object]:
    return dict(WebhookStore.of(backend.stores).table.get_entity(tenant, SECRETS_ROW))


def test_a_created_secret_reads_back_the_same(backend: Backend) -> None:
    created = WebhookSecrets(backend.stores).create("tenant-a")
    stored = WebhookStore.of(backend.stores).secrets("tenant-a")
    assert [(s.id, s.value) for s in stored.secrets] == [(created.id, created.value)]


def test_the_stored_row_holds_no_secret_in_the_clear(backend: Backend) -> None:
    secrets = WebhookSecrets(backend.stores)
    values = [secrets.create("tenant-a").value, secrets.create("tenant-a").value]  # a rotation: two active
    row = _raw(backend, "tenant-a")
    assert "secrets" not in row
    text = json.dumps({k: str(v) for k, v in row.items()})
    for value in values:
        assert value not in text
        assert value[:12] not in text


def test_a_row_read_without_the_key_does_not_open(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    value = WebhookSecrets(backend.stores).create("tenant-a").value
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", "another deployment's key")
    with pytest.raises(Unsealable) as err:
        WebhookStore.of(backend.stores).secrets("tenant-a")
    assert value not in str(err.value) and KEY not in str(err.value)


def test_a_sealed_row_copied_into_another_tenants_partition_does_not_open(backend: Backend) -> None:
    WebhookSecrets(backend.stores).create("tenant-a")
    row = _raw(backend, "tenant-a")
    table = WebhookStore.of(backend.stores).table
    table.upsert_entity({**row, "PartitionKey": "tenant-b", "RowKey": SECRETS_ROW})
    with pytest.raises(Unsealable):
        WebhookStore.of(backend.stores).secrets("tenant-b")


def test_a_row_stored_in_the_clear_before_sealing_is_read_and_sealed_on_its_next_write(backend: Backend) -> None:
    table = WebhookStore.of(backend.stores).table
    legacy = [{"id": "old1", "value": "whsec_legacy_value_0123456789", "created_at": "2026-01-01T00:00:00+00:00"}]
    table.create_entity({"PartitionKey": "tenant-a", "RowKey": SECRETS_ROW, "kind": "webhook-secrets",
                         "secrets": json.dumps(legacy)})
    assert [s.value for s in WebhookStore.of(backend.stores).secrets("tenant-a").secrets] == [legacy[0]["value"]]
    new = WebhookSecrets(backend.stores).create("tenant-a")
    row = _raw(backend, "tenant-a")
    assert "secrets" not in row and legacy[0]["value"] not in json.dumps({k: str(v) for k, v in row.items()})
    assert {s.value for s in WebhookStore.of(backend.stores).secrets("tenant-a").secrets} == \
        {legacy[0]["value"], new.value}


def test_after_a_key_rotation_the_previous_key_still_opens_old_rows(
    backend: Backend, monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = WebhookSecrets(backend.stores).create("tenant-a").value
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", "the new key " + "n" * 32)
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY_PREVIOUS", KEY)
    assert [s.value for s in WebhookStore.of(backend.stores).secrets("tenant-a").secrets] == [value]


#: What App Service leaves as the setting's value when it cannot resolve a Key Vault reference: the reference.
UNRESOLVED = "@Microsoft.KeyVault(SecretUri=https://thematiq-kv.vault.azure.net/secrets/webhook-secrets-key)"


def test_an_unresolved_key_vault_reference_never_seals_or_opens_a_secret(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reference text names the vault and the secret, both in the template: a key derived from it is public.
    # Sealing with it put every tenant's signing secret in the table under a key anyone could derive.
    secrets = WebhookSecrets(backend.stores)
    secrets.create("tenant-a")  # sealed under the real key
    with monkeypatch.context() as m:
        m.setenv("WEBHOOK_SECRETS_KEY", UNRESOLVED)
        with pytest.raises(UnresolvedSecret):
            secrets.create("tenant-b")
        with pytest.raises(UnresolvedSecret):
            WebhookStore.of(backend.stores).secrets("tenant-a")
    with monkeypatch.context() as m:
        m.setenv("WEBHOOK_SECRETS_KEY_PREVIOUS", UNRESOLVED)  # a rotation whose old key's reference is broken
        with pytest.raises(UnresolvedSecret):
            WebhookStore.of(backend.stores).secrets("tenant-a")
    with pytest.raises(ResourceNotFoundError):
        _raw(backend, "tenant-b")  # nothing was stored
    assert len(WebhookStore.of(backend.stores).secrets("tenant-a").secrets) == 1  # resolved again: all there


def test_an_unresolved_webhook_secret_signs_nothing_and_the_delivery_is_a_failed_attempt_retried(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WEBHOOK_SECRET (the default tenant's first secret) as the reference text: a signature anyone could forge.
    # The delivery used to raise: never recorded, its message went round the host's dequeues to the poison queue,
    # and the sweep, seeing no attempt, failed the webhook after 6 re-sends (about half an hour) as "lost 6 times
    # in a row": a broken setting ended every pending webhook with a false reason. It is a failed attempt now,
    # retried with the usual backoff for the usual 24 h, and delivered once the reference resolves.
    from tests.support.webhooks import public_dns, row

    public_dns(monkeypatch)
    monkeypatch.setenv("WEBHOOK_SECRET", UNRESOLVED)
    job = finished_job(backend, "local", index=False)
    rec = Recorder()
    first = WebhookMessage("local", job.id, delivery_id(job), 1, time.time())
    assert rec.sender(backend).handle(first.encode()) == "retrying"
    assert rec.calls == []  # not sent
    stored = row(backend, job)
    assert stored.callback_attempts == 1 and "signing secret" in (stored.callback_error or "")
    assert "vault" not in (stored.callback_error or "").lower()  # the tenant reads it: no setting's text
    [(nxt, delay)] = rec.sent
    assert nxt.attempt == 2 and delay > 0
    with pytest.raises(UnresolvedSecret):
        WebhookSecrets(backend.stores).list("local")
    monkeypatch.setenv("WEBHOOK_SECRET", "resolved-" + "s" * 32)
    assert rec.sender(backend).handle(nxt.encode()) == "delivered"
    assert len(rec.calls) == 1


def test_an_unresolved_webhook_secret_does_not_stop_another_tenants_webhooks(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WEBHOOK_SECRET is the default tenant's first secret and signs for nobody else, yet it was read for every
    # tenant: its unresolved reference made each tenant's deliveries a failed attempt ("the signing secrets are
    # unavailable"), its secrets routes a 503 and its submissions with a callback a 503, although its own sealed
    # secrets opened fine. In Azure (DEFAULT_TENANT empty) the setting is used by no tenant at all.
    import hashlib
    import hmac

    from tests.support.webhooks import public_dns

    public_dns(monkeypatch)
    own = WebhookSecrets(backend.stores).create("tenant-b")
    monkeypatch.setenv("WEBHOOK_SECRET", UNRESOLVED)
    assert [s.id for s in WebhookSecrets(backend.stores).list("tenant-b")] == [own.id]
    job = finished_job(backend, "tenant-b", index=False)
    rec = Recorder()
    assert rec.sender(backend).handle(WebhookMessage("tenant-b", job.id, delivery_id(job), 1, time.time()).encode()) \
        == "delivered"
    [(_, _, body, headers)] = rec.calls
    parts = dict(p.split("=", 1) for p in headers["Thematiq-Signature"].split(",") if p.startswith("t="))
    payload = f"{parts['t']}.{headers['Thematiq-Event']}.{headers['Thematiq-Delivery']}.".encode() + body
    expected = hmac.new(own.value.encode(), payload, hashlib.sha256).hexdigest()
    assert headers["Thematiq-Signature"].split(",")[1:] == [f"v1={expected}"]  # its own secret, and only it
    with pytest.raises(UnresolvedSecret):
        WebhookSecrets(backend.stores).list("local")  # the default tenant's own first secret is still refused


def test_secrets_sealed_with_a_key_no_longer_configured_make_a_failed_attempt_retried(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WEBHOOK_SECRETS_KEY rotated without WEBHOOK_SECRETS_KEY_PREVIOUS: the row does not open (Unsealable). The
    # delivery raised, unrecorded, went round the host's dequeues to the poison queue, and the sweep failed the
    # webhook for good within about half an hour as "lost 6 times in a row", where the unresolved reference (the
    # same kind of deployment fault) is a failed attempt retried for 24 h. Setting the old key mends it.
    from tests.support.webhooks import public_dns, row

    public_dns(monkeypatch)
    WebhookSecrets(backend.stores).create("tenant-b")
    job = finished_job(backend, "tenant-b", index=False)
    rec = Recorder()
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", "test-key-" + "n" * 32)  # the new key, the old one forgotten
    first = WebhookMessage("tenant-b", job.id, delivery_id(job), 1, time.time())
    assert rec.sender(backend).handle(first.encode()) == "retrying"
    assert rec.calls == []
    stored = row(backend, job)
    assert stored.callback_attempts == 1 and "signing secret" in (stored.callback_error or "")
    [(nxt, _)] = rec.sent
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY_PREVIOUS", KEY)
    assert rec.sender(backend).handle(nxt.encode()) == "delivered"


def test_an_empty_key_in_gateway_mode_seals_nothing_with_the_public_development_key(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``WEBHOOK_SECRETS_KEY`` empty (the setting removed or blank, a vault secret left empty) where the app trusts
    API Management (Azure): every tenant's signing secrets used to be sealed, silently, with ``DEV_KEY_TEXT``, a
    key anyone reading this repository has, so the table held them as good as in the clear (review45w). Now that
    is refused as an unresolved reference is: nothing sealed or opened, a 503 at the routes, a failed attempt
    (retried) at delivery. Locally (no gateway) the development key stays the default."""
    from tests.support.webhooks import public_dns, row

    public_dns(monkeypatch)
    secrets = WebhookSecrets(backend.stores)
    secrets.create("tenant-a")  # sealed under the real key
    job = finished_job(backend, "tenant-a", index=False)
    monkeypatch.setenv("TRUSTED_GATEWAY_PRINCIPAL_ID", "apim-object-id")
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", "")
    with pytest.raises(UnresolvedSecret):
        secrets.create("tenant-b")
    with pytest.raises(ResourceNotFoundError):
        _raw(backend, "tenant-b")  # nothing was stored
    with pytest.raises(UnresolvedSecret):
        WebhookStore.of(backend.stores).secrets("tenant-a")
    rec = Recorder()
    msg = WebhookMessage("tenant-a", job.id, delivery_id(job), 1, time.time())
    assert rec.sender(backend).handle(msg.encode()) == "retrying" and rec.calls == []
    assert "signing secret" in (row(backend, job).callback_error or "")
    # The key set again: all there, and the retry is delivered.
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", KEY)
    assert rec.sender(backend).handle(rec.sent[-1][0].encode()) == "delivered"
    # Locally an empty key is the development key, as before.
    monkeypatch.delenv("TRUSTED_GATEWAY_PRINCIPAL_ID")
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", "")
    secrets.create("tenant-c")
    assert _raw(backend, "tenant-c")["sealed_kid"] == key_of(DEV_KEY_TEXT).id
