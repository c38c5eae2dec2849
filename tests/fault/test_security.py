"""Security over real HTTP against a local host: auth on every route, tenant isolation, hostile input,
the OpenAPI document, and no secrets or response texts in the logs (last, so it sees every other test's logs)."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
import urllib.parse
from typing import Any

import pytest

from shared.api.openapi import JobView
from tests.e2e.conftest import Api
from tests.fault.conftest import CANARY_KEY, CANARY_LLM_KEY
from tests.fault.scenarios import PROBLEM, Cluster

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
FAKE_ID = "f" * 28


def http_routes(c: Cluster) -> dict[str, tuple[set[str], str]]:
    """Every HTTP function the API host serves, from its startup listing: name -> (methods, path)."""
    assert c.api_host is not None
    routes = {}
    for name, methods, url in re.findall(r"^\s+(\w+): \[([A-Z,]+)\] (http\S+)", c.api_host.logs, re.M):
        routes[name] = (set(methods.split(",")), urllib.parse.urlsplit(url).path)
    assert len(routes) >= 7, routes
    return routes


def assert_problem(status: int, headers: dict[str, str], body: Any, expected: int | set[int]) -> None:
    wanted = {expected} if isinstance(expected, int) else expected
    assert status in wanted, (status, body)
    assert PROBLEM in headers.get("Content-Type", ""), headers
    assert isinstance(body, dict) and body["status"] == status and body["type"].startswith("https://"), body


# -- auth -----------------------------------------------------------------------------


def test_every_route_but_health_needs_the_function_key(sec: Cluster, sec_api: Api) -> None:
    routes = http_routes(sec)
    anonymous = set()
    for name, (methods, path) in routes.items():
        path = path.replace("{id}", FAKE_ID)
        for method in METHODS:
            for key in (None, "wrong-" + CANARY_KEY[:8]):
                headers = {"x-functions-key": key} if key else {}
                status, _, body = sec_api.call(method, path, headers=headers, key=False)
                if method not in methods:
                    # No function matches: the host's routing answers 404 before auth (as ASP.NET does);
                    # either way nothing runs and nothing leaks.
                    assert status in (401, 404) and not body, (name, method, status, body)
                elif status != 401:
                    anonymous.add(name)
                else:
                    assert not body, (name, method, body)
        # ?code= with a wrong key is refused too.
        status, _, _ = sec_api.call(sorted(methods)[0], path + "?code=nope", key=False)
        assert status == 401 or name == "health", (name, status)
    assert anonymous == {"health"}, anonymous
    assert sec_api.call("GET", "/api/health", key=False)[0] == 200


# -- tenant isolation -----------------------------------------------------------------

TENANTS = ("t-alpha", "t-beta", "t-gamma")


def _as(api: Api, tenant: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
    return api.call(method, path, body, headers={"x-thematiq-tenant": tenant})


def test_tenant_isolation_matrix_is_404_never_403(sec_api: Api) -> None:
    api = sec_api
    jobs: dict[str, dict[str, str]] = {}
    for t in TENANTS:
        mine = {}
        for state, pipeline, params in (
            ("succeeded", "echo", {}),
            ("failed", "sleep", {"seconds": 0.1, "steps": 1, "fail": "permanent"}),
            ("running", "sleep", {"seconds": 60, "steps": 60}),
            ("cancelled", "sleep", {"seconds": 60, "steps": 60}),
        ):
            status, _, body = _as(api, t, "POST", "/api/jobs", {"pipeline": pipeline, "params": params, "input": t})
            assert status == 202, body
            mine[state] = body["id"]
        status, _, _ = _as(api, t, "POST", f"/api/jobs/{mine['cancelled']}/cancel")
        assert status in (200, 202)
        jobs[t] = mine
    # Wait for the states (own tenant's view).
    deadline = time.monotonic() + 60
    for t, mine in jobs.items():
        for state, job_id in mine.items():
            while True:
                status, _, body = _as(api, t, "GET", f"/api/jobs/{job_id}")
                assert status == 200, body
                JobView.model_validate(body)
                if body["status"] == state:
                    break
                assert time.monotonic() < deadline, (state, body)
                time.sleep(0.2)
    checked = 0
    for owner, mine in jobs.items():
        for other in TENANTS:
            if other == owner:
                continue
            for job_id in mine.values():
                for method, suffix in (
                    ("GET", ""),
                    ("GET", "/result"),
                    ("POST", "/cancel"),
                    ("GET", "/result?format=csv"),
                ):
                    status, headers, body = _as(api, other, method, f"/api/jobs/{job_id}{suffix}")
                    assert_problem(status, headers, body, 404)
                    checked += 1
            for status_filter in ("", "?status=running", "?status=succeeded", "?limit=200"):
                status, _, body = _as(api, other, "GET", f"/api/jobs{status_filter}")
                assert status == 200, body
                assert not set(mine.values()) & {j["id"] for j in body["items"]}
                checked += 1
    # The other tenants' cancels changed nothing.
    for t, mine in jobs.items():
        status, _, body = _as(api, t, "GET", f"/api/jobs/{mine['running']}")
        assert body["status"] == "running" and not body["cancel_requested"], body
        _as(api, t, "POST", f"/api/jobs/{mine['running']}/cancel")
    # Own result is readable; the matrix covered every (owner, other, state, operation).
    status, _, body = _as(api, "t-alpha", "GET", f"/api/jobs/{jobs['t-alpha']['succeeded']}/result")
    assert status == 200 and body == {"echo": "t-alpha"}
    assert checked == 3 * 2 * (4 * 4 + 4)


def test_forged_cursor_cannot_reach_another_partition(sec_api: Api) -> None:
    for pk in ("t-alpha", "t-beta", "~", ""):
        token = base64.urlsafe_b64encode(json.dumps({"PartitionKey": pk, "RowKey": ""}).encode()).decode().rstrip("=")
        status, _, body = _as(sec_api, "t-gamma", "GET", f"/api/jobs?cursor={token}")
        if status == 200:
            for j in body["items"]:
                assert _as(sec_api, "t-gamma", "GET", f"/api/jobs/{j['id']}")[0] == 200
        else:
            assert status == 400, body


# -- hostile input --------------------------------------------------------------------


def _raw(
    api: Api, method: str, path: str, data: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    return api.call(method, path, raw=data, headers=headers)


HOSTILE_BODIES: list[tuple[str, bytes, set[int]]] = [
    ("deep-json-arrays", b"[" * 100_000 + b"]" * 100_000, {400}),
    ("deep-json-objects", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, {400}),
    ("deep-input", b'{"pipeline":"echo","params":{},"input":' + b"[" * 70 + b"]" * 70 + b"}", {400}),
    ("invalid-utf8", b'{"pipeline":"echo","params":{},"input":"\xff\xfe\xc3("}', {400}),
    ("lone-surrogate", b'{"pipeline":"echo","params":{},"input":"\\ud800"}', {400}),
    ("not-json", b"<xml/>", {400}),
    ("empty", b"", {400}),
    ("json-array", b"[]", {422}),
    ("nan", b'{"pipeline":"echo","params":{},"input":NaN}', {400}),
    ("huge-number", b'{"pipeline":"echo","params":{},"input":' + b"9" * 5000 + b"}", {400}),
    ("10MB-pipeline-name", b'{"pipeline":"' + b"a" * 10_000_000 + b'","input":1}', {413, 422}),
    ("10MB-param-value", b'{"pipeline":"sleep","params":{"fail":"' + b"x" * 10_000_000 + b'"},"input":1}', {413, 422}),
    ("1e6-params", b'{"pipeline":"sleep","params":{"steps":[' + b"1," * 999_999 + b'1]},"input":1}', {413, 422}),
    ("1e6-thematic-input", b'{"pipeline":"thematic","params":{},"input":[' + b'"a",' * 999_999 + b'"a"]}', {413, 422}),
    ("extra-field", b'{"pipeline":"echo","params":{},"input":1,"owner":"x"}', {422}),
    ("odata-pipeline", b'{"pipeline":"echo\' or \'a\' eq \'a","params":{},"input":1}', {422}),
    ("oversized", b'{"pipeline":"echo","params":{},"input":"' + b"x" * (26 * 1024 * 1024) + b'"}', {413}),
]


@pytest.mark.parametrize(("name", "data", "expected"), HOSTILE_BODIES, ids=[h[0] for h in HOSTILE_BODIES])
def test_hostile_bodies_get_a_clear_4xx_problem(sec_api: Api, name: str, data: bytes, expected: set[int]) -> None:
    status, headers, body = _raw(sec_api, "POST", "/api/jobs", data)
    if status == 202:
        assert 202 in expected, body
        return
    assert_problem(status, headers, body, expected)
    assert len(json.dumps(body)) < 20_000, "the problem must not echo a huge input back"


@pytest.mark.parametrize("data", ["x" * 10_000_000, [1] * 1_000_000], ids=["10MB-string", "1e6-list"])
def test_huge_but_valid_inputs_are_accepted_and_run(sec_api: Api, data: Any) -> None:
    job = sec_api.submit("echo", {}, data)
    done = sec_api.wait(job["id"], timeout=90)
    assert done["status"] == "succeeded", done


HOSTILE_PATHS = [
    "/api/jobs/..%2F..%2Fhealth",
    "/api/jobs/..%2F..%2F..%2Fetc%2Fpasswd",
    "/api/jobs/%2e%2e",
    "/api/jobs/" + urllib.parse.quote("x' or PartitionKey ne 'x"),
    "/api/jobs/" + urllib.parse.quote("ffffffffffffffffffffffffffff' or '1' eq '1"),
    "/api/jobs/" + urllib.parse.quote('"' * 28),
    "/api/jobs/" + "F" * 28,
    "/api/jobs/" + "f" * 2000,
    "/api/jobs/%00" + "f" * 27,
    "/api/jobs/..%2F..%2Fx/result",
    "/api/jobs/" + urllib.parse.quote("a' or 'a' eq 'a") + "/cancel",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_ids_are_404_problems(sec_api: Api, path: str) -> None:
    method = "POST" if path.endswith("/cancel") else "GET"
    status, headers, body = sec_api.call(method, path)
    assert_problem(status, headers, body, 404)


HOSTILE_QUERIES = [
    ("status=" + urllib.parse.quote("running' or 'a' eq 'a"), 422),
    ("pipeline=" + urllib.parse.quote("echo' or PartitionKey ne '"), 422),
    ("limit=" + urllib.parse.quote("1 or 1 eq 1"), 422),
    ("limit=99999999999999999999", 422),
    ("cursor=" + urllib.parse.quote("' or 'a' eq 'a"), 400),
    ("cursor=" + "A" * 5000, 400),
    ("cursor=" + base64.urlsafe_b64encode(b'{"PartitionKey":1}').decode(), 400),
    ("%24filter=" + urllib.parse.quote("PartitionKey ne ''"), 422),
    ("status=succeeded&status=failed", 422),
]


@pytest.mark.parametrize(("query", "expected"), HOSTILE_QUERIES)
def test_hostile_list_filters_are_4xx_problems(sec_api: Api, query: str, expected: int) -> None:
    status, headers, body = sec_api.call("GET", "/api/jobs?" + query)
    assert_problem(status, headers, body, expected)


@pytest.mark.parametrize(
    "tenant", ["a' or PartitionKey ne 'a", "../other", "x" * 200, "tenant/with/slash", "\u00e9t\u00e9"]
)
def test_hostile_tenant_header_is_400(sec_api: Api, tenant: str) -> None:
    status, headers, body = sec_api.call(
        "GET", "/api/jobs", headers={"x-thematiq-tenant": tenant.encode().decode("latin-1")}
    )
    assert_problem(status, headers, body, 400)


def test_hostile_idempotency_keys_are_400(sec_api: Api) -> None:
    for key in ("has space", "x" * 201, "tab\there"):
        status, headers, body = sec_api.call(
            "POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": 1}, headers={"Idempotency-Key": key}
        )
        assert_problem(status, headers, body, 400)


def _socket_request(c: Cluster, head: bytes, body: bytes = b"", half_close: bool = True) -> bytes:
    assert c.api_host is not None
    with socket.create_connection(("127.0.0.1", c.api_host.port), timeout=20) as s:
        s.sendall(head + body)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_huge_content_length_is_refused_without_reading(sec: Cluster) -> None:
    head = (
        f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nx-functions-key: {CANARY_KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
    ).encode()
    reply = _socket_request(sec, head, b"{}")
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


def test_content_length_larger_than_the_body_is_a_4xx(sec: Cluster) -> None:
    head = (
        f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nx-functions-key: {CANARY_KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: 30000000\r\n\r\n"
    ).encode()
    reply = _socket_request(sec, head, b'{"pipeline": "echo"')
    status = int(reply.split(b" ", 2)[1])
    assert 400 <= status < 500, reply[:300]
    assert PROBLEM.encode() in reply.split(b"\r\n\r\n")[0], reply[:300]


# -- OpenAPI ----------------------------------------------------------------------------


def test_openapi_document_is_served_with_a_key_and_covers_every_api_route(sec: Cluster, sec_api: Api) -> None:
    assert sec_api.call("GET", "/api/openapi.json", key=False)[0] == 401
    status, headers, doc = sec_api.call("GET", "/api/openapi.json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert doc["openapi"].startswith("3.1")
    documented = {(m.upper(), "/api" + p) for p, ops in doc["paths"].items() for m in ops}
    served = {(m, path) for name, (methods, path) in http_routes(sec).items() if name != "ui" for m in methods}
    assert served <= documented, served - documented
    assert doc["paths"]["/health"]["get"]["security"] == []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if path != "/health":
                assert "security" not in op and "401" in op["responses"], (path, method)
            for code, response in op["responses"].items():
                if code[0] in "45":
                    assert PROBLEM in response["content"], (path, method, code)


def test_job_view_model_matches_what_the_api_returns(sec_api: Api) -> None:
    job = sec_api.submit("echo", {}, "view")
    JobView.model_validate(job)
    done = sec_api.wait(job["id"])
    JobView.model_validate(done)
    assert done["links"]["result"]


# -- logs: keep this last ------------------------------------------------------------------


def test_logs_never_contain_keys_or_response_texts(sec: Cluster, sec_api: Api) -> None:
    canary = "CANARY-RESPONSE-TEXT-" + CANARY_KEY[-8:]
    texts = [
        {"id": f"r{i}", "text": f"{canary} delivery was late again and the box was damaged ({i})"} for i in range(30)
    ]
    ids = [
        sec_api.submit("thematic", {}, texts)["id"],
        sec_api.submit("echo", {}, {"secret": canary})["id"],
        sec_api.submit("thematic", {}, [{"id": "x", "text": canary}])[
            "id"
        ],  # too small: fails or succeeds, with a reason
    ]
    for job_id in ids:
        sec_api.wait(job_id, timeout=120)
        # The key also travels as ?code=, which a host could log with the URL.
        status, _, _ = sec_api.call("GET", f"/api/jobs/{job_id}/result?code={CANARY_KEY}", key=False)
        assert status in (200, 409)
    # A rejected submission whose body holds the canary, and a wrong key that resembles the real one.
    sec_api.call("POST", "/api/jobs", {"pipeline": "thematic", "params": {"nope": canary}, "input": canary})
    sec_api.call("GET", f"/api/jobs?code={CANARY_KEY}x", key=False)
    logs = sec.logs
    assert "Executed 'Functions.job_worker'" in logs, "the logs were captured"
    for secret in (CANARY_KEY, CANARY_LLM_KEY, canary, "CANARYKEY", "CANARYLLM"):
        assert secret not in logs, [line for line in logs.splitlines() if secret in line][:3]
