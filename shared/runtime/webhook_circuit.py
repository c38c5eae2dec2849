"""A per-tenant circuit for webhook receivers: one tenant's slow or dead receivers hold at most one of the sender's
places at a time, and only now and then (docs/webhooks.md "Delivery").

Why: the callbacks queue is one FIFO and an instance runs ``batchSize + newBatchThreshold`` (5) deliveries at once.
A receiver that never answers holds one of them 15 s per attempt (``EXCHANGE_DEADLINE_SECONDS``), about 30
attempts per job in its 24 h: a tenant with a thousand such jobs put about 125 sender-hours a day ahead of
everyone else's messages, and another tenant's first delivery waited behind them (webhooks45).

How: each instance remembers, per tenant and receiver host, how its last real attempts went (in memory: no storage
operation, nothing to migrate; a new instance learns again within one attempt per host). A host is

* **good** after an attempt answered 2xx within :data:`SLOW_SECONDS`: its attempts go as always;
* **failing** after :data:`HOST_FAILURES` (3) attempts in a row that failed (any failure, DNS included) or took
  :data:`SLOW_SECONDS` or longer: from then on an attempt to it is a *probe*, at most one per :func:`cooldown`
  (30 s, doubling per further failure in a row, at most 15 min);
* **unknown** (or failed fewer times in a row) otherwise: its attempts go as always, unless the tenant has
  :data:`TROUBLED_HOSTS` failing hosts (a tenant spreading its webhooks over many dead hosts), when they are probes
  too.

A tenant has at most one probe in flight per instance and starts at most one per :data:`PROBE_GAP`. An attempt
the circuit does not let through is not tried: the sender records it as a failed attempt
(``failed: not tried …``) through the same conditional record as any failure and queues the next with the same
backoff, so the 24 h, the dead letter and "a duplicate never doubles the retries" are unchanged, and it costs
fewer operations than a real attempt (no secrets read, no DNS lookup, no POST). When the host answers again, the
first probe that gets a 2xx makes it good and the webhooks' next attempts go out as scheduled.

The bound (per instance, C = 5 deliveries at once): once one of its hosts failed, a tenant holds at most one place
with a probe; the other C - 1 never wait for its receivers. Its other messages take the fast path (a job read, a
conditional write, a send: tens of milliseconds). So another tenant's first delivery waits, because of that
tenant, at most the fast path of the tenant's messages ahead of it (over C - 1 places), plus once per host that
goes bad its first failures (``HOST_FAILURES`` plus the attempts in flight with the last: up to C at once, 15 s).

What it remembers is bounded (platform46): hosts not failing, at most :data:`MAX_HOSTS` (least recently used
forgotten first: a forgotten one is unknown again, which for a host that failed once or twice means it starts its 3
again); failing hosts (the open circuits) in a map of their own, at most :data:`MAX_OPEN_HOSTS`, so a tenant with
many healthy receivers never pushes another tenant's open circuits out; and a tenant only while it has something
to remember (a failing host, a probe in flight, or one started less than :data:`PROBE_GAP` ago). A tenant with
nothing of these behaves exactly as one never seen, so it is dropped as it becomes so, and any left behind are swept
whenever the map has doubled since the last sweep. Until platform46 every tenant that ever had an attempt kept an
entry for the life of the instance.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from shared.core.jobs import utcnow

#: Failures in a row (or slow answers) after which a host is failing: a receiver's brief trouble (a 500 or two, then
#: a 2xx) is retried with the usual backoff, untouched.
HOST_FAILURES = 3
#: A 2xx that took this long or longer counts against its host like a failure (a slow receiver holds the sender).
SLOW_SECONDS = 5.0
#: A failing host's probes: one per ``COOLDOWN_BASE * 2**(failures in a row - HOST_FAILURES)`` seconds, at most
#: ``COOLDOWN_CAP`` (:func:`cooldown`).
COOLDOWN_BASE = 30.0
COOLDOWN_CAP = 900.0
#: A tenant starts at most one probe per this many seconds (and has at most one in flight) per instance.
PROBE_GAP = 30.0
#: With this many failing hosts, a tenant's attempts to hosts not yet known good are probes too.
TROUBLED_HOSTS = 3
#: Hosts not failing remembered per instance (least recently used forgotten first; a forgotten host is unknown again).
MAX_HOSTS = 10_000
#: Failing hosts remembered per instance, apart from the others (least recently used forgotten first).
MAX_OPEN_HOSTS = 10_000
#: The tenants map is swept of idle entries when it reaches twice its size after the last sweep, and at least this.
TENANTS_SWEEP_MIN = 64

NOT_TRIED = "failed: not tried: this receiver failed or was slow recently, its attempts are spaced out"


def cooldown(failures: int) -> float:
    """The gap between a failing host's probes after ``failures`` in a row."""
    return float(min(COOLDOWN_CAP, COOLDOWN_BASE * 2 ** max(0, min(failures, 16) - HOST_FAILURES)))


@dataclass
class _Host:
    failures: int = 0  # in a row; 0: good
    next_probe: float = 0.0


@dataclass
class _Tenant:
    failing: int = 0
    in_flight: int = 0
    last_probe: float = float("-inf")

    def idle(self, now: float) -> bool:
        """Nothing to remember: the circuit treats it as a tenant never seen (``_Tenant()``)."""
        return self.failing == 0 and self.in_flight == 0 and now >= self.last_probe + PROBE_GAP


@dataclass(frozen=True)
class Ticket:
    """An attempt the circuit let through; hand it back with :meth:`ReceiverCircuit.done`."""

    tenant: str
    host: str
    probe: bool
    started: float


class ReceiverCircuit:
    """Thread-safe (the host runs several deliveries of one instance on threads); ``clock`` in Unix seconds, the
    platform clock by default (``shared.core.jobs.utcnow``, which tests move)."""

    def __init__(self, clock: Callable[[], float] = lambda: utcnow().timestamp()) -> None:
        self.clock = clock
        self._closed: OrderedDict[tuple[str, str], _Host] = OrderedDict()  # failures < HOST_FAILURES; 0: good
        self._open: OrderedDict[tuple[str, str], _Host] = OrderedDict()  # failing
        self._tenants: dict[str, _Tenant] = {}
        self._swept_at = 0  # len(_tenants) after the last sweep
        self._lock = threading.Lock()

    def _host(self, key: tuple[str, str]) -> _Host | None:
        return self._open.get(key) or self._closed.get(key)

    def admit(self, tenant: str, host: str) -> Ticket | None:
        """A ticket if an attempt to ``host`` may go now, None if it is to be recorded as not tried."""
        now = self.clock()
        with self._lock:
            h = self._host((tenant, host))
            t = self._tenants.get(tenant) or _Tenant()
            if h is not None and h.failures == 0:
                return Ticket(tenant, host, False, now)  # good
            failing = h is not None and h.failures >= HOST_FAILURES
            if not failing and t.failing < TROUBLED_HOSTS:
                return Ticket(tenant, host, False, now)  # unknown (or not failing yet), the tenant not troubled
            if h is not None and failing and now < h.next_probe:
                return None
            if t.in_flight >= 1 or now < t.last_probe + PROBE_GAP:
                return None
            t.in_flight += 1
            t.last_probe = now
            self._keep(tenant, t, now)
            if h is not None and failing:
                h.next_probe = now + cooldown(h.failures)  # one probe per cooldown, whatever it comes to
            return Ticket(tenant, host, True, now)

    def done(self, ticket: Ticket, ok: bool | None) -> None:
        """How the attempt went: ``ok`` a 2xx, False a failure, None nothing to say about the receiver (a refusal,
        the signing secrets unavailable). A 2xx slower than :data:`SLOW_SECONDS` counts as a failure."""
        now = self.clock()
        key = (ticket.tenant, ticket.host)
        with self._lock:
            t = self._tenants.get(ticket.tenant) or _Tenant()
            if ticket.probe:
                t.in_flight = max(0, t.in_flight - 1)
            if ok is not None:
                self._record(key, t, ok and now - ticket.started < SLOW_SECONDS, now)
            self._keep(ticket.tenant, t, now)

    def _record(self, key: tuple[str, str], t: _Tenant, good: bool, now: float) -> None:
        h = self._host(key)
        if good:
            if self._open.pop(key, None) is not None:
                t.failing -= 1
            self._closed[key] = _Host()
        else:
            if h is None:
                h = self._closed[key] = _Host()
            h.failures += 1
            if h.failures == HOST_FAILURES:  # it opens: into the map of failing hosts
                del self._closed[key]
                self._open[key] = h
                t.failing += 1
            if h.failures >= HOST_FAILURES:
                h.next_probe = max(h.next_probe, now + cooldown(h.failures))
        place = self._open if key in self._open else self._closed
        place.move_to_end(key)
        while len(self._closed) > MAX_HOSTS:
            self._closed.popitem(last=False)
        while len(self._open) > MAX_OPEN_HOSTS:
            (tenant, _), _old = self._open.popitem(last=False)
            other = t if tenant == key[0] else self._tenants.get(tenant)
            if other is not None:
                other.failing -= 1
                if other is not t:
                    self._keep(tenant, other, now)

    def _keep(self, tenant: str, t: _Tenant, now: float) -> None:
        """Remember ``t`` while it has something to remember; sweep the idle entries once the map has doubled."""
        if t.idle(now):
            self._tenants.pop(tenant, None)
            return
        self._tenants[tenant] = t
        if len(self._tenants) >= max(TENANTS_SWEEP_MIN, 2 * self._swept_at):
            for name in [n for n, v in self._tenants.items() if v.idle(now)]:
                del self._tenants[name]
            self._swept_at = len(self._tenants)


__all__ = ["NOT_TRIED", "ReceiverCircuit", "Ticket", "cooldown"]
