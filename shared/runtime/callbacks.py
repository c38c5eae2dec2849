"""Completion webhooks: deliver a finished job's JSON to its callback URL, at least once, signed.

How a delivery goes (docs/webhooks.md):

1. The lifecycle's terminal write lands; :func:`enqueue` (registered as the core's sender at import)
   puts a :class:`CallbackMessage` on ``CALLBACKS_QUEUE``. The message carries ids only.
2. :meth:`CallbackSender.handle` (the queue trigger) reads the job, re-checks the URL (https, public
   addresses only: a DNS answer may have changed since submission) and POSTs the job's public JSON to
   the address it just checked, with ``Thematiq-Event``, ``Thematiq-Delivery`` and ``Thematiq-Signature``.
3. A 2xx marks the callback ``delivered``. Anything else (a non-2xx, a timeout, a refused connection)
   marks it ``retrying`` and sends the next attempt as a *delayed message* (2 s, 10 s, 1 min, 5 min,
   30 min, then hourly, with jitter); the current message completes. After 24 h of failures the
   callback is ``failed``: the dead letter stays visible on the job, and the message is copied to
   ``<CALLBACKS_QUEUE>-poison``.
4. :meth:`CallbackSender.sweep` (a timer) finds finished jobs whose callback is still ``pending`` long
   after they ended (the enqueue was lost) and enqueues them again.

A delivery id is the same for every attempt of one job event, so a receiver that dedupes by it sees
each event once even though delivery is at least once.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import random
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from shared.config.constants import POISON_SUFFIX
from shared.config.settings import get_settings, raw
from shared.core import callbacks as core
from shared.core.callbacks import CallbackMessage, UnsafeUrl, check_url, delivery_id, event_of, sign
from shared.core.errors import NotFound, ThematiqError
from shared.core.jobs import Job, utcnow
from shared.core.lifecycle import Lifecycle
from shared.core.messages import BadMessage
from shared.core.ports import Stores
from shared.observability import telemetry
from shared.storage import azure_stores
from shared.storage.connections import get_queue_client
from shared.storage.errors import storage_call

log = logging.getLogger(__name__)

#: Delays before attempt 2, 3, …; the last repeats until the deadline.
BACKOFF_SECONDS = (2, 10, 60, 300, 1800, 3600)
DEADLINE_SECONDS = 24 * 3600
TIMEOUT_SECONDS = 10.0
#: A finished job whose callback is still pending this long after it ended lost its message.
SWEEP_AFTER = timedelta(minutes=5)
MAX_ERROR_CHARS = 300
USER_AGENT = "Thematiq-Webhooks/1.0"


def enqueue(message: CallbackMessage, delay: float = 0.0) -> None:
    """Put a delivery on the callbacks queue (optionally invisible for ``delay`` seconds)."""
    first = message if message.first_at else CallbackMessage(
        message.tenant, message.job_id, message.delivery, message.attempt, time.time()
    )
    with storage_call("enqueue callback"):
        get_queue_client(get_settings().callbacks_queue).send_message(
            first.encode(), visibility_timeout=math.ceil(delay) or None
        )


core.set_sender(enqueue)


def backoff(attempt: int) -> float:
    """Delay before attempt ``attempt + 1`` (attempt counts from 1), with ±20 % jitter."""
    base = BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1]
    return float(base * random.uniform(0.8, 1.2))


@dataclass(frozen=True)
class Outcome:
    ok: bool
    detail: str


Transport = Callable[[str, list[str], bytes, dict[str, str]], Outcome]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to an address checked in advance, while TLS still verifies the URL's host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


def post(url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> Outcome:
    """POST ``body`` to ``url`` at one of ``addresses``; never follows a redirect (a 3xx is a failure)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    last = "no address"
    for address in addresses[:3]:
        cls = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
        conn = cls(host, address, port, TIMEOUT_SECONDS)
        try:
            conn.request("POST", path, body=body, headers={"Host": parts.netloc.rsplit("@", 1)[-1], **headers})
            response = conn.getresponse()
            response.read(64 * 1024)  # a receiver's body is never used; read a little so the connection closes cleanly
            if 200 <= response.status < 300:
                return Outcome(True, f"HTTP {response.status}")
            return Outcome(False, f"HTTP {response.status}")
        except (OSError, http.client.HTTPException) as err:
            last = f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]
        finally:
            conn.close()
    return Outcome(False, last)


class CallbackSender:
    def __init__(
        self,
        stores: Stores | None = None,
        public: Callable[[Job], dict[str, Any]] | None = None,
        transport: Transport = post,
        send: Callable[[CallbackMessage, float], None] = enqueue,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stores = stores or azure_stores()
        #: The job's JSON as the API shows it (the blueprint passes ``shared.api.views.public``).
        self.public = public or (lambda job: {"id": job.id, "status": job.status.value})
        self.transport = transport
        self.send = send
        self.clock = clock

    # -- one delivery ---------------------------------------------------------------------------------
    def handle(self, text: str) -> str:
        """Deliver one message; returns what happened. Raises only if the next attempt could not be queued."""
        try:
            msg = CallbackMessage.decode(text)
        except BadMessage:
            log.warning("callback message that is not ours: dropped")
            return "bad-message"
        try:
            job = self.stores.jobs.get(msg.tenant, msg.job_id, with_input=True)
        except NotFound:
            return "job-gone"
        if not job.callback_url or not job.status.terminal:
            return "no-callback"
        if job.callback_status in ("delivered", "failed"):
            return f"already-{job.callback_status}"  # a duplicate message: at least once is already done
        if delivery_id(job) != msg.delivery:
            return "stale-delivery"
        secret = raw("WEBHOOK_SECRET")
        started = msg.first_at or self.clock()
        try:
            if not secret:
                raise UnsafeUrl("WEBHOOK_SECRET is not set on this deployment")
            addresses = check_url(job.callback_url, allow_private=get_settings().webhook_allow_private)
        except UnsafeUrl as err:
            # Re-checked at send time: a host that now resolves to a private address is never called.
            self._record(job, "failed", msg.attempt, f"refused: {err}")
            self._poison(msg)
            return "refused"
        body = json.dumps(self.public(job), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Thematiq-Event": event_of(job),
            "Thematiq-Delivery": msg.delivery,
            "Thematiq-Signature": sign(secret, timestamp, body),
        }
        t0 = time.monotonic()
        outcome = self.transport(job.callback_url, addresses, body, headers)
        telemetry.event(
            "callback.delivery", job_id=job.id, tenant=job.tenant, attempt=msg.attempt, ok=outcome.ok,
            detail=outcome.detail, ms=round((time.monotonic() - t0) * 1000),
        )
        if outcome.ok:
            self._record(job, "delivered", msg.attempt, None)
            return "delivered"
        if self.clock() - started >= DEADLINE_SECONDS:
            self._record(job, "failed", msg.attempt, f"gave up after 24 h: {outcome.detail}")
            self._poison(msg)
            return "dead-letter"
        nxt = CallbackMessage(msg.tenant, msg.job_id, msg.delivery, msg.attempt + 1, started)
        # The next attempt is queued before this message completes: if that fails, this one is redelivered.
        self.send(nxt, min(backoff(msg.attempt), max(1.0, started + DEADLINE_SECONDS - self.clock())))
        self._record(job, "retrying", msg.attempt, outcome.detail)
        return "retrying"

    def _record(self, job: Job, status: str, attempts: int, error: str | None) -> None:
        """Write how the callback stands on the job row (a lifecycle transition, decided by re-reading)."""
        try:
            Lifecycle(self.stores).record_callback(job, status, attempts, error[:MAX_ERROR_CHARS] if error else None)
        except ThematiqError:
            # The delivery itself happened (or is queued again); only its record is late.
            log.warning("job %s: could not record callback %s", job.id, status)

    def _poison(self, msg: CallbackMessage) -> None:
        try:
            with storage_call("enqueue callback poison"):
                get_queue_client(get_settings().callbacks_queue + POISON_SUFFIX).send_message(msg.encode())
        except ThematiqError:
            log.warning("job %s: dead letter not copied to the poison queue", msg.job_id)

    # -- the sweep ------------------------------------------------------------------------------------
    def sweep(self, limit: int = 100) -> int:
        """Enqueue again the callbacks of finished jobs still ``pending`` long after they ended."""
        before = utcnow() - SWEEP_AFTER
        sent = 0
        rows = self.stores.jobs.scan(
            "callback_status eq @pending and finished_at lt @before", {"pending": "pending", "before": before},
            with_input=True,
        )
        for job in rows:
            if sent >= limit:
                break
            if job.callback_url and job.status.terminal:
                self.send(CallbackMessage(job.tenant, job.id, delivery_id(job)), 0.0)
                sent += 1
        return sent
