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


def test_numpy_integers_go_as_json_integers_in_params_and_input(platform: Platform,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # input42: json.dumps refused numpy's integers (a DataFrame's column) with a TypeError, num_themes and max_themes
    # alike; any numbers.Integral is now the JSON integer it is, and a bool stays a JSON boolean.
    import numpy as np

    sent: list[bytes] = []

    def send(self: Client, req: urllib.request.Request) -> Response:
        assert isinstance(req.data, bytes)
        sent.append(req.data)
        answer = http("submit_job", "POST", "jobs", raw=req.data, headers=dict(req.header_items()))
        return Response(answer.status_code, {"etag": ""}, answer.get_body())

    monkeypatch.setattr(Client, "_send", send)
    client = Client("http://127.0.0.1:1/api", key="k")
    params = {"num_themes": np.int64(6), "max_themes": np.int32(8), "min_theme_size": np.uint8(3),
              "multi_label": True, "seed": np.int16(-0)}
    job = client.submit("thematic", [{"id": np.int64(1), "text": "late", "metadata": {"nps": np.int64(7)}},
                                     {"id": 2, "text": "slow", "metadata": {"nps": 8}}], params)
    body = json.loads(sent[0])
    assert body["params"] == {"num_themes": 6, "max_themes": 8, "min_theme_size": 3, "multi_label": True, "seed": 0}
    assert body["params"]["multi_label"] is True
    assert [type(body["params"][k]) for k in ("num_themes", "max_themes", "min_theme_size", "seed")] == [int] * 4
    assert body["input"][0] == {"id": 1, "text": "late", "metadata": {"nps": 7}}
    assert job.params["num_themes"] == 6 and job.params["max_themes"] == 8
    with pytest.raises(TypeError, match="bool"):  # numpy's bool_ is no Integral: not sent as 0 or 1
        client.submit("thematic", [{"id": 1, "text": "late"}], {"multi_label": np.True_})
