"""The API's answer when a tenant's sealed secrets row opens with no configured key (review44p).

``WEBHOOK_SECRETS_KEY`` rotated without ``WEBHOOK_SECRETS_KEY_PREVIOUS`` (or a row copied from elsewhere): the row
is ``Unsealable``. The sender already took that as a deployment fault (a failed attempt, retried; review42), but the
routes that read the row answered a bare 500 ``storage-error`` ("an internal error occurred"): listing, creating and
revoking secrets, and every submission with a callback. Now a 503 ``service-misconfigured`` with ``Retry-After``,
as for an unresolved Key Vault reference, nothing stored; setting the old key as ``WEBHOOK_SECRETS_KEY_PREVIOUS``
mends it.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http
from tests.support.webhooks import public_dns

OLD = "test-key-" + "o" * 32
NEW = "test-key-" + "n" * 32
_CALLBACK = {"pipeline": "echo", "input": [1], "callback": {"url": "https://hooks.example.com/x"}}


def _calls() -> list[tuple[str, Any]]:
    return [
        ("list", lambda: http("list_webhook_secrets", "GET", "webhooks/secrets")),
        ("create", lambda: http("create_webhook_secret", "POST", "webhooks/secrets")),
        ("revoke", lambda: http("revoke_webhook_secret", "DELETE", "webhooks/secrets/whs_0", route_params={"id": "whs_0"})),
        ("submit", lambda: http("submit_job", "POST", "jobs", body=_CALLBACK)),
    ]


@pytest.mark.parametrize("call", range(4), ids=[name for name, _ in _calls()])
def test_a_row_no_configured_key_opens_is_a_503_naming_no_secret(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, call: int
) -> None:
    public_dns(monkeypatch)
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", OLD)
    monkeypatch.delenv("WEBHOOK_SECRETS_KEY_PREVIOUS", raising=False)
    assert http("create_webhook_secret", "POST", "webhooks/secrets").status_code == 201
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY", NEW)  # rotated, the old key forgotten
    resp = _calls()[call][1]()
    assert resp.status_code == 503, resp.get_body()
    problem = body_of(resp)
    assert problem["type"].endswith("/service-misconfigured") and resp.headers["Retry-After"] == "120"
    assert OLD not in resp.get_body().decode() and NEW not in resp.get_body().decode()
    assert platform.service.list("local", {})[0] == []  # nothing stored
    monkeypatch.setenv("WEBHOOK_SECRETS_KEY_PREVIOUS", OLD)  # the operator's mend
    assert http("list_webhook_secrets", "GET", "webhooks/secrets").status_code == 200
    assert http("submit_job", "POST", "jobs", body=_CALLBACK).status_code == 202
