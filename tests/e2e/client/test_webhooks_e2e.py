"""Completion webhooks end to end through the local host: signature, once per delivery id, retries, SSRF."""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from devhost.process import HostProcess
from tests.e2e.client.conftest import Receiver, _env, verify
from thematiq_client import ApiError, Client, Status

ROWS = [{"id": "r1", "text": "Delivery was late"}]


def _callback_status(client: Client, job_id: str, timeout: float = 60) -> tuple[str, int]:
    """The job's callback status once the sender has recorded the last outcome."""
    deadline = time.monotonic() + timeout
    while True:
        cb = client.get(job_id).callback
        assert cb is not None, "GET must show the callback"
        if cb.status in ("delivered", "failed") or time.monotonic() > deadline:
            return cb.status, cb.attempts
        time.sleep(0.2)


def test_succeeded_job_is_delivered_once_with_a_valid_signature(client: Client, receiver: Receiver) -> None:
    job = client.submit("echo", ROWS, callback_url=receiver.url)
    done = client.wait(job, timeout=60)
    [delivery] = receiver.wait_for(lambda d: len(d) >= 1)
    body = verify(delivery)
    assert body["id"] == job.id and body["status"] == "succeeded"
    assert delivery.headers["thematiq-event"] == "job.succeeded"
    assert delivery.headers["content-type"] == "application/json"
    assert len(delivery.headers["thematiq-delivery"]) == 32
    # The body is the job's public JSON, as GET shows it.
    assert body["links"]["self"].endswith(f"/jobs/{job.id}") and "input" not in body and done.id == body["id"]
    time.sleep(3)  # a window for a wrong resend to show: absence has no event to wait for
    assert len(receiver.deliveries) == 1, "a delivered webhook is not sent again"
    # A tampered body does not verify.
    delivery.body = delivery.body.replace(b"succeeded", b"failed")
    with pytest.raises(AssertionError, match="bad signature"):
        verify(delivery)
    assert _callback_status(client, job.id) == ("delivered", 1)


def test_a_failing_receiver_is_retried_then_acknowledged(client: Client, receiver: Receiver) -> None:
    receiver.answers = [500, 500]
    job = client.submit("sleep", ROWS, {"seconds": 0.1, "fail": "permanent"}, callback_url=receiver.url)
    assert client.wait(job, timeout=60).status == Status.FAILED
    deliveries = receiver.wait_for(lambda d: len(d) >= 3, timeout=60)
    assert len({d.headers["thematiq-delivery"] for d in deliveries}) == 1, "one delivery id for every attempt"
    assert all(d.headers["thematiq-event"] == "job.failed" for d in deliveries)
    for d in deliveries:
        verify(d)  # each attempt is signed afresh
    gaps = [b.at - a.at for a, b in itertools.pairwise(deliveries)]
    # The backoff's lower bounds (2 s, then 10 s, each -20 % jitter): a loaded machine only adds to a gap, and one
    # late first retry could make the first gap the longer one.
    assert gaps[0] >= 1.5 and gaps[1] >= 7.5, f"backoff between attempts: {gaps}"
    time.sleep(3)  # a window for a wrong fourth attempt to show: absence has no event to wait for
    assert len(receiver.deliveries) == 3, "acknowledged: no more attempts"
    assert _callback_status(client, job.id) == ("delivered", 3)


def test_a_cancelled_job_sends_job_cancelled(client: Client, receiver: Receiver) -> None:
    job = client.submit("sleep", ROWS, {"seconds": 30, "steps": 30}, callback_url=receiver.url)
    client.cancel(job)
    assert client.wait(job, timeout=30).status == Status.CANCELLED
    [delivery] = receiver.wait_for(lambda d: len(d) >= 1)
    assert delivery.headers["thematiq-event"] == "job.cancelled" and verify(delivery)["status"] == "cancelled"


@pytest.fixture(scope="module")
def strict_host(azurite: str) -> Iterator[HostProcess]:
    """A deployment without WEBHOOK_ALLOW_PRIVATE: only https URLs of public hosts."""
    host = HostProcess(env=_env(azurite), args=["--no-queue", "--no-timer"]).start()
    try:
        yield host
    finally:
        host.stop(timeout=15)


@pytest.mark.parametrize("url", [
    "https://127.0.0.1/hook",
    "https://10.1.2.3/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/hook",
    "https://localhost/hook",
    "http://example.com/hook",
    "https://user:pw@example.com/hook",
    "ftp://example.com/hook",
    "https://[::169.254.169.254]/hook",
    "https://[::ffff:0:a9fe:a9fe]/hook",
    "https://[64:ff9b::a9fe:a9fe]/hook",
    "https://[64:ff9b:1::a9fe:a9fe]/hook",
    "https://[2002:a9fe:a9fe::1]/hook",
    "https://[fec0::1]/hook",
    "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
    "https://" + "a" * 64 + ".example/hook",
])
def test_private_or_plain_http_urls_are_refused_without_the_switch(strict_host: HostProcess, url: str) -> None:
    client = Client(strict_host.url + "/api", key=strict_host.env["DEVHOST_FUNCTION_KEY"])
    with pytest.raises(ApiError) as info:
        client.submit("echo", ROWS, callback_url=url)
    assert info.value.status == 422 and info.value.errors[0]["field"] == "callback.url"


def test_local_receiver_is_refused_without_the_switch(strict_host: HostProcess, receiver: Receiver) -> None:
    client = Client(strict_host.url + "/api", key=strict_host.env["DEVHOST_FUNCTION_KEY"])
    with pytest.raises(ApiError) as info:
        client.submit("echo", ROWS, callback_url=receiver.url)
    assert info.value.status == 422 and "https" in info.value.errors[0]["message"]


def test_a_non_ascii_url_is_delivered_percent_encoded(client: Client, receiver: Receiver) -> None:
    url = receiver.url.replace("/hooks/thematiq?x=1", "/hooks/café?q=ü")
    job = client.submit("echo", ROWS, callback_url=url)
    assert job.callback is not None and job.callback.url.endswith("/hooks/caf%C3%A9?q=%C3%BC"), "stored normalised"
    [delivery] = receiver.wait_for(lambda d: len(d) >= 1)
    assert delivery.path == "/hooks/caf%C3%A9?q=%C3%BC" and verify(delivery)["id"] == job.id
    assert _callback_status(client, job.id) == ("delivered", 1)


def test_an_idn_host_is_normalised_or_refused_at_submit(client: Client) -> None:
    # 例え.jp has no address here: refused with the field named, never accepted and left pending.
    with pytest.raises(ApiError) as info:
        client.submit("echo", ROWS, callback_url="https://例え.invalid/hook")
    assert info.value.status == 422 and info.value.errors[0]["field"] == "callback.url"
    assert "xn--r8jz45g.invalid" in info.value.errors[0]["message"]


def _call(host: HostProcess, method: str, path: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(host.url + "/api/" + path, method=method,
                                 headers={"x-functions-key": host.env["DEVHOST_FUNCTION_KEY"]})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else {}
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def test_a_rotation_through_the_api_signs_with_both_secrets_then_the_new_one(azurite: str, receiver: Receiver) -> None:
    host = HostProcess(env=_env(azurite, WEBHOOK_ALLOW_PRIVATE="true")).start()
    try:
        client = Client(host.url + "/api", key=host.env["DEVHOST_FUNCTION_KEY"])
        status, created = _call(host, "POST", "webhooks/secrets")
        assert status == 201 and created["secret"].startswith("whsec_")
        status, listed = _call(host, "GET", "webhooks/secrets")
        assert [s["id"] for s in listed["items"]] == ["deployment", created["id"]]
        assert "secret" not in json.dumps(listed["items"]).replace('"id"', ""), "values are shown once, at creation"
        assert _call(host, "POST", "webhooks/secrets")[0] == 409, "two are active: revoke one first"
        job = client.submit("echo", ROWS, callback_url=receiver.url)
        [during] = receiver.wait_for(lambda d: len(d) >= 1)
        assert during.headers["thematiq-signature"].count("v1=") == 2
        verify(during)  # the old secret (WEBHOOK_SECRET) still verifies…
        verify(during, created["secret"])  # …and so does the new one
        assert _call(host, "DELETE", "webhooks/secrets/deployment")[0] == 204
        assert _call(host, "DELETE", f"webhooks/secrets/{created['id']}")[0] == 409, "never the last one"
        client.submit("echo", ROWS, callback_url=receiver.url)
        after = receiver.wait_for(lambda d: len(d) >= 2)[1]
        assert after.headers["thematiq-signature"].count("v1=") == 1 and verify(after, created["secret"])
        with pytest.raises(AssertionError, match="bad signature"):
            verify(after)
        assert _callback_status(client, job.id) == ("delivered", 1)
    finally:
        host.stop(timeout=15)
