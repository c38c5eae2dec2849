"""A rule across parameters names the parameter it blames (review41): ``num_themes`` out of its range, two seed
themes of one name and the English-only encoder with another language were 422s naming ``params`` (a model
validator's error sits on the model), and a ``num_themes`` that was neither ``"auto"`` nor an integer named the
union's members (``params.num_themes.literal['auto']``, ``params.num_themes.int``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http

_ITEMS = [{"id": i, "text": t} for i, t in enumerate(["late delivery", "late delivery", "rude courier"])]


def _submit(params: dict[str, Any]) -> Any:
    body = {"pipeline": "thematic", "params": {"llm": "off", **params}, "input": _ITEMS}
    return http("submit_job", "POST", "jobs", raw=json.dumps(body).encode("utf-8"))


@pytest.mark.parametrize(("params", "field"), [
    ({"num_themes": 0}, "params.num_themes"),
    ({"num_themes": 201}, "params.num_themes"),
    ({"num_themes": 9, "max_themes": 8}, "params.num_themes"),
    ({"num_themes": "abc"}, "params.num_themes"),
    ({"num_themes": None}, "params.num_themes"),
    ({"seed_themes": [{"name": "Delivery"}, {"name": "delivery "}]}, "params.seed_themes"),
    ({"embedding": "quality", "language": "de"}, "params.embedding"),
])
def test_a_broken_rule_names_its_parameter(platform: Platform, params: dict[str, Any], field: str) -> None:
    resp = _submit(params)
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    problem = body_of(resp)
    assert [e["field"] for e in problem["errors"]] == [field]
    assert field in problem["detail"]
    assert platform.service.list("local", {})[0] == []  # nothing stored


def test_auto_and_an_integer_in_range_are_taken(platform: Platform) -> None:
    assert _submit({"num_themes": "auto"}).status_code == 202
    assert body_of(_submit({"num_themes": 8, "max_themes": 8}))["params"]["num_themes"] == 8
