"""A query parameter given twice is a 422 naming it, read from the query as sent (input42).

The Functions host hands a function a repeated name once, its values joined with "," (ASP.NET's
``StringValues.ToString()``; devhost and ``tests.support.direct`` do the same), so ``metadata[nps]=7&metadata[nps]=8``
was the one filter ``7,8``: it matched nothing (a 200 with ``total`` 0), and ``metadata[tags]=a&metadata[tags]=b``
matched the responses whose value is ``a,b``. The routes now read ``req.url``, which carries the raw query: a repeat
is named, a single value is taken whole, commas and all. The same held for every other parameter of
``/responses``, ``/result`` and the job list; a parameter with no name (``?=x``) was an error naming the field ``""``,
and ``metadata[]`` (the key "", which jobs from before input42 may hold) an unknown parameter.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.core.jobs import Status, utcnow
from shared.platform import Platform
from shared.storage.blobs import encode_input
from tests.support.direct import body_of, http
from tests.support.synthetic_result import planted_job, synthetic_job


def _responses(job_id: str, pairs: list[tuple[str, str]] | None = None, raw: str | None = None) -> Any:
    return http("list_job_responses", "GET", f"jobs/{job_id}/responses", params=pairs, raw_query=raw,
                route_params={"id": job_id})


def _tagged_job(platform: Platform, legacy_key: bool = False) -> str:
    """A succeeded job whose responses r0, r3, r6... have ``tags`` "a,b", the others "a"; with ``legacy_key`` its
    stored input also has the key "" (as a job submitted before input42 could)."""
    items, doc = synthetic_job(12, seed=4, impact=False)
    for i, it in enumerate(items):
        it["metadata"]["tags"] = "a,b" if i % 3 == 0 else "a"
    resp = http("submit_job", "POST", "jobs", body={"pipeline": "thematic", "params": {"llm": "off"}, "input": items})
    assert resp.status_code == 202, resp.get_body()
    job_id = str(body_of(resp)["id"])
    row = platform.stores.jobs.get("local", job_id)
    body = json.dumps(doc, separators=(",", ":")).encode()
    extra: dict[str, Any] = {}
    if legacy_key:
        for i, it in enumerate(items):
            it["metadata"][""] = "blank" if i < 5 else "other"
        extra["input_inline"] = encode_input(items)
    platform.stores.jobs.update(row, status=Status.SUCCEEDED, finished_at=utcnow(), result_bytes=len(body),
                                result_blob=f"local/{job_id}/result-1.json", result_inline=body, **extra)
    return job_id


def _fields(resp: Any) -> list[str]:
    assert resp.status_code == 422, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    return [e["field"] for e in body_of(resp)["errors"]]


def _repeated(resp: Any) -> list[str]:
    """The fields of a 422 that says each was given twice (the joined value was checked as one before: '5,5' was
    'an integer from 1 to 500', 'csv,md' 'one of json, ...', as if the value were misspelt)."""
    fields = _fields(resp)
    assert all("given 2 times" in e["message"] for e in body_of(resp)["errors"]), body_of(resp)
    return fields


def test_a_repeated_metadata_filter_is_a_422_naming_it_not_an_empty_page(platform: Platform) -> None:
    job_id = planted_job(platform)
    resp = _responses(job_id, [("metadata[nps]", "7"), ("metadata[nps]", "8")])
    assert _repeated(resp) == ["metadata[nps]"]


def test_a_value_with_a_comma_is_taken_whole_and_two_values_are_never_read_as_one(platform: Platform) -> None:
    job_id = _tagged_job(platform)
    page = body_of(_responses(job_id, [("metadata[tags]", "a,b")]))
    assert [r["id"] for r in page["items"]] == ["r0", "r3", "r6", "r9"]
    # Joined by the host, these two were "a,b" and matched the four above.
    assert _fields(_responses(job_id, [("metadata[tags]", "a"), ("metadata[tags]", "b")])) == ["metadata[tags]"]
    # Encoded or not, the comma is the value's.
    assert body_of(_responses(job_id, raw="metadata%5Btags%5D=a%2Cb"))["total"] == 4


@pytest.mark.parametrize(("name", "value"), [("theme", "t1"), ("subtheme", "t1.1"), ("bucket", "theme"),
                                             ("sentiment", "negative"), ("limit", "5"), ("cursor", "x")])
def test_every_parameter_of_the_responses_route_is_named_when_repeated(platform: Platform, name: str,
                                                                       value: str) -> None:
    job_id = planted_job(platform)
    resp = _responses(job_id, [(name, value), (name, value)])
    assert _repeated(resp) == [name]


def test_the_result_and_the_job_list_name_a_repeated_parameter_too(platform: Platform) -> None:
    job_id = planted_job(platform)
    resp = http("get_job_result", "GET", f"jobs/{job_id}/result", params=[("format", "csv"), ("format", "md")],
                route_params={"id": job_id})
    assert _repeated(resp) == ["format"]
    resp = http("list_jobs", "GET", "jobs", params=[("status", "failed"), ("status", "running")])
    assert _repeated(resp) == ["status"]
    # One each is fine, and the function key may come along (it is the host's).
    ok = http("get_job_result", "GET", f"jobs/{job_id}/result", raw_query="format=csv&code=k&code=k",
              route_params={"id": job_id})
    assert ok.status_code == 200, ok.get_body()


@pytest.mark.parametrize(("route", "tail"), [("list_job_responses", "/responses"), ("get_job_result", "/result")])
def test_a_parameter_with_no_name_is_a_422_naming_the_query(platform: Platform, route: str, tail: str) -> None:
    job_id = planted_job(platform)
    resp = http(route, "GET", f"jobs/{job_id}{tail}", raw_query="=x", route_params={"id": job_id})
    assert _fields(resp) == ["query"]
    assert _fields(http("list_jobs", "GET", "jobs", raw_query="limit=5&=x")) == ["query"]


def test_metadata_with_an_empty_key_is_a_filter_for_the_key_empty(platform: Platform) -> None:
    fresh = planted_job(platform)
    resp = _responses(fresh, [("metadata[]", "x")])
    assert _fields(resp) == ["metadata[]"]
    assert "no response has the metadata key ''" in body_of(resp)["errors"][0]["message"]
    legacy = _tagged_job(platform, legacy_key=True)
    page = body_of(_responses(legacy, [("metadata[]", "blank")]))
    assert [r["id"] for r in page["items"]] == ["r0", "r1", "r2", "r3", "r4"]


def test_a_metadata_key_longer_than_a_stored_key_can_be_is_named_as_such(platform: Platform) -> None:
    job_id = planted_job(platform)
    resp = _responses(job_id, [("metadata[" + "k" * 201 + "]", "x")])
    assert len(_fields(resp)) == 1
    assert "at most 200 characters" in body_of(resp)["errors"][0]["message"]
