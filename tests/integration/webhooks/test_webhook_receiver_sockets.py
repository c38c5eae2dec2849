"""A webhook receiver over a real socket cannot hold the sender: a deadline on the whole exchange, an error that
never echoes the receiver, and the address dialled checked again (moved from tests/unit/webhooks/test_webhook_delivery.py,
whose other cases need no socket)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import post

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

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept(): close() alone leaves it blocked (Linux)
        except OSError:
            pass
        listener.close()
        server.join(5)  # not left accepting into the next test (tests/conftest.py _no_thread_outlives_its_test)


def _run(behaviour: Callable[[socket.socket], None], conn: socket.socket, stop: threading.Event,
         wrap: Callable[[socket.socket], socket.socket]) -> None:
    until = time.monotonic() + GIVE_UP_SECONDS
    sock = conn
    try:
        sock = wrap(conn)  # a TLS wrapper takes over the descriptor: it is the one to close
        sock.recv(65536)
        while not stop.is_set() and time.monotonic() < until:
            behaviour(sock)
    except OSError:
        pass
    finally:
        sock.close()
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
    # Without the deadline the receiver holds the sender until it gives up itself (GIVE_UP_SECONDS, 8 s); the
    # bound sits between the two, generous for a loaded machine rather than 2 s + one read timeout.
    assert took < GIVE_UP_SECONDS - 2.0, f"the exchange took {took:.1f} s"


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
