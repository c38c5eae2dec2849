"""Verify a Thematiq webhook on the receiving side (standard library only).

    from thematiq_client import webhooks
    job = webhooks.verify(secrets=[SECRET], body=request.body, headers=request.headers)

``Thematiq-Signature`` is ``t=<unix seconds>,v1=<hex>[,v1=<hex>]``: one ``v1`` per secret the
tenant has active (two during a rotation). Each is HMAC-SHA256 over
``<t>.<Thematiq-Event>.<Thematiq-Delivery>.<raw body>``, so neither header can be replaced
without breaking it. A delivery verifies if any ``v1`` matches any of ``secrets`` (compared in
constant time) and ``t`` is within ``tolerance`` seconds of now.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_TOLERANCE_SECONDS = 300
#: The forms Thematiq sends. The signed string joins the fields with ".", and event names hold dots
#: themselves, so without these checks ``Event: job`` + ``Delivery: succeeded.<id>`` would verify with the
#: signature of ``job.succeeded`` + ``<id>``: a replay under a fresh delivery id, past de-duplication.
_EVENT_RE = re.compile(r"[a-z]+(?:\.[a-z]+)*")
_DELIVERY_RE = re.compile(r"[0-9a-f]{32}")
_MAC_RE = re.compile(r"[0-9a-f]{64}")


class WebhookVerificationError(ValueError):
    """The delivery is not signed by any of the secrets, or is too old (or too far in the future)."""


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    raise WebhookVerificationError(f"missing header {name}")


def verify(
    secrets: str | Iterable[str],
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a delivery's signature and age; returns the parsed body. Raises :class:`WebhookVerificationError`."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    signature = _header(headers, "Thematiq-Signature")
    event = _header(headers, "Thematiq-Event")
    delivery = _header(headers, "Thematiq-Delivery")
    if not _EVENT_RE.fullmatch(event) or not _DELIVERY_RE.fullmatch(delivery):
        raise WebhookVerificationError("malformed Thematiq-Event or Thematiq-Delivery")
    timestamp: int | None = None
    macs: list[str] = []
    for item in signature.split(","):
        name, _, value = item.strip().partition("=")
        # int() also takes "²" or "٣" (not ours), and refuses over 4,300 digits with a plain ValueError: a Unix
        # time in seconds has 10 digits until the year 2286.
        if name == "t" and value.isascii() and value.isdigit() and len(value) <= 12:
            timestamp = int(value)
        elif name == "v1" and _MAC_RE.fullmatch(value):
            # Only what an HMAC-SHA256 hex digest looks like: compare_digest raises TypeError on a non-ASCII str.
            macs.append(value)
    if timestamp is None or not macs:
        raise WebhookVerificationError("malformed Thematiq-Signature")
    payload = f"{timestamp}.{event}.{delivery}.".encode() + body
    expected = [hmac.new(k.encode("utf-8"), payload, hashlib.sha256).hexdigest() for k in keys]
    if not any(hmac.compare_digest(e, m) for e in expected for m in macs):
        raise WebhookVerificationError("bad signature")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise WebhookVerificationError("stale timestamp")
    parsed: dict[str, Any] = json.loads(body)
    return parsed


__all__ = ["DEFAULT_TOLERANCE_SECONDS", "WebhookVerificationError", "verify"]
