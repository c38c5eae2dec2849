"""Every delivery ends: URLs in one normal form, a deadline on the whole exchange, DNS with a timeout, no crash."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterator

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
from shared.runtime.webhooks import Outcome, post
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

    def broken(url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> Outcome:
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


# -- the deadline on the whole exchange ------------------------------------------------------------
#: A receiver stops by itself after this long, so a sender without a working deadline still ends the test.
GIVE_UP_SECONDS = 8.0


def _server(behaviour: Callable[[socket.socket], None],
            wrap: Callable[[socket.socket], socket.socket] = lambda conn: conn) -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_run, args=(behaviour, conn, stop, wrap), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def _run(behaviour: Callable[[socket.socket], None], conn: socket.socket, stop: threading.Event,
         wrap: Callable[[socket.socket], socket.socket]) -> None:
    until = time.monotonic() + GIVE_UP_SECONDS
    try:
        sock = wrap(conn)
        sock.recv(65536)
        while not stop.is_set() and time.monotonic() < until:
            behaviour(sock)
    except OSError:
        pass
    finally:
        conn.close()


def _trickle(conn: socket.socket) -> None:
    conn.sendall(b"H")  # one header byte at a time, each well inside the per-read timeout
    time.sleep(0.2)


def _continue(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    time.sleep(0.05)


def _silent(conn: socket.socket) -> None:
    time.sleep(0.2)


@pytest.mark.parametrize("behaviour", [_trickle, _continue, _silent], ids=["trickle", "100-continue", "silent"])
def test_a_receiver_cannot_hold_the_sender_past_the_deadline(
    behaviour: Callable[[socket.socket], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    core_settings_reset()
    # The same code with a 2 s deadline and a 1.5 s per-read timeout: a trickle or an interim stream would
    # outlive both without the wall clock (each read returns within its timeout).
    monkeypatch.setattr(runtime, "EXCHANGE_DEADLINE_SECONDS", 2.0)
    monkeypatch.setattr(runtime, "TIMEOUT_SECONDS", 1.5)
    for port in _server(behaviour):
        started = time.monotonic()
        outcome = post(f"http://127.0.0.1:{port}/h", ["127.0.0.1"], b"{}", {})
        took = time.monotonic() - started
    assert not outcome.ok and outcome.detail == "failed: no complete answer within 2 s"
    assert took < 2.0 + 1.5, f"the exchange took {took:.1f} s"


def test_the_production_deadline_is_at_most_15_seconds() -> None:
    assert runtime.EXCHANGE_DEADLINE_SECONDS <= 15 and runtime.TIMEOUT_SECONDS <= runtime.EXCHANGE_DEADLINE_SECONDS


def core_settings_reset() -> None:
    from shared.config.settings import get_settings

    get_settings.cache_clear()


def test_last_error_never_echoes_the_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    core_settings_reset()

    def banner(conn: socket.socket) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6 secret-banner\r\n")
        conn.close()
        raise OSError

    for port in _server(banner):
        outcome = post(f"http://127.0.0.1:{port}/h", ["127.0.0.1"], b"{}", {})
    assert not outcome.ok and outcome.detail.startswith("failed: ")
    assert "SSH" not in outcome.detail and str(port) not in outcome.detail and "banner" not in outcome.detail


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


def test_the_address_dialled_is_checked_again() -> None:
    # A list of addresses that did not come from check_url (or a resolver that changed its mind) is never dialled.
    connected = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    outcome = post(f"https://h.example:{port}/x", ["127.0.0.1"], b"{}", {})
    try:
        listener.accept()
        connected.set()
    except TimeoutError:
        pass
    listener.close()
    assert not outcome.ok and outcome.detail == "refused: the address dialled is not public (loopback)"
    assert not connected.is_set()
