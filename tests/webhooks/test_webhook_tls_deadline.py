"""The exchange deadline holds over TLS too: the socket the deadline shuts is the one TLS reads from."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import post

#: The receiver stops by itself after this long, so a sender without a working deadline still ends the test.
GIVE_UP_SECONDS = 8.0


def _certificate(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _tls_server(tmp: Path, behaviour: Callable[[ssl.SSLSocket], None]) -> Iterator[int]:
    cert, key = _certificate(tmp)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def run(conn: socket.socket) -> None:
        until = time.monotonic() + GIVE_UP_SECONDS
        try:
            tls = context.wrap_socket(conn, server_side=True)
            tls.recv(65536)
            while not stop.is_set() and time.monotonic() < until:
                behaviour(tls)
        except OSError:
            pass
        finally:
            conn.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=run, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def _trickle(conn: ssl.SSLSocket) -> None:
    conn.sendall(b"H")
    time.sleep(0.2)


def _continue(conn: ssl.SSLSocket) -> None:
    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    time.sleep(0.05)


@pytest.mark.parametrize("behaviour", [_trickle, _continue], ids=["trickle", "100-continue"])
def test_a_receiver_cannot_hold_the_sender_past_the_deadline_over_tls(
    behaviour: Callable[[ssl.SSLSocket], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.config.settings import get_settings

    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    monkeypatch.setattr(runtime, "EXCHANGE_DEADLINE_SECONDS", 2.0)
    monkeypatch.setattr(runtime, "TIMEOUT_SECONDS", 1.5)
    trusting = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda: trusting(cafile=str(tmp_path / "cert.pem")))
    for port in _tls_server(tmp_path, behaviour):
        started = time.monotonic()
        outcome = post(f"https://localhost:{port}/h", ["127.0.0.1"], b"{}", {})
        took = time.monotonic() - started
    assert not outcome.ok and outcome.detail == "failed: no complete answer within 2 s"
    assert took < 2.0 + 1.5, f"the exchange took {took:.1f} s"
