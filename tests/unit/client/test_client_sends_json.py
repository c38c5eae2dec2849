"""What the typed client and the CLI send is what the service reads (review41): a JSON body as application/json (a
body of another type is a 415) and integer parameters as JSON integers (a string is a 422 since params are strict)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import http
from thematiq_cli.inputs import parse_params
from thematiq_client import Client
from thematiq_client.client import Response


def test_submit_and_edit_send_json_with_integers_as_integers(platform: Platform,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A job as the service answers one: the service itself, given what the client sends.
    sent: list[urllib.request.Request] = []

    def send(self: Client, req: urllib.request.Request) -> Response:
        sent.append(req)
        if req.get_method() == "POST":
            answer = http("submit_job", "POST", "jobs", raw=req.data, headers=dict(req.header_items()))  # type: ignore[arg-type]
            return Response(answer.status_code, {"etag": ""}, answer.get_body())
        return Response(200, {"etag": '"e"'}, json.dumps({"themes": [], "edits": []}).encode())

    monkeypatch.setattr(Client, "_send", send)
    client = Client("http://127.0.0.1:1/api", key="k")
    params = parse_params(["max_themes=8", "min_theme_size= 3", "num_themes=auto", "seed=0"])
    client.submit("thematic", [{"id": 1, "text": "late"}], params)
    client.edit_themes("a" * 28, [{"op": "rename", "theme": "t1", "label": "Late"}], '"e"')
    for req in sent:
        assert req.get_header("Content-type") == "application/json"
        assert isinstance(req.data, bytes)
    submitted: dict[str, Any] = json.loads(sent[0].data)["params"]  # type: ignore[arg-type]
    assert submitted == {"max_themes": 8, "min_theme_size": 3, "num_themes": "auto", "seed": 0}
    assert all(type(submitted[k]) is int for k in ("max_themes", "min_theme_size", "seed"))
