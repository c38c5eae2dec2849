"""Bad input at the HTTP edge on the in-memory platform: each is a 4xx naming what is wrong, and nothing is read
or stored that should not be. The app's own functions, as the Functions host calls them (``tests.support.direct``
builds each request with Microsoft's runtime; no storage of its own)."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest

from blueprints.api import submit_job
from shared.platform import Platform
from tests.support.direct import body_of, http

ROUTES = [
    ("get_job", "GET", ""), ("get_job_result", "GET", "/result"), ("cancel_job", "POST", "/cancel"),
    ("list_job_responses", "GET", "/responses"), ("retry_job", "POST", "/retry"),
]


def _submit(platform: Platform, body: dict[str, Any]) -> dict[str, Any]:
    resp = http("submit_job", "POST", "jobs", raw=json.dumps(body, ensure_ascii=False).encode("utf-8"))
    assert resp.status_code == 202, resp.get_body()
    return body_of(resp)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "method", "tail"), ROUTES, ids=[r[0] for r in ROUTES])
def test_a_job_id_with_a_trailing_newline_is_404_before_any_storage_call(platform: Platform, name: str,
                                                                         method: str, tail: str) -> None:
    # "$" in a Python pattern also matches before a final "\n": /api/jobs/<id>%0A passed JOB_ID_RE.match and
    # went to Table Storage as a RowKey with a control character in it.
    job = _submit(platform, {"pipeline": "echo", "input": 1})
    assert platform.fake is not None
    platform.fake.reset_ops()
    jid = job["id"] + "\n"
    resp = http(name, method, f"jobs/{jid}{tail}", route_params={"id": jid})
    assert resp.status_code == 404, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert not any(op.startswith("table:") for op in platform.fake.ops()), platform.fake.ops()


def test_a_pipeline_filter_with_a_trailing_newline_is_a_422_naming_it(platform: Platform) -> None:
    resp = http("list_jobs", "GET", "jobs", params={"pipeline": "echo\n"})
    assert resp.status_code == 422, resp.get_body()
    assert [e["field"] for e in body_of(resp)["errors"]] == ["pipeline"]


def test_an_idempotency_key_or_tenant_with_a_trailing_newline_is_a_400_naming_the_header(platform: Platform) -> None:
    body = {"pipeline": "echo", "input": 1}
    for headers, field in (({"Idempotency-Key": "k1\n"}, "Idempotency-Key"),
                           ({"x-thematiq-tenant": "t1\n"}, "x-thematiq-tenant")):
        # Header values the runtime's own request building would not carry: the handler is called with them.
        req = func.HttpRequest("POST", "http://localhost/api/jobs", headers=headers, params={}, route_params={},
                               body=json.dumps(body).encode())
        resp = submit_job(req)
        assert resp.status_code == 400, resp.get_body()
        assert [e["field"] for e in json.loads(resp.get_body())["errors"]] == [field]
    assert platform.service.list("local", {})[0] == []


@pytest.mark.parametrize("text", ["\u00e9t\u00e9 " * 450, "\u914d\u9001\u304c\u9045\u3044 " * 180, "\U0001f600" * 700],
                         ids=["latin", "cjk", "astral"])
def test_a_job_near_the_size_limit_can_be_retried_whatever_its_script(platform: Platform,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      text: str) -> None:
    # The retry re-sent the stored input as JSON with ensure_ascii: each non-ASCII character as a \\uXXXX escape
    # (2-3 times its UTF-8 size), so a job the limit admitted could not be retried (413 naming "body").
    from shared.config import settings

    monkeypatch.setenv("MAX_INPUT_BYTES", "4000")
    settings.get_settings.cache_clear()
    job = _submit(platform, {"pipeline": "echo", "input": text})
    assert 2000 < job["input_bytes"] <= 4000
    assert http("cancel_job", "POST", f"jobs/{job['id']}/cancel", route_params={"id": job["id"]}).status_code == 200
    resp = http("retry_job", "POST", f"jobs/{job['id']}/retry", route_params={"id": job["id"]})
    assert resp.status_code == 202, resp.get_body()
    again = body_of(resp)
    assert again["input_bytes"] <= job["input_bytes"] + 64  # the params ({}) and compact separators, no escapes
    from shared.storage.blobs import decode_input

    row = platform.stores.jobs.get("local", again["id"], with_input=True)
    assert row.input_inline is not None and decode_input(row.input_inline) == text


def _nested(levels: int, leaf: str = "") -> bytes:
    # Arrays and objects alternating, ``levels`` containers deep; the innermost is an array (it may be empty).
    square = [i % 2 == (levels - 1) % 2 for i in range(levels)]
    opens = "".join("[" if sq else '{"k":' for sq in square)
    closes = "".join("]" if sq else "}" for sq in reversed(square))
    return (opens + leaf + closes).encode()


@pytest.mark.parametrize(("body", "ok"), [
    (_nested(64), True), (_nested(64, "1"), True), (_nested(65), False), (_nested(65, '"x"'), False),
    (b"[" * 64 + b"]" * 64, True), (b"[" * 65 + b"]" * 65, False),
    (json.dumps({"a": "[" * 500 + "{" * 500, "b": ["\\\"[[[", {"c": "]]]}}}"}]}).encode(), True),
], ids=["64-alternating", "64-with-leaf", "65", "65-with-leaf", "64-arrays", "65-arrays", "brackets-in-strings"])
def test_nesting_is_counted_in_containers_and_brackets_in_strings_do_not_count(body: bytes, ok: bool) -> None:
    from shared.api.service import parse_json_body
    from shared.core.errors import BadRequest

    if ok:
        parse_json_body(body, 1 << 20)
    else:
        with pytest.raises(BadRequest, match="nested deeper than 64") as caught:
            parse_json_body(body, 1 << 20)
        assert caught.value.extra["field"] == "body"


@pytest.mark.parametrize(("raw", "key"), [
    (b'{"pipeline": "echo", "input": 1, "pipeline": "sleep"}', "pipeline"),
    (b'{"pipeline": "echo", "input": [{"id": 1, "text": "a", "metadata": {"plan": "pro", "plan": "free"}}]}', "plan"),
])
def test_a_key_twice_in_one_object_is_a_400_naming_it_and_nothing_is_stored(platform: Platform, raw: bytes,
                                                                           key: str) -> None:
    # Parsers disagree on which one wins (Python's json the last, others the first or an error), so a gateway
    # policy and the app could each read another pipeline; and a metadata value was dropped without a word.
    assert platform.fake is not None
    platform.fake.reset_ops()
    resp = http("submit_job", "POST", "jobs", raw=raw)
    assert resp.status_code == 400, resp.get_body()
    problem = body_of(resp)
    assert resp.mimetype == "application/problem+json" and [e["field"] for e in problem["errors"]] == ["body"]
    assert f'the key "{key}" twice' in problem["detail"], problem
    assert not [op for op in platform.fake.ops() if not op.endswith((":get", ":query"))], platform.fake.ops()
    # The same key in two objects is no duplicate.
    assert _submit(platform, {"pipeline": "echo", "input": [{"id": 1}, {"id": 2}]})["status"] == "queued"


@pytest.mark.parametrize(("name", "method", "path", "setting"), [
    ("create_webhook_secret", "POST", "webhooks/secrets", "WEBHOOK_SECRETS_KEY"),
    ("list_webhook_secrets", "GET", "webhooks/secrets", "WEBHOOK_SECRET"),
    ("revoke_webhook_secret", "DELETE", "webhooks/secrets/s1", "WEBHOOK_SECRETS_KEY_PREVIOUS"),
])
def test_an_unresolved_key_vault_reference_is_a_503_with_retry_after_not_a_500(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, name: str, method: str, path: str, setting: str
) -> None:
    # The deployment cannot serve the route until the reference resolves (the identity's access to the vault, or
    # the vault itself): a temporary unavailability to the caller, who should retry, not an internal error.
    if setting == "WEBHOOK_SECRETS_KEY_PREVIOUS":
        http("create_webhook_secret", "POST", "webhooks/secrets")  # a row to open, so the previous key is asked
    reference = "@Microsoft.KeyVault(SecretUri=https://thematiq-kv.vault.azure.net/secrets/x)"
    monkeypatch.setenv(setting, reference)
    resp = http(name, method, path, route_params={"id": "s1"} if "{id}" in path or path.endswith("s1") else None)
    assert resp.status_code == 503, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    assert int(resp.headers["Retry-After"]) >= 30
    problem = body_of(resp)
    assert problem["type"].endswith("/service-misconfigured") and "vault" not in problem["detail"].lower(), problem


def test_every_route_that_reads_the_tenant_header_documents_the_400_a_bad_one_gets(platform: Platform) -> None:
    # A tenant header outside TENANT_RE is a 400 naming it on every route that takes one; the webhook-secret routes'
    # OpenAPI entries listed no 400, so a generated client or a schema check took the answer for an undocumented one.
    from shared.api.openapi import document

    calls = {"create_webhook_secret": ("POST", "webhooks/secrets"), "list_webhook_secrets": ("GET", "webhooks/secrets"),
             "revoke_webhook_secret": ("DELETE", "webhooks/secrets/whs_1")}
    for name, (method, path) in calls.items():
        resp = http(name, method, path, headers={"x-thematiq-tenant": "not a tenant!"}, route_params={"id": "whs_1"})
        assert resp.status_code == 400, (name, resp.get_body())
        assert [e["field"] for e in body_of(resp)["errors"]] == ["x-thematiq-tenant"]
    for path, ops in document()["paths"].items():
        for method, op in ops.items():
            if any(p.get("name") == "x-thematiq-tenant" for p in op.get("parameters", [])):
                assert "400" in op["responses"], f"{method.upper()} {path}"


def test_a_job_whose_stored_input_does_not_decode_is_a_409_naming_input_not_a_500(platform: Platform) -> None:
    # Corrupt storage (a row's input that is not gzipped JSON) escaped the API's own reads of the input as a
    # BadGzipFile: the retry route answered 500. The worker already fails such a job with BadInput.
    job = _submit(platform, {"pipeline": "echo", "input": "hello"})
    assert http("cancel_job", "POST", f"jobs/{job['id']}/cancel", route_params={"id": job["id"]}).status_code == 200
    row = platform.stores.jobs.get("local", job["id"], with_input=True)
    platform.stores.jobs.update(row, input_inline=b"SECRET not gzip")
    before = platform.service.list("local", {})[0]
    resp = http("retry_job", "POST", f"jobs/{job['id']}/retry", route_params={"id": job["id"]})
    assert resp.status_code == 409, resp.get_body()
    assert resp.mimetype == "application/problem+json"
    problem = body_of(resp)
    assert [e["field"] for e in problem.get("errors", [])] == ["input"] or problem.get("field") == "input", problem
    assert "SECRET" not in resp.get_body().decode()
    assert len(platform.service.list("local", {})[0]) == len(before)  # nothing stored


@pytest.mark.parametrize("number", [b"9" * 4301, b"-" + b"1" * 5000])
def test_an_integer_too_long_to_read_is_a_400_in_the_apis_words(platform: Platform, number: bytes) -> None:
    # Python's int() refuses over 4,300 digits; its message told the client to call sys.set_int_max_str_digits().
    resp = http("submit_job", "POST", "jobs", raw=b'{"pipeline": "echo", "params": {}, "input": [' + number + b"]}")
    assert resp.status_code == 400, resp.get_body()
    problem = body_of(resp)
    assert [e["field"] for e in problem["errors"]] == ["body"]
    assert "4300 digits" in problem["detail"] and "sys." not in problem["detail"], problem
    assert platform.service.list("local", {})[0] == []


def test_the_pipeline_filter_pages_through_that_pipelines_jobs_only(platform: Platform) -> None:
    # The dashboard's compare_to picker asks for pipeline=thematic (followup44r): a tenant's newest jobs of other
    # pipelines must not crowd a page out, and the cursor goes on with the same filter.
    echo = [_submit(platform, {"pipeline": "echo", "input": n})["id"] for n in range(3)]
    sleep = [_submit(platform, {"pipeline": "sleep", "input": {"seconds": 0}})["id"] for _ in range(2)]
    got: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        params = {"pipeline": "echo", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = body_of(http("list_jobs", "GET", "jobs", params=params))
        assert {j["pipeline"] for j in page["items"]} <= {"echo"}
        got += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(got) == sorted(echo) and not set(got) & set(sleep)
