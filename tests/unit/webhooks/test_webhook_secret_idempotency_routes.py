"""``POST /webhooks/secrets`` with an ``Idempotency-Key`` at the HTTP edge (secrets45): a replay is a 200 with the
same secret (id and value), another body is a 409 problem naming the header, a bad header value is a 400 problem
naming it with nothing stored, and without the header every call creates a secret (201)."""

from __future__ import annotations

import json

import azure.functions as func
import pytest

from blueprints.api import create_webhook_secret
from shared.platform import Platform
from tests.support.direct import body_of, http

ROUTE = ("create_webhook_secret", "POST", "webhooks/secrets")


def _listed(platform: Platform) -> list[str]:
    return [s.id for s in platform.webhook_secrets.list("local")]


def test_a_replay_of_the_key_answers_the_same_secret_and_another_body_is_a_409(platform: Platform) -> None:
    before = _listed(platform)
    first = http(*ROUTE, headers={"Idempotency-Key": "rotate-2026-12"})
    assert first.status_code == 201, first.get_body()
    again = http(*ROUTE, headers={"Idempotency-Key": "rotate-2026-12"})
    assert again.status_code == 200, again.get_body()
    assert body_of(again) == body_of(first) and again.headers["Cache-Control"] == "no-store"
    other = http(*ROUTE, headers={"Idempotency-Key": "rotate-2026-12"}, body={"note": "x"})
    assert other.status_code == 409 and other.mimetype == "application/problem+json", other.get_body()
    assert [e["field"] for e in body_of(other)["errors"]] == ["Idempotency-Key"]
    assert body_of(first)["secret"] not in other.get_body().decode()
    assert _listed(platform) == [*before, body_of(first)["id"]]


def test_without_the_header_each_call_creates_a_secret(platform: Platform) -> None:
    before = _listed(platform)
    assert http(*ROUTE).status_code == 201
    assert len(_listed(platform)) == len(before) + 1


@pytest.mark.parametrize("key", ["k" * 201, "cl\u00e9", "k1\n", "two words", ""],
                         ids=["too-long", "non-ascii", "newline", "space", "empty"])
def test_a_bad_key_is_a_400_naming_the_header_and_nothing_is_stored(platform: Platform, key: str) -> None:
    before = _listed(platform)
    # The handler itself, called with header values the runtime's own request building might not carry.
    req = func.HttpRequest("POST", "http://localhost/api/webhooks/secrets", headers={"Idempotency-Key": key},
                           params={}, route_params={}, body=b"")
    resp = create_webhook_secret(req)
    assert resp.status_code == 400, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in json.loads(resp.get_body())["errors"]] == ["Idempotency-Key"]
    assert _listed(platform) == before
