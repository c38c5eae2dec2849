"""The typed client's full cycle against a real dev host on Azurite: submit, wait, result, list, cancel,
retry, idempotency, ETag/304 polling, Retry-After, and a gateway path with a subscription key and a 429."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from devhost.azurite import free_port
from devhost.process import HostProcess
from thematiq_client import ApiError, Client, Job, Status, TransportError, WaitTimeout

ROWS = [{"id": "r1", "text": "Delivery was late"}, {"id": "r2", "text": "Food arrived cold"}]


def test_full_cycle_submit_wait_result_list(client: Client) -> None:
    job = client.submit("echo", ROWS, {})
    assert isinstance(job, Job) and job.status in (Status.QUEUED, Status.RUNNING, Status.SUCCEEDED)
    seen: list[Job] = []
    done = client.wait(job, on_progress=seen.append, timeout=60)
    assert done.status == Status.SUCCEEDED and done.terminal and done.finished_at is not None
    assert seen and seen[-1] == done  # on_progress saw the end
    assert client.result(done)["echo"][0]["id"] == "r1"
    assert client.result_bytes(done).startswith(b"{")
    assert client.get(done.id) == done

    pages = list(client.list(pipeline="echo", limit=1))
    assert len(pages) >= 1 and all(len(p.items) <= 1 for p in pages)
    assert done.id in {j.id for j in client.jobs(pipeline="echo", limit=1)}
    assert client.health().storage == "ok"
    assert client.openapi()["info"]["title"] == "Thematiq jobs API"


def test_cancel_and_retry(client: Client) -> None:
    job = client.submit("sleep", ROWS, {"seconds": 30, "steps": 300})
    deadline = time.monotonic() + 60  # ends once it runs; a loaded machine starts the attempt slowly
    while client.get(job).status != Status.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    asked = client.cancel(job)
    assert asked.cancel_requested
    cancelled = client.wait(job, timeout=30)
    assert cancelled.status == Status.CANCELLED
    again = client.retry(cancelled)
    assert again.id != job.id and client.retry(cancelled).id == again.id  # idempotent per source job
    client.cancel(again)


def test_submit_is_idempotent_and_keys_are_generated(client: Client) -> None:
    a = client.submit("echo", ROWS, {}, idempotency_key="client-test-" + str(time.time_ns()))
    first = client.submit_detailed("echo", ROWS, {}, idempotency_key=f"k-{a.id}")
    replay = client.submit_detailed("echo", ROWS, {}, idempotency_key=f"k-{a.id}")
    assert first.created and not replay.created and replay.job.id == first.job.id
    # Without a key each submit is a new job (a fresh key is sent each time).
    assert client.submit("echo", ROWS).id != client.submit("echo", ROWS).id
    with pytest.raises(ApiError) as info:
        client.submit("echo", [{"id": "x", "text": "other"}], idempotency_key=f"k-{a.id}")
    assert info.value.status == 409


def test_errors_are_typed(client: Client, client_host: HostProcess) -> None:
    with pytest.raises(ApiError) as info:
        client.get("0" * 28)
    assert info.value.status == 404 and info.value.problem.title
    with pytest.raises(ApiError) as info:
        client.submit("sleep", ROWS, {"seconds": -1})
    assert info.value.status == 422 and info.value.errors[0]["field"] == "params.seconds"
    with pytest.raises(ApiError) as info:
        Client(client_host.url + "/api", key="wrong").get("0" * 28)
    assert info.value.status == 401
    with pytest.raises(TransportError, match="connection refused"):
        Client(f"http://127.0.0.1:{free_port()}/api", max_retries=1, sleep=lambda s: None).get("0" * 28)
    with pytest.raises(ValueError):
        Client("file:///etc/passwd")


def _raw_get(url: str, key: str, etag: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {"x-functions-key": key, **({"If-None-Match": etag} if etag else {})}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def test_etag_304_and_retry_after(client: Client, client_host: HostProcess) -> None:
    key = client_host.env["DEVHOST_FUNCTION_KEY"]
    # Two steps of 30 s: the job's representation changes when it is claimed (running), at its first progress write
    # and then not for 30 s, the window for the conditional requests below.
    job = client.submit("sleep", ROWS, {"seconds": 60, "steps": 2})
    url = f"{client_host.url}/api/jobs/{job.id}"
    deadline = time.monotonic() + 60
    while True:
        status, headers, body = _raw_get(url, key)
        assert status == 200 and headers["etag"].startswith('W/"')
        # Running and its first progress written: "running" alone came before that write, and the write changed
        # the ETag between this look and the If-None-Match one (a 200, not a 304) when a loaded machine started the
        # attempt's process slowly.
        seen = json.loads(body)
        if seen["status"] == "running" and seen["progress"]["total"] == 2:
            break
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)
    # Unfinished: a Retry-After in whole seconds.
    assert 1 <= int(headers["retry-after"]) <= 30
    status, h304, body304 = _raw_get(url, key, headers["etag"])
    assert status == 304 and body304 == b"" and h304["etag"] == headers["etag"] and "retry-after" in h304
    # Weak and list forms match too; another ETag does not.
    assert _raw_get(url, key, '"nope", ' + headers["etag"].removeprefix("W/"))[0] == 304
    assert _raw_get(url, key, '"nope"')[0] == 200
    # The client uses it: the second look is a 304 it answers from its copy.
    first = client.poll(job)
    second = client.poll(job)
    assert first.job == second.job and not second.changed and second.retry_after is not None
    client.cancel(job)
    final = client.wait(job, timeout=30)
    status, headers, _ = _raw_get(url, key, headers["etag"])
    assert status == 200 and "retry-after" not in headers and final.status == Status.CANCELLED
    # The retry route's 202 (the dashboard's) paces its polling the same way.
    req = urllib.request.Request(f"{url}/retry", data=b"", method="POST", headers={"x-functions-key": key})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 202 and int(r.headers["Retry-After"]) >= 1
        retried = json.loads(r.read())["id"]
    client.cancel(retried)  # a 60 s job: not left holding a worker of the shared host


def test_wait_timeout_leaves_the_job_running(client: Client) -> None:
    job = client.submit("sleep", ROWS, {"seconds": 30, "steps": 3})
    with pytest.raises(WaitTimeout) as info:
        client.wait(job, timeout=1.5)
    assert isinstance(info.value, TimeoutError) and info.value.job is not None
    client.cancel(job)


# -- through a gateway: a path prefix, a subscription key, and throttling -------------------------------
@pytest.fixture
def gateway(client_host: HostProcess) -> Iterator[dict[str, Any]]:
    """A stand-in for API Management at /thematiq: needs Ocp-Apim-Subscription-Key, adds the function key,
    and answers the first request 429 with Retry-After: 1."""
    state: dict[str, Any] = {"seen": [], "throttle": 1}
    key = client_host.env["DEVHOST_FUNCTION_KEY"]

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            state["seen"].append((self.command, self.path, self.headers.get("Ocp-Apim-Subscription-Key")))
            if self.headers.get("Ocp-Apim-Subscription-Key") != "sub-123":
                self._answer(401, {}, b'{"statusCode": 401, "message": "Access denied"}')
                return
            if state["throttle"]:
                state["throttle"] -= 1
                self._answer(429, {"Retry-After": "1"}, b"")
                return
            assert self.path.startswith("/thematiq/")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() in ("content-type", "idempotency-key", "if-none-match", "accept")}
            req = urllib.request.Request(client_host.url + "/api/" + self.path[len("/thematiq/"):],
                                         data=body, method=self.command, headers={**headers, "x-functions-key": key})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    self._answer(r.status, dict(r.headers), r.read())
            except urllib.error.HTTPError as err:
                self._answer(err.code, dict(err.headers), err.read())

        do_GET = do_POST = _forward

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() in ("content-type", "etag", "retry-after", "location"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/thematiq"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_gateway_path_subscription_key_and_429_retry(gateway: dict[str, Any]) -> None:
    slept: list[float] = []
    client = Client(gateway["url"], subscription_key="sub-123", sleep=lambda s: (slept.append(s), time.sleep(s)))
    job = client.submit("echo", ROWS)
    assert slept and 1 <= slept[0] <= 1.2  # Retry-After honoured
    # The throttled submission and its retry carried the same generated Idempotency-Key, so one job exists.
    assert [s[1] for s in gateway["seen"][:2]] == ["/thematiq/jobs", "/thematiq/jobs"]
    done = client.wait(job, timeout=60)
    assert done.status == Status.SUCCEEDED
    assert all(s[2] == "sub-123" for s in gateway["seen"])
    with pytest.raises(ApiError) as info:
        Client(gateway["url"], subscription_key="wrong").get(job.id)
    assert info.value.status == 401
