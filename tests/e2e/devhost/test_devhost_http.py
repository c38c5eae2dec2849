"""HTTP trigger semantics through a real host process."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from tests.support.devhost_helpers import BasicHost


def call(url: str, method: str = "GET", body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, list[str]], bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            hdrs: dict[str, list[str]] = {}
            for k, v in r.headers.items():
                hdrs.setdefault(k.lower(), []).append(v)
            return r.status, hdrs, r.read()
    except urllib.error.HTTPError as e:
        hdrs = {}
        for k, v in e.headers.items():
            hdrs.setdefault(k.lower(), []).append(v)
        return e.code, hdrs, e.read()


def test_status_endpoint(basic: BasicHost) -> None:
    status, _, body = call(basic.host.url + "/admin/host/status")
    assert status == 200 and json.loads(body) == {"state": "Running"}


def test_request_response_mapping(basic: BasicHost) -> None:
    status, headers, body = call(
        basic.host.url + "/api/echo/5/bob?x=1&x=2&y=", "POST", b"payload", {"X-Test": "hi"})
    assert status == 201
    # The runtime adds a charset only to text/* types (azure.functions.http encode), as Azure answers.
    assert headers["content-type"] == ["application/json"]
    assert headers["x-reply"] == ["yes"]
    assert headers["set-cookie"] == ["a=1", "b=2"]
    data = json.loads(body)
    assert data["method"] == "POST"
    assert data["url"].endswith("/api/echo/5/bob?x=1&x=2&y=")
    assert data["route"] == {"id": "5", "name": "bob"}
    assert data["params"] == {"x": "1,2", "y": ""}
    assert data["header"] == "hi"
    assert data["body"] == "payload"


def test_routes_optional_constraints_methods(basic: BasicHost) -> None:
    u = basic.host.url + "/api"
    assert json.loads(call(u + "/echo/7")[2])["route"] == {"id": "7"}  # optional param absent
    assert call(u + "/echo/abc")[0] == 404  # int constraint fails; no other route matches
    assert call(u + "/echo/special")[2] == b"literal wins"  # literal beats {id:int}
    assert call(u + "/echo/7", "PUT")[0] == 404  # wrong method: 404, as the real host
    assert call(u + "/echo/special", "POST")[0] == 404
    assert call(u + "/guid/6f1e1c3e-6a4b-4d5e-9a3c-0e4f1a2b3c4d")[0] == 200
    assert call(u + "/guid/nope")[0] == 404
    assert call(u + "/files/a/b/c.txt")[2] == b"a/b/c.txt"
    assert call(u + "/things/list")[2] == b"setting route"  # %ITEMS_ROUTE% resolved
    assert call(u + "/widgets/count")[2] == b"param:widgets"
    assert call(basic.host.url + "/echo/7")[0] == 404  # no route prefix
    assert call(u + "/nothing")[0] == 500  # None is a failed invocation in the runtime, as in Azure


def test_auth_levels(basic: BasicHost) -> None:
    u = basic.host.url + "/api/secure"
    for path in ("/function", "/admin"):
        status, _, body = call(u + path)
        assert (status, body) == (401, b"")
        assert call(u + path, headers={"x-functions-key": "wrong"})[0] == 401
        assert call(u + path + "?code=wrong")[0] == 401
    assert call(u + "/function", headers={"x-functions-key": "fkey"})[2] == b"function ok"
    assert call(u + "/function?code=fkey")[2] == b"function ok"
    assert call(u + "/function?code=mkey")[2] == b"function ok"  # master key works everywhere
    assert call(u + "/admin?code=fkey")[0] == 401  # function key is not enough for admin
    assert call(u + "/admin", headers={"x-functions-key": "mkey"})[2] == b"admin ok"


def test_exception_gives_bare_500(basic: BasicHost) -> None:
    status, _, body = call(basic.host.url + "/api/boom")
    assert status == 500 and b"secret" not in body and body == b""
    assert "secret-internal-detail" in basic.host.logs  # logged, not returned
    assert "Executed 'Functions.boom' (Failed" in basic.host.logs


def test_context_and_settings(basic: BasicHost) -> None:
    data = json.loads(call(basic.host.url + "/api/ctx")[2])
    assert data["function_name"] == "ctx" and len(data["invocation_id"]) == 36
    assert data["traceparent"].startswith("00-")
    assert data["invocation_id"] in basic.host.logs
    settings = json.loads(call(basic.host.url + "/api/settings")[2])
    # local.settings.json fills gaps; the environment wins.
    assert settings == {"GREETING": "from-local-settings", "OVERRIDDEN": "env-value"}


def test_concurrency_sync_and_async(basic: BasicHost) -> None:
    # Five calls of 3 s each: if fewer than five ran at once, they took at least two rounds (6 s). So "under 6 s"
    # proves all five overlapped and still leaves 3 s for a loaded machine's HTTP overhead.
    for path in ("/api/sleep?s=3", "/api/asleep?s=3"):
        start = time.monotonic()
        with ThreadPoolExecutor(5) as pool:
            results = list(pool.map(call, [basic.host.url + path] * 5))
        elapsed = time.monotonic() - start
        assert all(r[0] == 200 for r in results)
        assert elapsed < 6.0, f"{path}: 5 x 3 s took {elapsed:.1f}s"


def test_body_limit(basic: BasicHost) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", basic.host.port)) as s:
        s.sendall(b"POST /api/echo/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 104857601\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 413")


def test_payloads_never_logged(basic: BasicHost) -> None:
    call(basic.host.url + "/api/echo/9", "POST", b"TOP-SECRET-BODY")
    assert "TOP-SECRET-BODY" not in basic.host.logs


def test_a_request_without_the_key_is_refused_before_its_body_is_read(basic: BasicHost) -> None:
    """A caller without the function key gets its 401 at once: devhost does not read, or wait for, its body.

    The request declares a 20 MB body and sends none of it. Reading the body first (as devhost did) left the
    connection waiting until the client gave up; the answer now comes from the headers alone.
    """
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(basic.host.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(b"POST /api/secure/function HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 20000000\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 401") or answer.startswith(b"HTTP/1.0 401"), answer[:80]
