"""The typed client's webhook-secret calls against the service itself (platform46), with faults at the transport.

Each request the client sends is handed to the service's own handler (``tests.support.direct.http``) on the
``backend`` (the fake here, Azurite in the twin); a fault then loses the answer after the service has acted on it
(a dropped connection, or a 503 for a write that happened). The client retries with the same ``Idempotency-Key``,
so the tenant ends up with one new secret, the one the call returns, and a revocation whose answer was lost is
not reported as a 404.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable

import pytest

from tests.support.backends import Backend
from tests.support.direct import http
from thematiq_client import ApiError, Client, TransportError
from thematiq_client.client import Response

Fault = Callable[[Response], Response]


def _drop(answer: Response) -> Response:
    raise TransportError("cannot reach the service (connection reset)")


def _five_oh_three(answer: Response) -> Response:
    return Response(503, {"content-type": "application/problem+json", "retry-after": "0"},
                    b'{"type":"about:blank","title":"Service unavailable","status":503,"detail":"","instance":""}')


FAULTS = {"drop": _drop, "commit-503": _five_oh_three}


class Service:
    """The service behind a client: every request goes to its handler; ``lose`` faults the next N answers."""

    def __init__(self) -> None:
        self.sent: list[urllib.request.Request] = []
        self.faults: list[Fault] = []

    def send(self, client: Client, req: urllib.request.Request) -> Response:
        self.sent.append(req)
        path = urllib.parse.urlsplit(req.full_url).path.removeprefix("/api/")
        method = req.get_method()
        if path == "webhooks/secrets":
            name = "create_webhook_secret" if method == "POST" else "list_webhook_secrets"
            answer = http(name, method, path, raw=req.data or b"", headers=dict(req.header_items()))
        else:
            secret_id = urllib.parse.unquote(path.removeprefix("webhooks/secrets/"))
            answer = http("revoke_webhook_secret", method, path, headers=dict(req.header_items()),
                          route_params={"id": secret_id})
        got = Response(answer.status_code, {k.lower(): v for k, v in answer.headers.items()}, answer.get_body())
        return self.faults.pop(0)(got) if self.faults else got


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Service:
    svc = Service()
    monkeypatch.setattr(Client, "_send", lambda self, req: svc.send(self, req))
    return svc


def _client() -> Client:
    return Client("http://127.0.0.1:1/api", key="k", sleep=lambda s: None)


def _stored(backend: Backend) -> list[str]:
    from shared.platform import current

    return [s.id for s in current().webhook_secrets.list("local")]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_create_whose_answer_is_lost_makes_one_secret(backend: Backend, service: Service, fault: str) -> None:
    client = _client()
    before = _stored(backend)
    service.faults = [FAULTS[fault]]  # the first POST is applied by the service, its answer lost
    created = client.create_webhook_secret()
    posts = [r for r in service.sent if r.get_method() == "POST"]
    assert len(posts) == 2, "the lost answer was retried"
    keys = {r.get_header("Idempotency-key") for r in posts}
    assert len(keys) == 1 and None not in keys, "the retry re-sends the call's Idempotency-Key"
    assert _stored(backend) == [*before, created.id], "exactly one new secret, the one returned"
    assert created.secret.startswith("whsec_")
    assert [s.id for s in client.webhook_secrets()] == [*before, created.id]


def test_each_call_has_its_own_key_and_a_given_key_replays(backend: Backend, service: Service) -> None:
    client = _client()
    assert _stored(backend) == ["deployment"]  # WEBHOOK_SECRET, the default tenant's first secret
    first = client.create_webhook_secret("rotate-2026-12")
    again = client.create_webhook_secret("rotate-2026-12")
    assert again == first  # the same id and value, answered 200
    client.revoke_webhook_secret("deployment")
    second = client.create_webhook_secret()
    posts = [r for r in service.sent if r.get_method() == "POST"]
    assert len(posts) == 3 and posts[-1].get_header("Idempotency-key") not in (None, "rotate-2026-12")
    assert second.id != first.id and _stored(backend) == [first.id, second.id]
    with pytest.raises(ApiError) as err:  # a third active secret
        client.create_webhook_secret()
    assert err.value.status == 409


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_revocation_whose_answer_is_lost_is_done_once_and_not_a_404(backend: Backend, service: Service,
                                                                       fault: str) -> None:
    client = _client()
    assert _stored(backend) == ["deployment"]
    keep = client.create_webhook_secret().id
    old = "deployment"
    service.faults = [FAULTS[fault]]  # the DELETE lands, its answer is lost; the retry finds nothing to delete
    client.revoke_webhook_secret(old)
    deletes = [r for r in service.sent if r.get_method() == "DELETE"]
    assert len(deletes) == 2
    assert [s.id for s in client.webhook_secrets()] == [keep]
    with pytest.raises(ApiError) as err:  # a first answer of 404 is still the caller's mistake
        client.revoke_webhook_secret("whs_unknown")
    assert err.value.status == 404
    with pytest.raises(ApiError) as last:  # and the last secret is still refused
        client.revoke_webhook_secret(keep)
    assert last.value.status == 409
