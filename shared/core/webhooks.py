"""Completion webhooks, the domain part: the delivery message, the URL policy (SSRF), secrets and signatures.

The delivery itself (HTTP, backoff, dead letter, the sweep) is ``shared.runtime.webhooks``;
the lifecycle calls :func:`job_ending` just before a write that makes a job terminal (its webhook-index row made due)
and :func:`job_ended` once, after that write landed, handing it the stores' message port (``Stores.messages``, which puts a
:class:`WebhookMessage` on ``CALLBACKS_QUEUE``), so this layer never touches a queue client itself. Where secrets and
the webhook index are stored is ``shared.storage.webhook_store``; what a rotation or a
revocation changes is planned here (:func:`plan_rotation`, :func:`plan_revocation`) and
applied by ``shared.core.conditional``.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import ipaddress
import itertools
import json
import logging
import secrets as _secrets
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.config.constants import JOB_ID_RE, TENANT_RE
from shared.core.errors import Conflict, NotFound
from shared.core.jobs import Job, Status, utcnow
from shared.core.jobs import WebhookStatus as WebhookStatus  # re-exported: the webhook API in one place
from shared.core.messages import BadMessage

log = logging.getLogger(__name__)

MAX_URL_CHARS = 2048
EVENTS = {Status.SUCCEEDED: "job.succeeded", Status.FAILED: "job.failed", Status.CANCELLED: "job.cancelled"}
#: How long one DNS lookup may take, at submission and at send (getaddrinfo itself has no timeout).
DNS_TIMEOUT_SECONDS = 3.0
#: At most this many signing secrets are active at once: the old and the new one, during a rotation.
MAX_ACTIVE_SECRETS = 2
#: The id the deployment-wide ``WEBHOOK_SECRET`` has as the default tenant's first secret.
DEPLOYMENT_SECRET_ID = "deployment"  # noqa: S105 - an id, not a secret
#: A webhook with no attempt recorded this long after it was due is looked at again by the sweep.
SWEEP_AFTER = timedelta(minutes=5)
#: The ``due_at`` of the webhook-index row of a job still in flight (queued, parked, running): never due. The
#: job's terminal write makes it due (:func:`job_ending`), so a tenant's jobs in flight take none of the sweep's
#: share (webhooks45: each was looked at every 5 minutes). A row past ``now + IN_FLIGHT_AFTER`` is such a row.
IN_FLIGHT_DUE = datetime(3000, 1, 1, tzinfo=UTC)
IN_FLIGHT_AFTER = timedelta(days=365)
#: A job whose terminal write was announced (the row's ``ending_at``, written just before that write) but which the
#: sweep still finds in flight is looked at again this often, not set never due, for :data:`ENDING_GRACE` after the
#: announcement: a terminal write that lands late (a writer stalled past the row's 5 minutes) is still seen.
ENDING_RECHECK = timedelta(hours=1)
ENDING_GRACE = timedelta(hours=24)
#: How long a ``POST /webhooks/secrets`` Idempotency-Key is remembered: on the secret it created, for this long after
#: its creation (and never after the secret is revoked). Past it the same key creates a new secret.
SECRET_IDEMPOTENCY_WINDOW = timedelta(hours=24)


class UnsafeUrl(ValueError):
    """A webhook URL this deployment will not call (not https, not normalisable, or not a public address)."""


class UnresolvedHost(UnsafeUrl):
    """The URL's host gave no address this time (a DNS timeout or failure): refused at submission,
    but at send time a failed attempt that is retried, since DNS trouble is usually transient."""


@dataclass(frozen=True)
class WebhookMessage:
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
    def decode(cls, text: str) -> WebhookMessage:
        try:
            b = json.loads(text)
            msg = cls(str(b["t"]), str(b["j"]), str(b["d"]), int(b.get("a", 1)), float(b.get("f", 0.0)))
        except (ValueError, KeyError, TypeError) as err:
            raise BadMessage("not a webhook message") from err
        if not TENANT_RE.fullmatch(msg.tenant) or not JOB_ID_RE.fullmatch(msg.job_id) or msg.attempt < 1:
            raise BadMessage("webhook message with invalid ids")
        return msg


def delivery_id(job: Job) -> str:
    """One id per job event, the same however often the event is enqueued, so receivers can dedupe."""
    return hashlib.sha256(f"{job.tenant}/{job.id}/{job.status.value}".encode()).hexdigest()[:32]


def event_of(job: Job) -> str:
    return EVENTS[job.status]


# -- signing -----------------------------------------------------------------------------------------
def signed_payload(timestamp: int, event: str, delivery: str, body: bytes) -> bytes:
    """What a signature covers: ``<t>.<event>.<delivery>.<raw body>``, so neither header can be swapped."""
    return f"{timestamp}.{event}.{delivery}.".encode() + body


def sign(keys: Iterable[str], timestamp: int, event: str, delivery: str, body: bytes) -> str:
    """``t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=…]``: one ``v1`` per active secret (two during a rotation)."""
    payload = signed_payload(timestamp, event, delivery, body)
    macs = [hmac.new(k.encode("utf-8"), payload, hashlib.sha256).hexdigest() for k in keys]
    if not macs:
        raise ValueError("no signing secret")
    return ",".join([f"t={timestamp}", *(f"v1={m}" for m in macs)])


@dataclass(frozen=True)
class Secret:
    id: str
    value: str
    created_at: datetime
    #: sha256 (hex) of the Idempotency-Key that created it, never the key itself; None without one.
    key_hash: str | None = None
    #: sha256 (hex) of the body sent with that key: a replay must send the same.
    request_hash: str | None = None


def idempotency_hash(key: str) -> str:
    """What a secret stores of its Idempotency-Key (inside the sealed row): a hash, so the key itself is kept nowhere."""
    return hashlib.sha256(b"thematiq/webhook-secret-key\0" + key.encode()).hexdigest()


def created_with_key(current: SecretSet, key_hash: str, now: datetime) -> Secret | None:
    """The active secret an Idempotency-Key created within :data:`SECRET_IDEMPOTENCY_WINDOW` of ``now``, or None."""
    return next((s for s in current.secrets
                 if s.key_hash == key_hash and now - s.created_at < SECRET_IDEMPOTENCY_WINDOW), None)


@dataclass(frozen=True)
class SecretSet:
    """A tenant's signing secrets (at most :data:`MAX_ACTIVE_SECRETS`), as one row of its own partition.

    ``etag`` None: no row is stored yet (the first write inserts). ``op`` is the token of the
    conditional write that last changed it (``shared.core.conditional``).
    """

    tenant: str
    secrets: tuple[Secret, ...] = ()
    etag: str | None = field(default=None, compare=False)
    op: str | None = None

    def find(self, secret_id: str) -> Secret | None:
        return next((s for s in self.secrets if s.id == secret_id), None)


def new_secret(now: datetime, key_hash: str | None = None, request_hash: str | None = None) -> Secret:
    return Secret(id="whs_" + _secrets.token_hex(6), value="whsec_" + _secrets.token_urlsafe(32), created_at=now,
                  key_hash=key_hash, request_hash=request_hash)


def plan_rotation(current: SecretSet, secret: Secret) -> dict[str, Any] | None:
    """Add ``secret`` (a rotation starts, or a tenant's first secret). None once it is there (the write landed).

    Refuses a third active secret: a rotation ends by revoking the old one, so a caller can
    never silently drop the secret its receivers still check.

    With an Idempotency-Key (``secret.key_hash``): None too when the row already holds the secret that key created
    (an earlier call's, whose answer was lost, or a concurrent one's), which the caller then answers again; 409
    naming the header when that call sent another body. Checked before the limit, so a replay is never refused.
    """
    if current.find(secret.id) is not None:
        return None
    if secret.key_hash is not None:
        earlier = created_with_key(current, secret.key_hash, secret.created_at)
        if earlier is not None:
            if earlier.request_hash != secret.request_hash:
                raise Conflict("this Idempotency-Key was used with a different request body", field="Idempotency-Key")
            return None
    if len(current.secrets) >= MAX_ACTIVE_SECRETS:
        raise Conflict(
            f"{MAX_ACTIVE_SECRETS} secrets are active: revoke one (DELETE /api/webhooks/secrets/{{id}}) first",
            field="secret",
        )
    return {"secrets": (*current.secrets, secret)}


def plan_revocation(current: SecretSet, secret_id: str, *, seen: bool) -> dict[str, Any] | None:
    """Remove a secret. ``seen``: the caller saw it before (so a re-read without it means our write landed)."""
    if current.find(secret_id) is None:
        if seen:
            return None
        raise NotFound("no such webhook secret", field="id")
    if len(current.secrets) == 1:
        raise Conflict("the last signing secret cannot be revoked: create its successor first", field="id")
    return {"secrets": tuple(s for s in current.secrets if s.id != secret_id)}


def with_deployment_secret(stored: SecretSet, deployment_secret: str | None, default_tenant: str) -> SecretSet:
    """The default tenant's secrets: ``WEBHOOK_SECRET`` first, until the tenant stores a set of its own.

    Its first rotation stores ``WEBHOOK_SECRET`` (id ``deployment``) with the new secret, so the
    deployment-wide secret is migrated into the tenant's own row and can then be revoked.
    """
    if stored.secrets or stored.etag is not None or not deployment_secret or stored.tenant != default_tenant:
        return stored
    # The epoch in UTC: a naive fromtimestamp(0) is local time, listed without an offset (not RFC 3339) and, outside
    # UTC, not the epoch (review45w).
    return replace(stored, secrets=(Secret(DEPLOYMENT_SECRET_ID, deployment_secret, datetime.fromtimestamp(0, UTC)),))


# -- URL policy ------------------------------------------------------------------------------------
Resolver = Callable[[str, int], list[str]]

#: Every range a webhook is never sent to, by name. Checked on each address a host resolves to and on
#: the address actually dialled; ``ipaddress.is_global`` is not trusted (it accepts ``::169.254.169.254``,
#: NAT64, 6to4 and site-local forms). Any IPv6 address outside global unicast (2000::/3) is refused too.
BLOCKED_RANGES: dict[str, tuple[str, ...]] = {
    "this network / unspecified": ("0.0.0.0/8", "::/128"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    "loopback": ("127.0.0.0/8", "::1/128"),
    "link-local (cloud metadata)": ("169.254.0.0/16", "fe80::/10"),
    "CGNAT shared space": ("100.64.0.0/10",),
    "IETF protocol assignments": ("192.0.0.0/24",),
    "documentation": ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
    "benchmarking": ("198.18.0.0/15", "2001:2::/48"),
    "6to4 relay anycast": ("192.88.99.0/24",),
    "multicast": ("224.0.0.0/4", "ff00::/8"),
    "reserved": ("240.0.0.0/4", "255.255.255.255/32", "2001:10::/28", "2001:20::/28", "100::/64"),
    "unique-local": ("fc00::/7",),
    "site-local": ("fec0::/10",),
    "IPv4-mapped IPv6": ("::ffff:0:0/96",),
    "IPv4-translated IPv6": ("::ffff:0:0:0/96",),
    "IPv4-compatible IPv6": ("::/96",),
    "NAT64": ("64:ff9b::/96", "64:ff9b:1::/48"),
    "6to4": ("2002::/16",),
    "Teredo": ("2001::/32",),
}
_BLOCKED = [(name, ipaddress.ip_network(net)) for name, nets in BLOCKED_RANGES.items() for net in nets]
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
#: The upper half of an ISATAP interface identifier, 0000:5efe, with the universal/local bit (0200:5efe) masked.
_ISATAP_IID = 0x00005EFE


def refusal(address: str) -> str | None:
    """Why ``address`` may not be called (the range's name), or None for a public address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    for name, net in _BLOCKED:
        if ip.version == net.version and ip in net:
            return name
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        return "not global unicast"
    if isinstance(ip, ipaddress.IPv6Address) and (int(ip) >> 32) & 0xFDFFFFFF == _ISATAP_IID:
        # ISATAP (RFC 5214): an IPv4 address in the interface identifier (``…:0:5efe:a.b.c.d``, or ``200:5efe``
        # with the universal bit), under any prefix, global ones included. Refused whatever the IPv4 is:
        # where such a packet goes is the ISATAP router's decision, not this policy's.
        return "ISATAP (IPv4-embedded IPv6)"
    return None


#: Lookups in flight at once, at most; past it a lookup fails at once (a failed attempt, retried). Far above what
#: one tenant can hang at API Management's rate (2 a second, each held 10-20 s by a resolver that gives up).
MAX_LOOKUPS = 256
_lookups: dict[tuple[str, int], concurrent.futures.Future[list[str]]] = {}
_lookups_lock = threading.Lock()
_lookup_ids = itertools.count(1)


def _lookup(host: str, port: int) -> concurrent.futures.Future[list[str]]:
    """The lookup of ``host`` in flight, or a new one on a thread of its own (never queued behind another).

    Started on first use, never at import: the zygote imports this module and must not start threads. Until
    review44p every lookup ran on one pool of 4 threads, so four hung lookups (a callback host whose name servers do
    not answer, which any tenant can submit) held every thread, and all other lookups, every tenant's, timed out
    in its queue unstarted.
    """
    key = (host, port)
    with _lookups_lock:
        future = _lookups.get(key)
        if future is not None:
            return future  # the same host asked again while its lookup runs: one thread, not one per caller
        if len(_lookups) >= MAX_LOOKUPS:
            raise TimeoutError(f"DNS lookup of {host!r} not started: {MAX_LOOKUPS} lookups are in flight")
        future = _lookups[key] = concurrent.futures.Future()
    thread = threading.Thread(target=_run_lookup, args=(key, future), name=f"thematiq-dns_{next(_lookup_ids)}",
                              daemon=True)
    try:
        thread.start()
    except RuntimeError as err:  # no thread to be had: never leave a future nobody will answer
        with _lookups_lock:
            _lookups.pop(key, None)
        future.set_exception(TimeoutError(f"DNS lookup of {host!r} not started ({err})"))
    return future


def _run_lookup(key: tuple[str, int], future: concurrent.futures.Future[list[str]]) -> None:
    try:
        result = _getaddrinfo(*key)
    except BaseException as err:  # noqa: BLE001 - handed to every waiter, who decides
        with _lookups_lock:
            _lookups.pop(key, None)
        future.set_exception(err)
    else:
        with _lookups_lock:
            _lookups.pop(key, None)  # gone before the answer: a later caller starts a fresh lookup
        future.set_result(result)


def _getaddrinfo(host: str, port: int) -> list[str]:
    """The host's addresses in the order ``getaddrinfo`` gives them, each once.

    That order is the resolver's destination address selection (RFC 6724): on an instance without IPv6
    connectivity (App Service and Flex Consumption have no outbound IPv6) IPv4 comes first. Sorted as text, the
    addresses of a dual-stack receiver such as ``2600:1f18:…`` and ``52.…`` put every IPv6 one first, and the
    sender, which dials at most three, never reached the IPv4 ones (review44p).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _resolve(host: str, port: int, timeout: float | None = None) -> list[str]:
    """``getaddrinfo`` with a timeout: it runs on a thread of its own, and a lookup that hangs is abandoned, not
    awaited (its thread ends when the resolver gives up)."""
    timeout = DNS_TIMEOUT_SECONDS if timeout is None else timeout
    future = _lookup(host, port)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"DNS lookup of {host!r} took over {timeout:g} s") from None


_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


def normalise_url(url: str) -> str:
    """The one form a webhook URL is stored and called in: IDNA (punycode) host, percent-encoded path and query.

    ``https://例え.jp/café?q=ü`` becomes ``https://xn--r8jz45g.jp/caf%C3%A9?q=%C3%BC``. Existing
    ``%XX`` escapes are kept. Raises :class:`UnsafeUrl` for what has no such form.
    """
    if len(url) > MAX_URL_CHARS:
        raise UnsafeUrl(f"the URL is longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise UnsafeUrl("the URL contains spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as err:
        raise UnsafeUrl(f"not a valid URL ({err})") from None
    if parts.scheme not in ("https", "http") or not host:
        raise UnsafeUrl("the URL must be an absolute https:// URL")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("the URL must not carry credentials")
    if port == 0:
        # Not a port anyone listens on: connect() to it fails, or on some stacks picks a port for us.
        raise UnsafeUrl("the URL's port must be from 1 to 65535")
    if ":" in host:  # an IPv6 literal
        try:
            netloc_host = f"[{ipaddress.IPv6Address(host)}]"
        except ValueError:
            raise UnsafeUrl("not a valid IPv6 address") from None
    else:
        try:
            netloc_host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise UnsafeUrl("the host name is not a valid international domain name") from None
    netloc = netloc_host + (f":{port}" if port is not None else "")
    path = urllib.parse.quote(parts.path or "/", safe=_PATH_SAFE)
    query = urllib.parse.quote(parts.query, safe=_QUERY_SAFE)
    normalised = urllib.parse.urlunsplit((parts.scheme, netloc, path, query, ""))
    if len(normalised) > MAX_URL_CHARS:
        raise UnsafeUrl(f"the URL is longer than {MAX_URL_CHARS} characters once encoded")
    return normalised


def check_url(url: str, *, allow_private: bool, resolve: Resolver | None = None) -> list[str]:
    """Refuse a webhook URL that is not https or does not resolve only to public addresses.

    ``url`` must be normalised (:func:`normalise_url`); the fragment is never sent. Returns the
    addresses it resolved to: the sender connects to one of these, and checks it again when it
    dials, so a DNS answer that changes between the check and the connect cannot redirect it.
    ``allow_private`` (WEBHOOK_ALLOW_PRIVATE, local development) lifts both rules.
    """
    if normalise_url(url) != url:
        raise UnsafeUrl("the URL is not in normalised form")
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme != "https" and not allow_private:
        raise UnsafeUrl("the URL must use https")
    try:
        addresses = (resolve or _resolve)(host, port)
    except TimeoutError:
        raise UnresolvedHost(f"the host {host!r} did not resolve within {DNS_TIMEOUT_SECONDS:g} s") from None
    except (OSError, UnicodeError):
        raise UnresolvedHost(f"the host {host!r} does not resolve") from None
    if not addresses:
        raise UnresolvedHost(f"the host {host!r} does not resolve")
    if not allow_private:
        reasons = sorted({r for a in addresses if (r := refusal(a)) is not None})
        if reasons:
            # The range's name, never the address: a refusal must not map someone's internal DNS for them.
            raise UnsafeUrl(f"the host resolves to a non-public address ({reasons[0]})")
    return addresses


# -- the terminal-state hook -----------------------------------------------------------------------
Sender = Callable[[WebhookMessage], None]
#: Make a job's webhook-index row due at a time (an idempotent upsert of the hint): ``(tenant, job id, due_at)``.
MarkDue = Callable[[str, str, datetime], None]

_MARK_DUE: list[Callable[[Any], MarkDue]] = []


def register_index(factory: Callable[[Any], MarkDue]) -> None:
    """Called by ``shared.storage`` on import (this layer may not import the one that implements the index)."""
    _MARK_DUE[:] = [factory]


def mark_due_of(stores: Any) -> MarkDue | None:
    return _MARK_DUE[0](stores) if _MARK_DUE else None


def job_ending(before: Job, status: Status, finished_at: datetime | None, mark_due: MarkDue | None) -> None:
    """Called by the lifecycle just *before* a write that makes ``before`` terminal (platform46): make its
    webhook-index row due (``mark_due``: a MERGE upsert of ``due_at`` and ``ending_at``, recreating a row the sweep
    removed meanwhile).

    Before, not after: a process that dies right after the terminal write (or whose "due" write then fails) has
    already made the row due, so the 5-minute sweep finds a lost first message without the daily scan of the table
    that used to heal such a row (webhooks45 made the row due after the write). A terminal write that then does not
    land leaves a row due for a job still in flight: the sweep looks at it again hourly while the announcement is under
    ``ENDING_GRACE`` old (about 24 looks of 3-4 operations), then parks it never due. The
    sweep's "in flight" write is conditional on the row it read, so it can never overwrite this mark with "never
    due" (``shared.runtime.webhooks``). Raises what the write raised: the terminal write is not made without it (the
    lifecycle's conditional write retries or answers as Storage away, as for the terminal write itself).
    """
    if not before.callback_url or before.status.terminal or not status.terminal or mark_due is None:
        return
    mark_due(before.tenant, before.id, (finished_at or utcnow()) + SWEEP_AFTER)


def job_ended(job: Job, send: Sender) -> None:
    """Called by the lifecycle after a write made ``job`` terminal: enqueue its webhook, if it has one, with ``send``
    (the stores' message port, as for the jobs and chunks queues). Its index row was made due before the write
    (:func:`job_ending`).

    Never raises: a delivery that cannot be enqueued now is found by the webhook sweep (the job's row is due).
    """
    if not job.callback_url or not job.status.terminal:
        return
    try:
        # first_at starts the 24 h in which the deliveries are retried.
        send(WebhookMessage(job.tenant, job.id, delivery_id(job), first_at=time.time()))
    except Exception:
        log.warning("job %s: webhook delivery not enqueued; the sweep will", job.id, exc_info=True)
