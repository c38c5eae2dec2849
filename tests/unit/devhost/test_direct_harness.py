"""tests/support/direct.py answers as the runtime would: what the worker refuses, the harness refuses too.

It used to hand a function's return value straight back, so an HTTP function returning ``None`` (a 500 in the
worker) or a queue function returning a value without a ``$return`` binding passed there and failed in Azure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import azure.functions as func
import pytest

from tests.support import direct


@pytest.fixture
def fake_function(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    table: dict[str, Any] = {}
    monkeypatch.setattr(direct, "functions", lambda: table)
    yield table


def test_an_http_function_returning_none_is_refused_as_the_runtime_refuses_it(fake_function: dict[str, Any]) -> None:
    fake_function["nothing"] = lambda req: None
    with pytest.raises(direct.RuntimeRefused, match="500"):
        direct.http("nothing", "GET", "nothing")


def test_the_function_gets_the_runtimes_request_and_the_caller_the_hosts_answer(fake_function: dict[str, Any]) -> None:
    seen: dict[str, Any] = {}

    def fn(req: func.HttpRequest) -> func.HttpResponse:
        seen.update(body=req.get_body(), header=req.headers.get("x-thing"), id=req.route_params["id"],
                    q=req.params.get("q"))
        return func.HttpResponse(b'{"ok": true}', status_code=201, headers={"Location": "/x"},
                                 mimetype="application/problem+json")

    fake_function["fn"] = fn
    resp = direct.http("fn", "POST", "x/7", raw=b"\x00\xff", headers={"X-Thing": "A"}, params={"q": "1"},
                       route_params={"id": "7"})
    assert seen == {"body": b"\x00\xff", "header": "A", "id": "7", "q": "1"}
    assert (resp.status_code, resp.mimetype, resp.headers["location"]) == (201, "application/problem+json", "/x")
    assert direct.body_of(resp) == {"ok": True}
