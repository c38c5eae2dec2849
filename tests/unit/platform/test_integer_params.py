"""Every integer parameter of every pipeline takes JSON integers only, as the booleans do (test_boolean_params.py).

Lax pydantic read ``"5"``, ``" 5"``, ``"5.0"`` and ``5.0`` as 5 and stored the integer, so a client's string passed
here and nowhere that reads the parameter as JSON; numbers as strings are a 422 naming the field, like every other
bad parameter, and nothing is stored. The integer parameters are found in each params model's JSON schema (top
level, lists of integers, and integers of nested objects), so a pipeline or parameter added later is covered too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.core.registry import default_registry
from shared.platform import Platform
from tests.support.direct import body_of, http

_ITEMS = [{"id": i, "text": t} for i, t in enumerate(["late delivery", "late delivery", "rude courier"])]
#: A valid input of each pipeline (the parameter checks come first, but a 202 needs the input to pass too).
_INPUTS: dict[str, Any] = {"thematic": _ITEMS, "fanout": [1, 2, 3]}
#: The smallest valid object of a nested model that holds integers, by its JSON-schema name.
_MINIMAL: dict[str, dict[str, Any]] = {"SeedTheme": {"name": "late delivery"}}
#: Base params of a pipeline, so a submission never needs what is not under test (an LLM).
_BASE: dict[str, dict[str, Any]] = {"thematic": {"llm": "off"}}


def _is_integer(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "integer" or any(p.get("type") == "integer" for p in prop.get("anyOf", []))


def _valid(prop: dict[str, Any]) -> int:
    default = prop.get("default")
    return default if isinstance(default, int) and not isinstance(default, bool) else 3


def _refs(prop: dict[str, Any]) -> list[tuple[str, bool]]:
    """The nested models a property holds: (name, in a list)."""
    out: list[tuple[str, bool]] = []
    for p in [prop, *prop.get("anyOf", [])]:
        if "$ref" in p:
            out.append((p["$ref"].rsplit("/", 1)[-1], False))
        if "$ref" in p.get("items", {}):
            out.append((p["items"]["$ref"].rsplit("/", 1)[-1], True))
    return out


def _cases() -> list[tuple[str, str, Any, int]]:
    """(pipeline, field path, a function of the value giving the params, a valid integer) for every integer."""
    cases: list[Any] = []
    registry = default_registry()
    for name in registry.names():
        pipeline = registry.get(name)
        assert pipeline is not None
        schema = pipeline.params_model.model_json_schema()
        defs = schema.get("$defs", {})
        for field, prop in schema.get("properties", {}).items():
            if _is_integer(prop):
                cases.append((name, field, lambda v, f=field: {f: v}, _valid(prop)))
            if any(_is_integer(p.get("items", {})) for p in [prop, *prop.get("anyOf", [])]):
                cases.append((name, f"{field}[0]", lambda v, f=field: {f: [v]}, 1))
            for model, listed in _refs(prop):
                for inner, inner_prop in defs[model].get("properties", {}).items():
                    if not _is_integer(inner_prop):
                        continue
                    assert model in _MINIMAL, f"add a minimal {model} to _MINIMAL: it holds the integer {inner}"
                    path = f"{field}[0].{inner}" if listed else f"{field}.{inner}"
                    cases.append((name, path, lambda v, f=field, i=inner, m=model, ls=listed: {
                        f: [{**_MINIMAL[m], i: v}] if ls else {**_MINIMAL[m], i: v}}, 1))
    return cases


CASES = _cases()
NOT_INTEGERS = ["5", " 5", "5.0", "0", "", 5.0, 1e3, True, [5], {"n": 5}]


def test_every_pipelines_integers_are_found() -> None:
    found = {(p, f) for p, f, _, _ in CASES}
    assert {("thematic", "num_themes"), ("thematic", "max_themes"), ("thematic", "min_theme_size"),
            ("thematic", "seed"), ("thematic", "fanout_min_responses"), ("thematic", "fanout_chunk_size"),
            ("thematic", "min_group_size"), ("thematic", "seed_themes[0].count"), ("sleep", "steps"),
            ("sleep", "fail_attempts"), ("sleep", "hold_mb"), ("fanout", "chunk_size"),
            ("fanout", "fail_chunks[0]")} <= found


def _submit(pipeline: str, params: dict[str, Any]) -> Any:
    body = {"pipeline": pipeline, "params": {**_BASE.get(pipeline, {}), **params},
            "input": _INPUTS.get(pipeline, [1, 2, 3])}
    return http("submit_job", "POST", "jobs", raw=json.dumps(body).encode("utf-8"))


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("pipeline", "field", "params", "_ok"), CASES, ids=[f"{p}.{f}" for p, f, _, _ in CASES])
def test_an_integer_parameter_that_is_no_json_integer_is_a_422_naming_it(
    platform: Platform, pipeline: str, field: str, params: Any, _ok: int, value: Any
) -> None:
    resp = _submit(pipeline, params(value))
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert [e["field"] for e in body_of(resp)["errors"]] == [f"params.{field}"]
    assert platform.service.list("local", {})[0] == []  # nothing stored


@pytest.mark.parametrize(("pipeline", "field", "params", "ok"), CASES, ids=[f"{p}.{f}" for p, f, _, _ in CASES])
def test_a_json_integer_is_taken_and_stored_as_an_integer(
    platform: Platform, pipeline: str, field: str, params: Any, ok: int
) -> None:
    resp = _submit(pipeline, params(ok))
    assert resp.status_code == 202, resp.get_body()
    assert body_of(resp)["params"] == json.loads(json.dumps(body_of(resp)["params"]))
    stored = body_of(resp)["params"]
    for part in field.replace("[0]", ".0").split("."):
        stored = stored[int(part)] if part.isdigit() else stored[part]
    assert stored == ok and type(stored) is int


def test_a_float_parameter_takes_json_numbers_but_no_strings(platform: Platform) -> None:
    assert _submit("sleep", {"seconds": 0}).status_code == 202
    assert _submit("sleep", {"seconds": 0.5}).status_code == 202
    resp = _submit("sleep", {"seconds": "0.5"})
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == ["params.seconds"]
