"""Every delivery ends: URLs in one normal form, a deadline on the whole exchange, DNS with a timeout, no crash."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import pytest

from shared.core import webhooks as core
from shared.core.webhooks import (
    BLOCKED_RANGES,
    UnsafeUrl,
    WebhookMessage,
    WebhookStatus,
    check_url,
    delivery_id,
    normalise_url,
    refusal,
)
from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import DeliveryOutcome
from tests.support.backends import Backend
from tests.support.webhooks import Recorder, finished_job, public_dns, row


# -- URLs --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("given", "stored"), [
    ("https://hooks.example.com/café", "https://hooks.example.com/caf%C3%A9"),
    ("https://hooks.example.com/h?q=ü", "https://hooks.example.com/h?q=%C3%BC"),
    ("https://例え.jp/hook", "https://xn--r8jz45g.jp/hook"),
    ("https://hooks.example.com/a%20b?x=1&y=%2F", "https://hooks.example.com/a%20b?x=1&y=%2F"),
    ("https://hooks.example.com", "https://hooks.example.com/"),
    ("https://[2606:4700::1111]:8443/h", "https://[2606:4700::1111]:8443/h"),
])
def test_a_url_is_stored_in_one_ascii_form(given: str, stored: str) -> None:
    assert normalise_url(given) == stored
    assert normalise_url(stored) == stored, "normalising is idempotent"
    stored.encode("ascii")  # what http.client sends: never a UnicodeEncodeError at send time


@pytest.mark.parametrize("bad", [
    "https://" + "a" * 64 + ".example/h", "https://a b.example/h", "https://hooks.example.com/\x00", "ftp://x.example/",
    "https://user:pw@x.example/", "https://" + "a" * 3000, "https://[::1/h", "https://x.example:99999/",
])
def test_a_url_without_a_normal_form_is_refused(bad: str) -> None:
    with pytest.raises(UnsafeUrl):
        normalise_url(bad)


def test_a_stored_non_ascii_url_is_normalised_at_send(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    # A row written before submissions were normalised: sent (normalised), never stuck.
    public_dns(monkeypatch)
    job = finished_job(backend, url="https://hooks.example.com/café?q=ü", index=False)
    rec = Recorder()
    assert rec.sender(backend).handle(WebhookMessage(job.tenant, job.id, delivery_id(job)).encode()) == "delivered"
    assert rec.calls[0][0] == "https://hooks.example.com/caf%C3%A9?q=%C3%BC"


def test_a_transport_that_raises_is_one_failed_attempt(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    public_dns(monkeypatch)
    job = finished_job(backend, index=False)
    rec = Recorder()

    def broken(url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
        raise UnicodeEncodeError("ascii", "é", 0, 1, "ordinal not in range")

    sender = runtime.WebhookSender(backend.stores, transport=broken, send=rec.send)
    assert sender.handle(WebhookMessage(job.tenant, job.id, delivery_id(job), 1, time.time()).encode()) == "retrying"
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.RETRYING and stored.callback_attempts == 1
    assert [m.attempt for m, _ in rec.sent] == [2]


@pytest.mark.parametrize("trouble", ["timeout", "eai-again"])
def test_dns_trouble_at_send_is_a_retried_attempt_not_a_failed_webhook(
    trouble: str, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = finished_job(backend, index=False)

    def flaky(host: str, port: int) -> list[str]:
        if trouble == "timeout":
            raise TimeoutError("DNS lookup took too long")
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(core, "_resolve", flaky)
    rec = Recorder()
    sender = runtime.WebhookSender(backend.stores, transport=rec.transport, send=rec.send)
    assert sender.handle(WebhookMessage(job.tenant, job.id, delivery_id(job), 1, time.time()).encode()) == "retrying"
    stored = row(backend, job)
    assert stored.callback_status == WebhookStatus.RETRYING and stored.callback_attempts == 1
    assert (stored.callback_error or "").startswith("failed: ") and not rec.calls  # nothing dialled
    assert [m.attempt for m, _ in rec.sent] == [2]


# -- DNS ----------------------------------------------------------------------------------------------
def test_a_dns_lookup_that_hangs_is_a_refusal_within_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hang(host: str, port: int) -> list[str]:
        release.wait(30)
        return ["93.184.216.34"]

    monkeypatch.setattr(core, "_getaddrinfo", hang)
    monkeypatch.setattr(core, "DNS_TIMEOUT_SECONDS", 0.3)
    try:
        with pytest.raises(UnsafeUrl, match="did not resolve within"):
            check_url("https://slow.example/h", allow_private=False)
    finally:
        release.set()


# -- SSRF ---------------------------------------------------------------------------------------------
def _samples(network: str) -> list[str]:
    net = ipaddress.ip_network(network)
    return sorted({str(net.network_address), str(net.network_address + net.num_addresses // 2),
                   str(net.broadcast_address)})


@pytest.mark.parametrize(("name", "network"), [(n, net) for n, nets in BLOCKED_RANGES.items() for net in nets])
def test_every_listed_range_is_refused(name: str, network: str) -> None:
    for address in _samples(network):
        assert refusal(address) is not None, f"{address} ({name}) must be refused"
        with pytest.raises(UnsafeUrl, match="non-public"):
            check_url("https://h.example/x", allow_private=False, resolve=lambda h, p, a=address: [a])


@pytest.mark.parametrize("address", [
    "::169.254.169.254", "::ffff:0:a9fe:a9fe", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::1", "fec0::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "100.64.0.1", "fd00:ec2::254",
])
def test_ipv6_forms_that_embed_private_ipv4_are_refused(address: str) -> None:
    assert refusal(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001:82b::200e"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(address) is None
