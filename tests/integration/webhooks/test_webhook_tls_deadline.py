"""The exchange deadline holds over TLS too: the socket the deadline shuts is the one TLS reads from."""

from __future__ import annotations

import datetime
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shared.runtime import webhooks as runtime
from shared.runtime.webhooks import post
from tests.integration.webhooks.test_webhook_receiver_sockets import _continue, _server, _trickle


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


def _tls(tmp: Path) -> Callable[[socket.socket], socket.socket]:
    cert, key = _certificate(tmp)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return lambda conn: context.wrap_socket(conn, server_side=True)


@pytest.mark.parametrize("behaviour", [_trickle, _continue], ids=["trickle", "100-continue"])
def test_a_receiver_cannot_hold_the_sender_past_the_deadline_over_tls(
    behaviour: Callable[[socket.socket], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.config.settings import get_settings

    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    monkeypatch.setattr(runtime, "EXCHANGE_DEADLINE_SECONDS", 2.0)
    monkeypatch.setattr(runtime, "TIMEOUT_SECONDS", 1.5)
    trusting = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda: trusting(cafile=str(tmp_path / "cert.pem")))
    for port in _server(behaviour, _tls(tmp_path)):
        started = time.monotonic()
        outcome = post(f"https://localhost:{port}/h", ["127.0.0.1"], b"{}", {})
        took = time.monotonic() - started
    assert not outcome.ok and outcome.detail == "failed: no complete answer within 2 s"
    assert took < 2.0 + 1.5, f"the exchange took {took:.1f} s"
