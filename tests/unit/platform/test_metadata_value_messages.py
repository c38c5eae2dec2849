"""A metadata value a score or a declared rating cannot read is quoted as the client sent it, in JSON (review41): the
422 said ``not a number: 'True'`` and ``'None'``-style Python reprs for JSON ``true``; now ``true``, ``"high"``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.platform import Platform
from tests.support.direct import body_of, http

_TEXTS = ["late delivery again", "rude courier today", "damaged box arrived", "great cheap price"]


def _submit(params: dict[str, Any], value: Any) -> Any:
    items = [{"id": i, "text": t, "metadata": {"s": value if i == 1 else 3}} for i, t in enumerate(_TEXTS * 3)]
    body = {"pipeline": "thematic", "params": {"llm": "off", **params}, "input": items}
    return http("submit_job", "POST", "jobs", raw=json.dumps(body).encode())


@pytest.mark.parametrize(("value", "shown"), [(True, "true"), ("high", '"high"'), ([1], "[1]")])
@pytest.mark.parametrize(("params", "field"), [
    ({"score": {"key": "s", "scale": "numeric"}}, "params.score.key"),
    ({"sentiment_from": {"key": "s", "scale": "1-5"}}, "input[1].metadata.s"),
])
def test_the_value_is_quoted_as_json(platform: Platform, params: dict[str, Any], field: str, value: Any,
                                     shown: str) -> None:
    resp = _submit(params, value)
    assert resp.status_code == 422, resp.get_body()
    errors = body_of(resp)["errors"]
    assert [e["field"] for e in errors] == [field]
    assert errors[0]["message"].endswith(f": {shown}"), errors
