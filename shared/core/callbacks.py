"""Completion webhooks, the domain part: the delivery message, the URL policy (SSRF), the signature.

The delivery itself (HTTP, backoff, dead letter) is ``shared.runtime.callbacks``; the
lifecycle calls :func:`job_ended` once, after the write that made a job terminal
landed, and the runtime registers the sender that enqueues the delivery
(``set_sender``), so this layer never touches a queue client itself.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from shared.config.constants import JOB_ID_RE, TENANT_RE
from shared.core.jobs import Job, Status
from shared.core.messages import BadMessage

log = logging.getLogger(__name__)

MAX_URL_CHARS = 2048
EVENTS = {Status.SUCCEEDED: "job.succeeded", Status.FAILED: "job.failed", Status.CANCELLED: "job.cancelled"}


class UnsafeUrl(ValueError):
    """A webhook URL this deployment will not call (not https, or not a public address)."""


@dataclass(frozen=True)
class CallbackMessage:
    """Deliver the completion webhook of a job; ``delivery`` is the id receivers dedupe by."""

    tenant: str
    job_id: str
    delivery: str
    attempt: int = 1
    #: Unix seconds of the first attempt: deliveries are retried for 24 h from there.
    first_at: float = 0.0

    def encode(self) -> str:
        body = {"t": self.tenant, "j": self.job_id, "d": self.delivery, "a": self.attempt, "f": self.first_at}
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> CallbackMessage:
        try:
            b = json.loads(text)
            msg = cls(str(b["t"]), str(b["j"]), str(b["d"]), int(b.get("a", 1)), float(b.get("f", 0.0)))
        except (ValueError, KeyError, TypeError) as err:
            raise BadMessage("not a callback message") from err
        if not TENANT_RE.match(msg.tenant) or not JOB_ID_RE.match(msg.job_id) or msg.attempt < 1:
            raise BadMessage("callback message with invalid ids")
        return msg


def delivery_id(job: Job) -> str:
    """One id per job event, the same however often the event is enqueued, so receivers can dedupe."""
    return hashlib.sha256(f"{job.tenant}/{job.id}/{job.status.value}".encode()).hexdigest()[:32]


def event_of(job: Job) -> str:
    return EVENTS[job.status]


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


# -- URL policy ------------------------------------------------------------------------------------
Resolver = Callable[[str, int], list[str]]


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(ip.is_global) and not ip.is_multicast


def check_url(url: str, *, allow_private: bool, resolve: Resolver | None = None) -> list[str]:
    """Refuse a webhook URL that is not https or does not resolve only to public addresses.

    Returns the addresses it resolved to (the sender connects to one of these, so a DNS
    answer that changes between the check and the connect cannot redirect it).
    ``allow_private`` (WEBHOOK_ALLOW_PRIVATE, local development) lifts both rules.
    """
    if len(url) > MAX_URL_CHARS:
        raise UnsafeUrl(f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as err:
        raise UnsafeUrl(f"not a valid URL ({err})") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UnsafeUrl("the URL must be an absolute https:// URL")
    if parts.username or parts.password:
        raise UnsafeUrl("the URL must not carry credentials")
    if parts.scheme != "https" and not allow_private:
        raise UnsafeUrl("the URL must use https")
    try:
        addresses = (resolve or _resolve)(parts.hostname, port)
    except (OSError, UnicodeError):
        raise UnsafeUrl(f"the host {parts.hostname!r} does not resolve") from None
    if not addresses:
        raise UnsafeUrl(f"the host {parts.hostname!r} does not resolve")
    if not allow_private:
        private = [a for a in addresses if not _public(a)]
        if private:
            raise UnsafeUrl(f"the host resolves to a non-public address ({private[0]})")
    return addresses


# -- the terminal-state hook -----------------------------------------------------------------------
Sender = Callable[[CallbackMessage], None]
_sender: Sender | None = None


def set_sender(sender: Sender | None) -> None:
    """Register what enqueues a delivery (``shared.runtime.callbacks`` does, at import)."""
    global _sender
    _sender = sender


def job_ended(job: Job) -> None:
    """Called by the lifecycle after a write made ``job`` terminal: enqueue its webhook, if it has one.

    Never raises: a delivery that cannot be enqueued now is found by the callback sweep
    (``callback_status`` still ``pending`` on a finished job), so the transition is never undone.
    """
    if not job.callback_url or not job.status.terminal or _sender is None:
        return
    try:
        _sender(CallbackMessage(job.tenant, job.id, delivery_id(job)))
    except Exception:
        log.warning("job %s: webhook delivery not enqueued; the sweep will", job.id, exc_info=True)
