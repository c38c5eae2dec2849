"""``params.count_duplicates`` (schema 1.4), ``multi_label`` and ``redact_pii`` are JSON booleans (docs/thematic.md). Lax pydantic took strings and numbers
for one ("yes", "on", "1", 1 as true; "no", "off", "0", 0 as false) and stored the boolean, so a client's string
passed here and nowhere that reads the parameter as JSON; a value that is no boolean is a 422 naming the field,
like every other bad parameter."""

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


NOT_BOOLEANS = ["yes", "no", "true", "false", "on", 1, 0, None]


# null is redact_pii's default ("whenever an LLM is used"), so it is no bad value there.
@pytest.mark.parametrize(("name", "value"), [(n, v) for n in ("count_duplicates", "multi_label", "redact_pii")
                                             for v in NOT_BOOLEANS if not (n == "redact_pii" and v is None)])
def test_a_boolean_parameter_that_is_no_boolean_is_a_422_naming_it(platform: Platform, name: str, value: Any) -> None:
    resp = _submit({name: value})
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in body_of(resp)["errors"]] == [f"params.{name}"]
    assert platform.service.list("local", {})[0] == []  # nothing stored


@pytest.mark.parametrize("name", ["count_duplicates", "multi_label", "redact_pii"])
@pytest.mark.parametrize("value", [True, False])
def test_a_json_boolean_is_taken_and_stored_as_given(platform: Platform, name: str, value: bool) -> None:
    resp = _submit({name: value})
    assert resp.status_code == 202, resp.get_body()
    assert body_of(resp)["params"][name] is value
