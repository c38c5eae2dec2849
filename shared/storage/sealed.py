"""Envelope encryption of a row's secret property: what a reader of the table without the key learns is nothing.

Used for the tenants' webhook signing secrets (``shared.storage.webhook_store``). Each write draws a fresh
256-bit data key, encrypts the plaintext with it (AES-256-GCM), and wraps the data key with the
*key-encryption key* (AES-256-GCM again). The row stores only the two ciphertexts and the key's id; both are
bound to their row by GCM's associated data (``context``: the tenant and the row key), so a sealed value copied
into another tenant's row does not open there.

The key-encryption key comes from the app setting ``WEBHOOK_SECRETS_KEY``: in Azure a Key Vault reference
(``@Microsoft.KeyVault(SecretUri=…)``, resolved by App Service with the app's managed identity, so no SDK and no
key in the template or the code), locally ``local.settings.json`` or, when empty, a development key that is
public by construction (:data:`DEV_KEY_TEXT`: fine on Azurite, never in Azure, where the template always sets
the reference, and where an empty key is refused: :func:`current_key`). The setting's text (any length; Key Vault
holds 32 random bytes as base64) is stretched to 256 bits with SHA-256. ``WEBHOOK_SECRETS_KEY_PREVIOUS`` opens rows
sealed before a key rotation; the next write of each row seals it with the current key. Key material and plaintexts never reach a log or an error message.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.config.settings import UnresolvedSecret, raw, secret
from shared.core.errors import Misconfigured, StorageError

#: Used only when ``WEBHOOK_SECRETS_KEY`` is empty (local development): anyone can read this, on purpose.
DEV_KEY_TEXT = "thematiq local development key: not a secret"
_NONCE = 12
FIELDS = ("sealed", "sealed_key", "sealed_kid")


class Unsealable(Misconfigured, StorageError):
    """A sealed value that no configured key opens (a wrong or missing key, or a row moved elsewhere).

    A deployment fault, as an unresolved key reference is: the API answers 503 ``service-misconfigured`` with
    ``Retry-After`` (a 500 "storage error" until review44p), and a delivery is a failed attempt, retried.
    """


@dataclass(frozen=True)
class Key:
    id: str
    material: bytes


def key_of(text: str) -> Key:
    material = hashlib.sha256(b"thematiq/webhook-secrets/kek\0" + text.encode()).digest()
    return Key(hashlib.sha256(material).hexdigest()[:12], material)


def current_key() -> Key:
    """The key-encryption key; the development key only where the app does not trust a gateway (local mode).

    In gateway mode (``TRUSTED_GATEWAY_PRINCIPAL_ID`` set: Azure) an empty ``WEBHOOK_SECRETS_KEY`` (the setting
    removed or left blank, an empty vault secret) is refused as an unresolved reference is: falling back to
    :data:`DEV_KEY_TEXT` there sealed every tenant's signing secrets with a key anyone can read (review45w).
    """
    text = secret("WEBHOOK_SECRETS_KEY")
    if not text:
        if raw("TRUSTED_GATEWAY_PRINCIPAL_ID").strip():
            raise UnresolvedSecret(
                "WEBHOOK_SECRETS_KEY is empty: the public development key is not used where the app trusts a gateway"
            )
        text = DEV_KEY_TEXT
    return key_of(text)


def _keys() -> dict[str, Key]:
    keys = [current_key()]
    previous = secret("WEBHOOK_SECRETS_KEY_PREVIOUS")
    if previous:
        keys.append(key_of(previous))
    return {k.id: k for k in keys}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def seal(plaintext: bytes, context: str, key: Key | None = None) -> dict[str, str]:
    """The three properties to store instead of ``plaintext`` (``FIELDS``)."""
    kek = key or current_key()
    aad = context.encode()
    data_key = AESGCM.generate_key(bit_length=256)
    n1, n2 = os.urandom(_NONCE), os.urandom(_NONCE)
    return {
        "sealed": _b64(n1 + AESGCM(data_key).encrypt(n1, plaintext, aad)),
        "sealed_key": _b64(n2 + AESGCM(kek.material).encrypt(n2, data_key, aad)),
        "sealed_kid": kek.id,
    }


def unseal(fields: dict[str, object], context: str) -> bytes:
    """The plaintext of :func:`seal`'s properties; :class:`Unsealable` if no configured key opens them."""
    kid = str(fields.get("sealed_kid") or "")
    kek = _keys().get(kid)
    if kek is None:
        raise Unsealable(f"stored secrets are sealed with key {kid!r}, which is not configured")
    try:
        aad = context.encode()
        wrapped = base64.b64decode(str(fields["sealed_key"]))
        data_key = AESGCM(kek.material).decrypt(wrapped[:_NONCE], wrapped[_NONCE:], aad)
        sealed = base64.b64decode(str(fields["sealed"]))
        return AESGCM(data_key).decrypt(sealed[:_NONCE], sealed[_NONCE:], aad)
    except (InvalidTag, KeyError, ValueError) as err:
        raise Unsealable(f"stored secrets do not open with key {kid!r} for this row") from err


__all__ = ["DEV_KEY_TEXT", "FIELDS", "Key", "Unsealable", "current_key", "key_of", "seal", "unseal"]
