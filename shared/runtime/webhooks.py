"""Completion webhooks: deliver a finished job's JSON to its callback URL, at least once, signed; every delivery ends.

How a delivery goes (docs/webhooks.md):

1. At submission the job gets a row in the webhook index (``shared.storage.webhook_store``), before
   its own row exists. The lifecycle's terminal write lands and puts a :class:`WebhookMessage` on
   ``CALLBACKS_QUEUE`` (ids only) through the stores' message port, as every later attempt does.
2. :meth:`WebhookSender.handle` (the queue trigger) reads the job, re-checks the URL (https, public
   addresses only) and POSTs the job's public JSON to the address it just checked (checked again as
   it dials), signed with each of the tenant's active secrets. The whole exchange has one wall-clock
   deadline (:data:`EXCHANGE_DEADLINE_SECONDS`); any exception is a failed attempt.
3. The outcome is recorded on the job (a lifecycle transition conditional on the attempt, so a
   duplicate message of an attempt already recorded does nothing). Only the record that applied
   sends the next attempt (2 s, 10 s, 1 min, 5 min, 30 min, then hourly, with jitter) for up to 24 h;
   then the webhook is ``failed`` and the message is copied to ``<CALLBACKS_QUEUE>-poison``.
   A settled webhook leaves the index.
4. :meth:`WebhookSender.sweep` (a timer) reads the index rows that are due, a few per tenant, and
   re-sends a message that was lost (``pending`` or ``retrying`` with no attempt recorded in its
   window); after :data:`MAX_SWEEPS` re-sends in a row without progress the webhook is ``failed``.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import random
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from shared.config.settings import UnresolvedSecret, get_settings
from shared.core import conditional
from shared.core.errors import NotFound, ThematiqError
from shared.core.jobs import Job, WebhookStatus, utcnow
from shared.core.lifecycle import Lifecycle
from shared.core.messages import BadMessage
from shared.core.ports import Stores
from shared.core.webhooks import (
    ENDING_GRACE,
    ENDING_RECHECK,
    IN_FLIGHT_AFTER,
    IN_FLIGHT_DUE,
    SWEEP_AFTER,
    UnresolvedHost,
    UnsafeUrl,
    WebhookMessage,
    check_url,
    delivery_id,
    event_of,
    normalise_url,
    refusal,
    sign,
)
from shared.observability import telemetry
from shared.runtime.webhook_circuit import NOT_TRIED, ReceiverCircuit
from shared.storage.sealed import Unsealable
from shared.storage.webhook_store import IndexRow, SweepCursor, WebhookStore, active_secrets, index_key

log = logging.getLogger(__name__)

#: Delays before attempt 2, 3, …; the last repeats until the deadline.
BACKOFF_SECONDS = (2, 10, 60, 300, 1800, 3600)
DEADLINE_SECONDS = 24 * 3600
#: One socket operation (connect, one read) may take this long…
TIMEOUT_SECONDS = 10.0
#: …and the whole exchange (every address tried, connect, TLS, headers, interim 1xx, body) this long.
EXCHANGE_DEADLINE_SECONDS = 15.0
MAX_ERROR_CHARS = 300
#: Addresses dialled per attempt at most (the families alternating: :func:`dial_order`).
MAX_DIALS = 3
USER_AGENT = "Thematiq-Webhooks/1.0"
#: Index rows the sweep handles per run, and per tenant per run (so no tenant's backlog uses up the run).
SWEEP_BUDGET = 100
SWEEP_PER_TENANT = 10
#: Re-sends in a row without an attempt recorded, at least, before a webhook whose 24 hours are over is failed as lost.
MAX_SWEEPS = 6
#: The sweep's re-sends of one lost message space out: the window, doubled after each re-send, at most this long
#: (never less than the window itself). Under 30 re-sends in 24 hours for a first delivery that stays lost.
RESEND_CAP = timedelta(hours=1)
#: How often the sweep looks for unsettled webhooks without an index row (rows from before the index), until
#: :data:`HEAL_CLEAN_RUNS` heals in a row found nothing: then it is recorded done and never runs again (platform46).
HEAL_EVERY = timedelta(hours=24)
HEAL_CLEAN_RUNS = 2


def backoff(attempt: int) -> float:
    """Delay before attempt ``attempt + 1`` (attempt counts from 1), with ±20 % jitter."""
    base = BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS)) - 1]
    return float(base * random.uniform(0.8, 1.2))


def window(attempts: int) -> timedelta:
    """How long after ``attempts`` were recorded the next one must have been: the longest backoff, plus the sweep's."""
    if attempts <= 0:
        return SWEEP_AFTER
    return timedelta(seconds=1.2 * BACKOFF_SECONDS[min(attempts, len(BACKOFF_SECONDS)) - 1]) + SWEEP_AFTER


def resend_window(attempts: int, sweeps: int) -> timedelta:
    """How long after the sweep saw ``attempts`` recorded (and re-sent ``sweeps`` times since) it waits before the
    next re-send: the :func:`window`, doubled per re-send, capped at :data:`RESEND_CAP` (or the window, if longer).

    A message that is only late (behind a backlog in the callbacks queue) then costs few duplicates, and one lost
    for good a bounded number of them until its 24 hours are over.
    """
    base = window(attempts)
    return max(base, min(base * (1 << min(sweeps, 16)), RESEND_CAP))


@dataclass(frozen=True)
class DeliveryOutcome:
    """What one POST of a webhook came to: ``ok`` (a 2xx answer) and the detail recorded on the job
    (``HTTP 204``, ``failed: HTTP 500``, ``failed: timed out``)."""

    ok: bool
    detail: str


Transport = Callable[[str, list[str], bytes, dict[str, str]], DeliveryOutcome]


class _Deadline:
    """One wall-clock limit for an exchange: at expiry the socket is shut down, which ends any blocked read.

    A per-read timeout cannot bound a receiver that trickles one byte per read, or streams ``100 Continue``
    for ever (http.client skips interim responses in a loop), so a timer closes the socket under it.
    """

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return max(0.001, self.at - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                self._shutdown()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                # The plain socket's shutdown, also for an SSLSocket: its own shutdown() drops the TLS object
                # under a reader blocked in another thread; this only ends the connection, which wakes that read.
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


class _DialRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _dial(address: str, port: int, deadline: _Deadline, allow_private: bool) -> socket.socket:
    # The check on the address actually dialled: what the sender connects to is what was checked.
    reason = None if allow_private else refusal(address)
    if reason is not None:
        raise _DialRefused(reason)
    sock = socket.create_connection((address, port), min(TIMEOUT_SECONDS, deadline.left()))
    deadline.watch(sock)
    return sock


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to an address checked in advance, while TLS still verifies the URL's host name."""

    def __init__(self, host: str, address: str, port: int, deadline: _Deadline, allow_private: bool) -> None:
        super().__init__(host, port, timeout=TIMEOUT_SECONDS, context=ssl.create_default_context())
        self._address, self._deadline, self._allow_private = address, deadline, allow_private

    def connect(self) -> None:
        sock = _dial(self._address, self.port, self._deadline, self._allow_private)
        # wrap_socket detaches ``sock`` (its descriptor moves to the SSLSocket), so the deadline must watch the
        # SSLSocket, and from before the handshake: a receiver trickling its handshake or its answer over TLS
        # would otherwise be bounded by the per-read timeout only, i.e. not at all.
        tls = self._context.wrap_socket(  # type: ignore[attr-defined]
            sock, server_hostname=self.host, do_handshake_on_connect=False
        )
        # Ours from here: conn.close() closes it even when the handshake fails or the deadline cuts it short
        # (set after the handshake, a failed one left the SSLSocket open: a ResourceWarning per such attempt).
        self.sock = tls
        self._deadline.watch(tls)
        tls.do_handshake()


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, deadline: _Deadline, allow_private: bool) -> None:
        super().__init__(host, port, timeout=TIMEOUT_SECONDS)
        self._address, self._deadline, self._allow_private = address, deadline, allow_private

    def connect(self) -> None:
        self.sock = _dial(self._address, self.port, self._deadline, self._allow_private)


def _failure(err: BaseException, deadline: _Deadline) -> str:
    """A failed attempt in words that never echo the receiver (no ports, banners or error text)."""
    if deadline.expired or isinstance(err, TimeoutError):
        return f"failed: no complete answer within {EXCHANGE_DEADLINE_SECONDS:g} s"
    if isinstance(err, ssl.SSLError | ssl.CertificateError):
        return "failed: TLS handshake or certificate"
    if isinstance(err, ConnectionRefusedError):
        return "failed: connection refused"
    if isinstance(err, http.client.HTTPException):
        return "failed: the answer was not valid HTTP"
    if isinstance(err, OSError):
        return "failed: could not connect or the connection broke"
    return "failed: could not send"


def dial_order(addresses: list[str], limit: int = MAX_DIALS) -> list[str]:
    """At most ``limit`` of ``addresses`` to dial, the address families alternating (RFC 8305 4), the resolver's
    order kept within each family: a receiver with three or more IPv6 addresses is still tried over IPv4 from an
    instance that cannot reach IPv6, and the other way round (review44p)."""
    first = [a for a in addresses if (":" in a) == (":" in addresses[0])] if addresses else []
    other = [a for a in addresses if a not in first]
    interleaved = [a for pair in itertools.zip_longest(first, other) for a in pair if a is not None]
    return interleaved[:limit]


def post(url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
    """POST ``body`` to ``url`` at one of ``addresses``; never follows a redirect (a 3xx is a failure).

    Never raises, and never takes longer than :data:`EXCHANGE_DEADLINE_SECONDS` in all.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    allow_private = get_settings().webhook_allow_private
    deadline = _Deadline(EXCHANGE_DEADLINE_SECONDS)
    last = "failed: no address"
    try:
        for address in dial_order(addresses):
            if deadline.expired:
                break
            cls = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
            conn = cls(host, address, port, deadline, allow_private)
            try:
                conn.request("POST", path, body=body, headers={"Host": parts.netloc, **headers})
                response = conn.getresponse()
                response.read(64 * 1024)  # a receiver's body is never used; read a little so the connection closes cleanly
                if deadline.expired:
                    return DeliveryOutcome(False, _failure(TimeoutError(), deadline))
                ok = 200 <= response.status < 300
                return DeliveryOutcome(ok, f"HTTP {response.status}" if ok else f"failed: HTTP {response.status}")
            except _DialRefused as err:
                last = f"refused: the address dialled is not public ({err.reason})"
            except Exception as err:  # noqa: BLE001 - any failure of the exchange is a failed attempt, never a crash
                last = _failure(err, deadline)
            finally:
                conn.close()
    finally:
        deadline.cancel()
    return DeliveryOutcome(False, last)


@dataclass
class SweepReport:
    resent: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    removed: int = 0
    looked: int = 0
    healed: int = 0
    errors: int = 0


class WebhookSender:
    def __init__(
        self,
        stores: Stores,
        public: Callable[[Job], dict[str, Any]] | None = None,
        transport: Transport = post,
        send: Callable[[WebhookMessage, float], None] | None = None,
        clock: Callable[[], float] = time.time,
        circuit: ReceiverCircuit | None = None,
    ) -> None:
        self.stores = stores
        self.index = WebhookStore.of(self.stores)
        #: The job's JSON as the API shows it (the blueprint passes ``shared.api.views.public``).
        self.public = public or (lambda job: {"id": job.id, "status": job.status.value})
        self.transport = transport
        #: How a delivery is queued (``delay`` seconds invisible): the stores' message port by default.
        self.send = send or self._enqueue
        self.clock = clock
        #: This instance's view of the tenants' receivers (``shared.runtime.webhook_circuit``), on the platform clock.
        self.circuit = circuit or ReceiverCircuit()

    def _enqueue(self, message: WebhookMessage, delay: float) -> None:
        self.stores.messages.send(message, timedelta(seconds=delay) if delay > 0 else None)

    # -- one delivery ---------------------------------------------------------------------------------
    def handle(self, text: str) -> str:
        """Deliver one message; returns what happened.

        Raises only when the outcome could not be recorded or the next attempt not queued: the host then
        delivers the message again, and if it never gets through, the sweep finds the webhook.
        """
        try:
            msg = WebhookMessage.decode(text)
        except BadMessage:
            log.warning("webhook message that is not ours: dropped")
            return "bad-message"
        try:
            job = self.stores.jobs.get(msg.tenant, msg.job_id, with_input=True)
        except NotFound:
            return "job-gone"
        if not job.callback_url or not job.status.terminal:
            return "no-callback"
        status = WebhookStatus.of(job)
        if status.settled:
            return f"already-{status.value}"  # a duplicate message: at least once is already done
        if delivery_id(job) != msg.delivery:
            return "stale-delivery"
        if job.callback_attempts >= msg.attempt:
            return "stale-attempt"  # this attempt is recorded already (a re-sent or duplicated message)
        started = msg.first_at or self.clock()
        # The tenant's circuit (webhooks45): an attempt to a receiver that failed or was slow recently is let through
        # only now and then; the rest are recorded as not tried, below, without holding the sender.
        host = (urllib.parse.urlsplit(job.callback_url).hostname or "").lower()
        ticket = self.circuit.admit(job.tenant, host)
        if ticket is None:
            return self._failed(job, msg, started, DeliveryOutcome(False, NOT_TRIED))
        verdict: list[bool] = []
        try:
            return self._attempt(job, msg, started, verdict)
        finally:
            # Also when recording raised: the tenant's probe place is given back, and what the receiver did counts.
            self.circuit.done(ticket, verdict[0] if verdict else None)

    def _attempt(self, job: Job, msg: WebhookMessage, started: float, verdict: list[bool]) -> str:
        """One real attempt; appends to ``verdict`` what it says about the receiver (nothing: a refusal, or the
        signing secrets unavailable)."""
        assert job.callback_url is not None  # handle() returned before for a job without one
        unsigned: str | None = None
        try:
            try:
                keys = [s.value for s in active_secrets(self.index, job.tenant).secrets]
            except (UnresolvedSecret, Unsealable) as err:
                # The deployment's to fix, not the URL's fault: a failed attempt, retried with the backoff for the
                # 24 h (raising left it unrecorded, and the sweep failed it as lost within the hour). Nothing is
                # signed with the reference's text; the job says why in words of its own (the tenant reads it).
                # Unsealable: the row is sealed with a key that is not configured (WEBHOOK_SECRETS_KEY rotated
                # without WEBHOOK_SECRETS_KEY_PREVIOUS), which setting the old key mends.
                log.error("job %s: webhook not signed: %s", job.id, err)
                keys, unsigned = [], "failed: the signing secrets are unavailable (a deployment setting); retried"
            if not keys and unsigned is None:
                raise UnsafeUrl("the tenant has no webhook signing secret")
            # Rows stored before URLs were normalised at submission are normalised (or refused) here.
            url = normalise_url(job.callback_url)
            unresolved: str | None = None
            try:
                addresses = check_url(url, allow_private=get_settings().webhook_allow_private)
            except UnresolvedHost as err:
                # DNS trouble now (a timeout, SERVFAIL, EAI_AGAIN) is a failed attempt that is retried, not a
                # verdict on the URL: settling it would fail a healthy receiver's webhook on one bad lookup.
                addresses, unresolved = [], f"failed: {err}"
        except UnsafeUrl as err:
            # Re-checked at send time: a host that now resolves to a private address is never called.
            return "refused" if self._settle(job, WebhookStatus.FAILED, msg, f"refused: {err}") else "stale-attempt"
        t0 = time.monotonic()
        try:
            failed = unsigned or unresolved
            outcome = DeliveryOutcome(False, failed) if failed else self._post(job, msg, url, addresses, keys)
        except Exception as err:  # noqa: BLE001 - a transport that raises is one failed attempt, never a stuck one
            outcome = DeliveryOutcome(False, f"failed: could not send ({type(err).__name__})")
        if unsigned is None and not outcome.detail.startswith("refused:"):
            verdict.append(outcome.ok)
        telemetry.event(
            "callback.delivery", job_id=job.id, tenant=job.tenant, attempt=msg.attempt, ok=outcome.ok,
            detail=outcome.detail, ms=round((time.monotonic() - t0) * 1000),
        )
        if outcome.ok:
            return "delivered" if self._settle(job, WebhookStatus.DELIVERED, msg, None) else "stale-attempt"
        if outcome.detail.startswith("refused:"):
            return "refused" if self._settle(job, WebhookStatus.FAILED, msg, outcome.detail) else "stale-attempt"
        return self._failed(job, msg, started, outcome)

    def _failed(self, job: Job, msg: WebhookMessage, started: float, outcome: DeliveryOutcome) -> str:
        """A failed attempt (or one not tried): a dead letter once its 24 h are over, else recorded and retried."""
        if self.clock() - started >= DEADLINE_SECONDS:
            gave_up = self._settle(job, WebhookStatus.FAILED, msg, f"gave up after 24 h: {outcome.detail}")
            return "dead-letter" if gave_up else "stale-attempt"
        # Record first; only the record that applied queues the next attempt, so a duplicated message
        # never doubles the chain. If the send then fails, the message is delivered again (its record is
        # there: "stale-attempt") and the sweep re-sends the lost attempt.
        if not self._record(job, WebhookStatus.RETRYING, msg.attempt, outcome.detail):
            return "stale-attempt"
        nxt = WebhookMessage(msg.tenant, msg.job_id, msg.delivery, msg.attempt + 1, started)
        self.send(nxt, min(backoff(msg.attempt), max(1.0, started + DEADLINE_SECONDS - self.clock())))
        return "retrying"

    def _post(self, job: Job, msg: WebhookMessage, url: str, addresses: list[str], keys: list[str]) -> DeliveryOutcome:
        """The job's public JSON, signed with each of ``keys``, POSTed by the transport."""
        body = json.dumps(self.public(job), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        timestamp = int(self.clock())
        event = event_of(job)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Thematiq-Event": event,
            "Thematiq-Delivery": msg.delivery,
            "Thematiq-Signature": sign(keys, timestamp, event, msg.delivery, body),
        }
        return self.transport(url, addresses, body, headers)

    def _record(self, job: Job, status: WebhookStatus, attempts: int, error: str | None) -> bool:
        """Write how the webhook stands on the job row (a lifecycle transition, decided by re-reading).

        Raises what the write raised: the message is then delivered again rather than forgotten.
        """
        return Lifecycle(self.stores).record_callback(job, status, attempts, error[:MAX_ERROR_CHARS] if error else None)

    def _settle(self, job: Job, status: WebhookStatus, msg: WebhookMessage, error: str | None) -> bool:
        """Record the webhook settled by attempt ``msg.attempt``; only then copy a dead letter and leave the index.

        False when the record did not apply: a later attempt was recorded since this one read the job (a twin
        message of this attempt failed and queued the next), so the webhook goes on retrying and keeps its
        index row, the sweep's way to find that chain's lost message (review45w: it was removed all the same,
        and the message copied to the poison queue, leaving a live webhook to the daily heal); or it settled
        already (a duplicate), and the settle that applied did the rest.
        """
        if not self._record(job, status, msg.attempt, error):
            return False
        if status == WebhookStatus.FAILED:
            self._poison(msg)
        self._leave_index(job)
        return True

    def _leave_index(self, job: Job) -> None:
        """Remove the job from the webhook index: its delivery is settled, the sweep has nothing to look for."""
        try:
            self.index.remove_index_row(job.tenant, job.id)
        except ThematiqError:
            log.info("job %s: webhook-index row not removed; the sweep removes it", job.id)

    def _poison(self, msg: WebhookMessage) -> None:
        try:
            self.stores.messages.send_poison(msg.encode(), get_settings().callbacks_queue)
        except ThematiqError:
            log.warning("job %s: dead letter not copied to the poison queue", msg.job_id)

    # -- the sweep ------------------------------------------------------------------------------------
    def sweep(self, budget: int = SWEEP_BUDGET, per_tenant: int = SWEEP_PER_TENANT) -> SweepReport:
        """Look at the due rows of the webhook index: re-send what was lost, fail what stays lost, drop the settled.

        Starts where the last run whose budget ran out stopped and wraps around, at most ``per_tenant``
        rows of each tenant: a tenant's stuck backlog costs it its share, never another tenant its turn.
        """
        report = SweepReport()
        now = utcnow()
        saved = self.index.cursor()
        if saved.heal_done_at is None and (saved.healed_at is None or now - saved.healed_at >= HEAL_EVERY):
            self._heal(now, saved, report)
        start, last = saved.after, saved.after
        stopped: dict[str, str] = {}
        after_budget: str | None = None
        for after in ([start, ""] if start else [""]):
            for row in self.index.due(now, after, per_tenant, resume=saved.tenants, stopped=stopped):
                if start and after == "" and row.key > start:
                    break  # wrapped round to where this run began
                if report.looked >= budget:
                    after_budget = last
                    break
                report.looked += 1
                last = row.key
                try:
                    self._look(row, now, report)
                except ThematiqError as err:
                    report.errors += 1
                    log.warning("webhook sweep: could not look at %s (%s)", row.key, type(err).__name__)
                except (KeyError, TypeError, ValueError) as err:
                    # One unreadable job row (an unknown webhook status, say) must not stop the sweep for every
                    # row after it, run after run; as the reaper skips such a row.
                    report.errors += 1
                    log.error("webhook sweep: skipping unreadable row %s (%s)", row.key, type(err).__name__)
            if after_budget is not None:
                break
        # Tenants whose share ran out continue from there next time; a point not stored leaves that tenant's
        # turn at its first rows again: later, never lost. Written only when something changed.
        tenants = {**{t: k for t, k in saved.tenants.items() if after_budget is not None and k > after_budget},
                   **stopped}
        if after_budget is not None or tenants != saved.tenants:
            try:
                self.index.set_cursor(after=after_budget, tenants=tenants)
            except ThematiqError:
                report.errors += 1  # the next run starts from the old position: later, never lost
        return report

    def _heal(self, now: datetime, saved: SweepCursor, report: SweepReport) -> None:
        """Index every finished job whose webhook is unsettled but has no index row (or a row still never due), once a
        day, until :data:`HEAL_CLEAN_RUNS` heals in a row found none: then it is recorded (``heal_done_at``) and the
        sweep never scans the table again.

        What it finds: jobs submitted before the index existed, and rows a host of the code before left: it made the
        row due *after* the terminal write, so a crash (or a failed write) in between left a finished job's row never
        due. The code since platform46 makes the row due before the terminal write (``webhooks.job_ending``) and the
        sweep's "in flight" write is conditional on the row it read, so it leaves neither; a row the sweep removed
        while its job row was not written yet is written again by that job's terminal write. The scan is one
        cross-partition query, which Azure pages per 1,000 rows scanned: it grows with the table, so it only runs
        until the rows of the code before are gone (2 days after the deploy, when nothing else needs it).
        """
        try:
            indexed = self.index.keys()
            rows = self.stores.jobs.scan("callback_status eq 'pending' or callback_status eq 'retrying'", {})
            found = 0
            for job in rows:
                if not (job.callback_url and job.status.terminal):
                    continue
                key = index_key(job.tenant, job.id)
                due_at = indexed.get(key)
                # No row, or a row still waiting for the terminal write (its "make due" write failed, or a host
                # from before webhooks45 finished the job after this sweep set the row in flight).
                if key not in indexed or (due_at is not None and due_at > now + IN_FLIGHT_AFTER):
                    self.index.put_index_row(IndexRow(job.tenant, job.id, due_at=now))
                    found += 1
            report.healed += found
            clean = saved.heals_clean + 1 if found == 0 else 0
            self.index.set_cursor(healed_at=now, heals_clean=clean,
                                  heal_done_at=now if clean >= HEAL_CLEAN_RUNS else None)
        except ThematiqError as err:
            report.errors += 1
            log.warning("webhook sweep: could not heal the index (%s); the next run tries again", type(err).__name__)

    def _park(self, row: IndexRow, now: datetime) -> None:
        """The job is in flight: its row is not due again until its terminal write makes it due.

        Conditional on the row as this run read it (through ``conditional.apply``): a terminal write announced since
        (``job_ending`` made the row due, which changed its ETag) wins, and the row stays due. A row whose job
        announced its end less than :data:`ENDING_GRACE` ago but is still in flight (a writer stalled past the row's
        5 minutes, or a terminal write that did not land) is looked at again in :data:`ENDING_RECHECK`, not never.
        A write whose answer was lost is decided by re-reading the row (its ``op``).
        """

        def plan(current: IndexRow | None) -> dict[str, Any] | None:
            if current is None or current.due_at > now:
                return None  # gone (settled), or made due later since this run read it: its job is ending
            ending = current.ending_at is not None and now - current.ending_at < ENDING_GRACE
            return {"due_at": now + ENDING_RECHECK if ending else IN_FLIGHT_DUE}

        read: IndexRow | None = row
        conditional.apply(
            read, read=lambda: self.index.index_row(row.tenant, row.job_id), write=self.index.write_index_row,
            plan=plan, name=f"webhook-index row {row.key}: in flight",
        )

    def _look(self, row: IndexRow, now: datetime, report: SweepReport) -> None:
        try:
            job = self.stores.jobs.get(row.tenant, row.job_id)
        except NotFound:
            job = None
        if job is None or not job.callback_url or WebhookStatus.of(job).settled:
            self.index.remove_index_row(row.tenant, row.job_id)  # gone (retention, or an insert that failed), or settled
            report.removed += 1
            return
        if not job.status.terminal:
            # In flight (queued, parked, running): not due again until its terminal write makes it due, so a tenant's
            # jobs in flight never take its share of the sweep (webhooks45: every 5 minutes each took one of its 10
            # looks a run, and a tenant with 10,000 of them had a finished job's lost message wait 3.5 days).
            # Write, then read (as ``shared.core.fairness`` does): a terminal write that landed after our read of
            # the job, and made the row due before our write, is seen by this second read.
            self._park(row, now)
            try:
                again = self.stores.jobs.get(row.tenant, row.job_id)
            except NotFound:
                again = None
            if again is None or again.status.terminal:
                self.index.put_index_row(replace(row, due_at=now))  # ended meanwhile: the next run looks at it
            return
        attempts = job.callback_attempts
        fresh = row.seen != attempts
        sweeps = 0 if fresh else row.sweeps
        if not fresh and row.seen_at is not None:
            since: datetime | None = row.seen_at
        else:
            since = job.finished_at if attempts == 0 else None  # a first look: the first attempt was due at the end
        wait = resend_window(attempts, sweeps)
        if since is None or now - since < wait:
            seen_at = since or now
            self.index.put_index_row(replace(row, seen=attempts, seen_at=seen_at, due_at=seen_at + wait, sweeps=sweeps))
            return
        # No attempt recorded in its window: the message is lost (poisoned, or never sent), or only late (behind a
        # backlog in the queue). Only once its 24 hours are over is it failed (review45w: it used to be after 6
        # re-sends whatever its age, about half an hour after its job ended for a first delivery, so a message that
        # was merely late found its webhook failed, never tried).
        expired = job.finished_at is None or now - job.finished_at >= timedelta(seconds=DEADLINE_SECONDS)
        if sweeps >= MAX_SWEEPS and expired:
            why = (f"failed: lost {sweeps} times in a row (re-sent by the sweep, never recorded) "
                   f"after {attempts} attempts")
            if Lifecycle(self.stores).record_callback(job, WebhookStatus.FAILED, attempts, why):
                self.index.remove_index_row(row.tenant, row.job_id)
                report.failed.append(job.id)
            # Not applied: an attempt landed since the read (the webhook goes on, its count starts again at the
            # next look) or it settled (the next look removes its row). Either way the row stays until then.
            return
        first_at = job.finished_at.timestamp() if job.finished_at else self.clock()
        self.send(WebhookMessage(job.tenant, job.id, delivery_id(job), attempts + 1, first_at), 0.0)
        self.index.put_index_row(replace(row, seen=attempts, seen_at=now, due_at=now + resend_window(attempts, sweeps + 1),
                                         sweeps=sweeps + 1))
        report.resent.append(job.id)
        log.warning("webhook sweep: job %s had no live webhook message; re-sent attempt %d", job.id, attempts + 1)


__all__ = ["DeliveryOutcome", "SweepReport", "WebhookSender", "backoff", "post", "resend_window", "window"]
