"""The HTTP API's contract, calling the functions directly: idempotency, tenancy, validation, listing."""

from __future__ import annotations

import base64
import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.config.constants import TENANT_HEADER
from shared.storage.connections import get_queue_client, get_table_client
from tests.support.direct import body_of, http, run_worker_once
from tests.support.platform import fast_settings, submit


@pytest.fixture(autouse=True)
def _env(storage_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast_settings(monkeypatch, MAX_INPUT_BYTES="200000")


def _stored_rows() -> int:
    return len(list(get_table_client().list_entities(select=["RowKey"])))


def _assert_problem(resp: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    body = json.loads(resp.get_body())
    assert body["status"] == status and body["type"].startswith("https://") and body["title"]
    assert "Traceback" not in resp.get_body().decode()
    if field:
        assert field in [e["field"] for e in body.get("errors", [])], body
    return body


def test_fifty_concurrent_identical_idempotent_submissions_create_one_job() -> None:
    body = {"pipeline": "echo", "input": {"n": 1}}

    def post(_: int) -> Any:
        return http("submit_job", "POST", "jobs", body=body, headers={"Idempotency-Key": "same-key-1"})

    with ThreadPoolExecutor(50) as pool:
        responses = list(pool.map(post, range(50)))
    ids = {body_of(r)["id"] for r in responses}
    assert len(ids) == 1
    assert sorted(r.status_code for r in responses) == [200] * 49 + [202]
    # A replay of a job that has not started re-sends its message (issue 11: the first send may have
    # been lost); every message names the one job, and its attempt-1 claim runs it once.
    messages = get_queue_client().peek_messages(max_messages=32)
    assert len(messages) >= 1
    assert {json.loads(base64.b64decode(m.content))["j"] for m in messages} == ids
    rows = list(get_table_client().list_entities(select=["RowKey", "kind"]))
    # One job, its idempotency row, and the tenant's name in the tenants partition (no active-index row:
    # until its first claim a job's message is its record).
    assert sorted(r["kind"] for r in rows) == ["idem", "job", "tenant"]


def test_same_idempotency_key_with_different_body_is_a_conflict() -> None:
    h = {"Idempotency-Key": "k2"}
    assert http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1}, headers=h).status_code == 202
    resp = http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 2}, headers=h)
    _assert_problem(resp, 409, "Idempotency-Key")


def test_another_tenants_job_is_invisible() -> None:
    a = {TENANT_HEADER: "tenant-a"}
    b = {TENANT_HEADER: "tenant-b"}
    j = submit("echo", {}, "secret", headers=a)
    run_worker_once()
    rp = {"id": j["id"]}
    assert http("get_job", "GET", f"jobs/{j['id']}", headers=a, route_params=rp).status_code == 200
    for name, method, path in [
        ("get_job", "GET", f"jobs/{j['id']}"),
        ("get_job_result", "GET", f"jobs/{j['id']}/result"),
        ("cancel_job", "POST", f"jobs/{j['id']}/cancel"),
    ]:
        _assert_problem(http(name, method, path, headers=b, route_params=rp), 404)
    listed = body_of(http("list_jobs", "GET", "jobs", headers=b))
    assert listed["items"] == []
    assert [x["id"] for x in body_of(http("list_jobs", "GET", "jobs", headers=a))["items"]] == [j["id"]]


@pytest.mark.parametrize(
    ("raw", "status", "field"),
    [
        (json.dumps({"pipeline": "nope", "input": 1}).encode(), 422, "pipeline"),
        (json.dumps({"pipeline": "sleep", "params": {"seconds": -1}, "input": 1}).encode(), 422, "params.seconds"),
        (json.dumps({"pipeline": "sleep", "params": {"bogus": 1}, "input": 1}).encode(), 422, "params.bogus"),
        (json.dumps({"pipeline": "echo"}).encode(), 422, "input"),
        (json.dumps({"pipeline": "echo", "input": 1, "extra": 2}).encode(), 422, "extra"),
        (json.dumps([1, 2]).encode(), 422, "body"),
        (b'{"pipeline": "echo", "input": ', 400, "body"),
        (b"", 400, "body"),
        (b'{"pipeline": "echo", "input": "\xff\xfe"}', 400, "body"),
        (b"[" * 5000 + b"]" * 5000, 400, "body"),
        (json.dumps({"pipeline": "echo", "input": "x" * 300_000}).encode(), 413, "body"),
        (json.dumps({"pipeline": "thematic", "params": {"label_language": "de", "llm": "off"},
                     "input": ["a b c"]}).encode(), 422, "params.label_language"),
        (json.dumps({"pipeline": "thematic", "params": {"label_language": "de"}, "input": ["a b c"]}).encode(),
         422, "params.label_language"),  # no LLM provider is configured here
        (json.dumps({"pipeline": "thematic", "params": {"label_language": "xx"}, "input": ["a b c"]}).encode(),
         422, "params.label_language"),
        # A declared rating scale (schema 1.4): not one of the scales, a value outside it, a value that is no number.
        (json.dumps({"pipeline": "thematic", "params": {"llm": "off", "sentiment_from": {"key": "ltr", "scale": "1-6"}},
                     "input": [{"id": 1, "text": "late", "metadata": {"ltr": 3}}]}).encode(),
         422, "params.sentiment_from.scale"),
        (json.dumps({"pipeline": "thematic", "params": {"llm": "off", "sentiment_from": {"key": "ltr", "scale": "1-5"}},
                     "input": [{"id": 1, "text": "late", "metadata": {"ltr": 3}},
                               {"id": 2, "text": "slow", "metadata": {"ltr": 0}}]}).encode(),
         422, "params.sentiment_from.scale"),
        (json.dumps({"pipeline": "thematic", "params": {"llm": "off", "sentiment_from": {"key": "ltr", "scale": "0-10"}},
                     "input": [{"id": 1, "text": "late", "metadata": {"ltr": 3}},
                               {"id": 2, "text": "slow", "metadata": {"ltr": "ten"}}]}).encode(),
         422, "input[1].metadata.ltr"),
        # stats44: params that did nothing, silently (a compare mode without an earlier wave; multi_label on a wave
        # coded one theme per answer by the earlier codebook). 422 before compare_to is looked up.
        (json.dumps({"pipeline": "thematic", "params": {"llm": "off", "compare_mode": "discover"},
                     "input": [{"id": 1, "text": "late"}]}).encode(), 422, "params.compare_mode"),
        (json.dumps({"pipeline": "thematic", "params": {"llm": "off", "multi_label": True, "compare_to": "a" * 28},
                     "input": [{"id": 1, "text": "late"}]}).encode(), 422, "params.multi_label"),
    ],
    ids=[
        "unknown-pipeline",
        "bad-param",
        "unknown-param",
        "no-input",
        "extra-field",
        "not-object",
        "malformed",
        "empty",
        "invalid-utf8",
        "deep-json",
        "too-large",
        "label-language-without-llm",
        "label-language-no-provider",
        "label-language-unknown",
        "sentiment-scale-unknown",
        "sentiment-scale-value-outside",
        "sentiment-scale-value-not-a-number",
        "compare-mode-without-compare-to",
        "multi-label-with-compare-to",
    ],
)
def test_bad_submissions_get_problem_json_and_store_nothing(raw: bytes, status: int, field: str) -> None:
    _assert_problem(http("submit_job", "POST", "jobs", raw=raw), status, field)
    assert _stored_rows() == 0
    assert get_queue_client().peek_messages() == []


def test_a_declared_rating_scale_is_stored_as_given_and_a_plain_key_stays_a_key() -> None:
    items = [{"id": i, "text": f"late parcel {i}", "metadata": {"ltr": 1 + i % 5}} for i in range(6)]
    declared = submit("thematic", {"llm": "off", "sentiment_from": {"key": "ltr", "scale": "0-10"}}, items)
    plain = submit("thematic", {"llm": "off", "sentiment_from": "ltr"}, items)
    assert declared["params"]["sentiment_from"] == {"key": "ltr", "scale": "0-10"}
    assert plain["params"]["sentiment_from"] == "ltr"


def test_large_input_goes_to_blob_storage_and_round_trips() -> None:
    # Random text, so gzip cannot shrink it under the inline limit.
    big = [{"id": i, "text": secrets.token_urlsafe(300)} for i in range(400)]
    j = submit("echo", {}, big)
    run_worker_once()
    result = http("get_job_result", "GET", f"jobs/{j['id']}/result", route_params={"id": j["id"]})
    assert body_of(result) == {"echo": big}
    entity = get_table_client().get_entity("local", j["id"])
    assert entity.get("input_blob") and not entity.get("input_inline")


@pytest.mark.parametrize("job_id", ["../../etc/passwd", "x' or 'a' eq 'a", "ABC", "0" * 29])
def test_invalid_ids_are_404_without_touching_storage(job_id: str) -> None:
    _assert_problem(http("get_job", "GET", f"jobs/{job_id}", route_params={"id": job_id}), 404)


def test_list_paginates_with_continuation_tokens_and_filters() -> None:
    ids = [submit("echo", {}, i)["id"] for i in range(5)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = body_of(http("list_jobs", "GET", "jobs", params=params))
        seen += [x["id"] for x in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == sorted(ids)  # newest first: ids carry inverted time
    assert seen == list(reversed(ids))
    assert pages >= 3
    assert body_of(http("list_jobs", "GET", "jobs", params={"status": "succeeded"}))["items"] == []
    queued = body_of(http("list_jobs", "GET", "jobs", params={"status": "queued", "pipeline": "echo"}))["items"]
    assert len(queued) == 5
    _assert_problem(http("list_jobs", "GET", "jobs", params={"status": "bogus"}), 422, "status")
    _assert_problem(http("list_jobs", "GET", "jobs", params={"limit": "0"}), 422, "limit")
    _assert_problem(http("list_jobs", "GET", "jobs", params={"cursor": "!!notbase64"}), 400, "cursor")


def test_result_of_unfinished_job_is_409_and_unknown_format_422() -> None:
    j = submit("echo", {}, 1)
    rp = {"id": j["id"]}
    _assert_problem(http("get_job_result", "GET", f"jobs/{j['id']}/result", route_params=rp), 409)
    run_worker_once()
    _assert_problem(
        http("get_job_result", "GET", f"jobs/{j['id']}/result", route_params=rp, params={"format": "xml"}),
        422,
        "format",
    )


def test_health() -> None:
    resp = http("health", "GET", "health")
    assert resp.status_code == 200 and body_of(resp)["storage"] == "ok"


def test_a_disabled_pipeline_is_refused_like_an_unknown_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISABLED_PIPELINES", "sleep, fanout")
    body = _assert_problem(http("submit_job", "POST", "jobs", body={"pipeline": "sleep", "input": 1}), 422, "pipeline")
    assert "sleep" not in body["errors"][0]["message"]  # not even listed among the known ones
    assert http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 1}).status_code == 202
