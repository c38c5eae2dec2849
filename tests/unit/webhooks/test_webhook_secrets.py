"""Per-tenant signing secrets on the fake and on Azurite: rotation, isolation, lost answers, verification."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from shared.api.webhook_secrets import WebhookSecrets
from shared.core.errors import Conflict, NotFound, StorageUnavailable
from shared.core.webhooks import DEPLOYMENT_SECRET_ID, Secret, WebhookMessage, delivery_id
from shared.storage.webhook_store import WebhookStore
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job, public_dns
from tests.unit.webhooks.conftest import SECRET
from thematiq_client import webhooks


def _deliver(backend: Backend, tenant: str) -> tuple[bytes, dict[str, str]]:
    job = finished_job(backend, tenant, index=False)
    rec = Recorder()
    assert rec.sender(backend).handle(WebhookMessage(tenant, job.id, delivery_id(job), 1, time.time()).encode()) \
        == "delivered"
    _url, _addresses, body, headers = rec.calls[0]
    return body, headers


def test_a_delivery_signed_for_one_tenant_fails_with_another_tenants_secret(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    secrets = WebhookSecrets(backend.stores)
    a, b = secrets.create("tenant-a"), secrets.create("tenant-b")
    body, headers = _deliver(backend, "tenant-a")
    assert webhooks.verify(a.value, body, headers)["status"] == "succeeded"
    with pytest.raises(webhooks.WebhookVerificationError, match="bad signature"):
        webhooks.verify(b.value, body, headers)
    with pytest.raises(webhooks.WebhookVerificationError, match="bad signature"):
        webhooks.verify(SECRET, body, headers)  # the deployment-wide secret signs for nobody but the default tenant


def test_the_signature_covers_the_event_and_the_delivery_id(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    public_dns(monkeypatch)
    body, headers = _deliver(backend, "local")
    assert webhooks.verify(SECRET, body, headers)
    for name, value in (("Thematiq-Delivery", "0" * 32), ("Thematiq-Event", "job.failed")):
        with pytest.raises(webhooks.WebhookVerificationError, match="bad signature"):
            webhooks.verify(SECRET, body, {**headers, name: value})  # a replay under a fresh delivery id fails
    t = int(headers["Thematiq-Signature"].split(",")[0][2:])
    with pytest.raises(webhooks.WebhookVerificationError, match="stale"):
        webhooks.verify(SECRET, body, headers, now=t + 301)
    assert webhooks.verify(SECRET, body, headers, now=t + 299)


def test_moving_the_field_delimiter_between_event_and_delivery_does_not_verify(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    body, headers = _deliver(backend, "local")
    event, delivery = headers["Thematiq-Event"], headers["Thematiq-Delivery"]
    head, _, tail = event.partition(".")
    assert tail, "event names hold a dot: the signed string alone cannot tell the fields apart"
    # The same signed bytes, <t>.job.succeeded.<id>.<body>, read as event "job" and delivery "succeeded.<id>":
    # a captured delivery replayed under a fresh delivery id.
    shifted = {**headers, "Thematiq-Event": head, "Thematiq-Delivery": f"{tail}.{delivery}"}
    with pytest.raises(webhooks.WebhookVerificationError, match="malformed"):
        webhooks.verify(SECRET, body, shifted)


def test_a_rotation_signs_with_both_secrets_until_the_old_one_is_revoked(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    secrets = WebhookSecrets(backend.stores)
    assert [s.id for s in secrets.list("local")] == [DEPLOYMENT_SECRET_ID], "WEBHOOK_SECRET is the default's first"
    new = secrets.create("local")
    assert [s.id for s in secrets.list("local")] == [DEPLOYMENT_SECRET_ID, new.id], "migrated into the row"
    body, headers = _deliver(backend, "local")
    assert headers["Thematiq-Signature"].count("v1=") == 2
    webhooks.verify(SECRET, body, headers)
    webhooks.verify(new.value, body, headers)
    with pytest.raises(Conflict):
        secrets.create("local")  # a third secret: the rotation must end first
    secrets.revoke("local", DEPLOYMENT_SECRET_ID)
    body, headers = _deliver(backend, "local")
    assert headers["Thematiq-Signature"].count("v1=") == 1
    webhooks.verify(new.value, body, headers)
    with pytest.raises(webhooks.WebhookVerificationError):
        webhooks.verify(SECRET, body, headers)
    with pytest.raises(Conflict):
        secrets.revoke("local", new.id)  # never the last one
    with pytest.raises(NotFound):
        secrets.revoke("local", "whs_nope")


def test_no_tenant_reads_or_revokes_another_tenants_secrets(backend: Backend) -> None:
    secrets = WebhookSecrets(backend.stores)
    a = secrets.create("tenant-a")
    assert secrets.list("tenant-b") == []
    with pytest.raises(NotFound):
        secrets.revoke("tenant-b", a.id)
    assert [s.id for s in secrets.list("tenant-a")] == [a.id]


@pytest.mark.parametrize("mode", ["drop", "commit-5xx"])
def test_a_rotation_whose_answer_is_lost_is_applied_once(backend: Backend, mode: str) -> None:
    secrets = WebhookSecrets(backend.stores)
    first = secrets.create("tenant-a")
    rule = backend.faults.arm("table", mode, contains="webhook-secrets", count=1)
    second = secrets.create("tenant-a")
    assert rule.hits == 1
    assert [s.id for s in secrets.list("tenant-a")] == [first.id, second.id]
    stored = WebhookStore.of(backend.stores).secrets("tenant-a")
    assert [s.value for s in stored.secrets] == [first.value, second.value]


# 5,000 digits: int() refuses over 4,300 with a plain ValueError, which a receiver catching the verification error
# (to answer 401) did not catch: a forged header gave it a 500.
@pytest.mark.parametrize("t", ["²", "١٧٠٠٠٠٠٠٠٠", "-5", "", "9" * 5000], ids=["sup", "arabic", "neg", "empty", "long"])
def test_a_timestamp_that_is_not_ascii_digits_is_a_verification_error(t: str) -> None:
    headers = {"Thematiq-Signature": f"t={t},v1=00", "Thematiq-Event": "job.succeeded", "Thematiq-Delivery": "0" * 32}
    with pytest.raises(webhooks.WebhookVerificationError, match="malformed"):
        webhooks.verify(SECRET, b"{}", headers)


@pytest.mark.parametrize("v1", ["\u00e9" * 64, "\u0660" * 64, "zz", ""], ids=["latin", "arabic-digits", "short", "empty"])
def test_a_signature_that_is_not_hex_is_a_verification_error_not_a_type_error(v1: str) -> None:
    # hmac.compare_digest raises TypeError for a str with a non-ASCII character: a forged header made a receiver
    # that catches WebhookVerificationError (to answer 401) fail with a 500 instead.
    headers = {"Thematiq-Signature": f"t={int(time.time())},v1={v1}", "Thematiq-Event": "job.succeeded",
               "Thematiq-Delivery": "0" * 32}
    with pytest.raises(webhooks.WebhookVerificationError):
        webhooks.verify(SECRET, b"{}", headers)


@pytest.fixture
def _not_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process whose local time is not UTC (a developer's machine; a container with TZ set)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("_not_utc")
def test_the_deployment_secrets_created_at_is_an_rfc_3339_time_in_utc(backend: Backend) -> None:
    """``created_at`` is an OpenAPI ``date-time`` (RFC 3339: an offset is required). The default tenant's
    ``WEBHOOK_SECRET`` (id ``deployment``) was listed as ``1969-12-31T19:00:00`` on a machine in New York: a naive
    local time, no offset, not the epoch it stands for; migrated into the row, the same text was read back as local
    time (review45w)."""
    from datetime import UTC, datetime

    secrets = WebhookSecrets(backend.stores)
    epoch = datetime.fromtimestamp(0, UTC)

    def listed() -> dict[str, datetime]:
        views = [s.view() for s in secrets.list("local")]
        for v in views:
            parsed = datetime.fromisoformat(v["created_at"])
            assert parsed.utcoffset() is not None, f"no offset: {v['created_at']}"
        return {v["id"]: datetime.fromisoformat(v["created_at"]) for v in views}

    assert listed() == {DEPLOYMENT_SECRET_ID: epoch}
    new = secrets.create("local")  # the migration stores it in the row
    assert listed() == {DEPLOYMENT_SECRET_ID: epoch, new.id: new.created_at}


@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_a_revocation_whose_answer_is_lost_is_applied_once(backend: Backend, mode: str) -> None:
    """Decided by re-reading: the call returns as if the answer had arrived (not a 404 for the id it removed, nor a
    503 for a write that happened), and the other secret stays."""
    secrets = WebhookSecrets(backend.stores)
    old, new = secrets.create("tenant-a"), secrets.create("tenant-a")
    rule = backend.faults.arm("table", mode, contains="webhook-secrets", count=1)
    secrets.revoke("tenant-a", old.id)
    assert rule.hits == 1
    assert [s.id for s in secrets.list("tenant-a")] == [new.id]
    with pytest.raises(NotFound):
        secrets.revoke("tenant-a", old.id)


# -- Idempotency-Key on POST /webhooks/secrets (secrets45) -----------------------------------------------------------
@pytest.mark.parametrize("mode", ["drop", "commit-5xx", "commit-5xx-unreachable"])
def test_a_create_whose_answer_is_lost_is_answered_again_for_its_key(backend: Backend, mode: str) -> None:
    """The client lost the answer (or got a 503 for a write that happened) and retries with the same key: one
    secret, the same id and value, even with two secrets now active (before secrets45 a second secret, or a 409)."""
    secrets = WebhookSecrets(backend.stores)
    old = secrets.create("tenant-a")
    rule = backend.faults.arm("table", mode, contains="webhook-secrets", count=1)
    try:
        first: Secret | None = secrets.create_once("tenant-a", "key-1").row
    except StorageUnavailable:
        first = None  # the call could not decide: the client sees a 503 and retries
    assert rule.hits == 1
    retry = secrets.create_once("tenant-a", "key-1")
    assert not retry.applied
    assert [s.id for s in secrets.list("tenant-a")] == [old.id, retry.row.id]
    stored = WebhookStore.of(backend.stores).secrets("tenant-a").secrets[1]
    assert (retry.row.id, retry.row.value) == (stored.id, stored.value)
    if first is not None:
        assert (first.id, first.value) == (stored.id, stored.value)


def test_a_key_reused_with_another_body_is_a_409_naming_the_header(backend: Backend) -> None:
    secrets = WebhookSecrets(backend.stores)
    made = secrets.create_once("tenant-a", "key-1", b"")
    assert made.applied
    with pytest.raises(Conflict) as err:
        secrets.create_once("tenant-a", "key-1", b'{"x":1}')
    assert err.value.extra["field"] == "Idempotency-Key"
    assert [s.id for s in secrets.list("tenant-a")] == [made.row.id]
    # Another tenant's same key is its own: keys are remembered per tenant.
    assert secrets.create_once("tenant-b", "key-1", b'{"x":1}').applied


def test_a_key_is_remembered_for_its_window_and_only_as_a_hash(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    import shared.api.webhook_secrets as module
    from shared.core.jobs import utcnow
    from shared.core.webhooks import SECRET_IDEMPOTENCY_WINDOW

    secrets = WebhookSecrets(backend.stores)
    key = "key-remembered-as-a-hash"
    made = secrets.create_once("tenant-a", key).row
    entity = WebhookStore.of(backend.stores).table.get_entity("tenant-a", "~webhook-secrets")
    assert key not in str(dict(entity)) and made.value not in str(dict(entity))
    later = utcnow() + SECRET_IDEMPOTENCY_WINDOW + timedelta(seconds=1)
    monkeypatch.setattr(module, "utcnow", lambda: later)
    again = secrets.create_once("tenant-a", key)
    assert again.applied and again.row.id != made.id, "past the window the key creates a new secret"
    assert len(secrets.list("tenant-a")) == 2
