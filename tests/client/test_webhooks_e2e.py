"""Completion webhooks end to end through the local host: signature, once per delivery id, retries, SSRF."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from devhost.process import HostProcess
from tests.client.conftest import Receiver, _env, verify
from thematiq_client import ApiError, Client, Status

ROWS = [{"id": "r1", "text": "Delivery was late"}]


def _callback_status(client: Client, job_id: str, timeout: float = 15) -> tuple[str, int]:
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
    time.sleep(3)
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
    assert gaps[0] >= 1.5 and gaps[1] > gaps[0], f"backoff between attempts: {gaps}"
    time.sleep(3)
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
