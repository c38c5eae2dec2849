"""One tenant's dead receiver cannot hold up another tenant's first delivery (webhooks45, docs/webhooks.md "Delivery").

The callbacks queue is one FIFO: a receiver that never answers held the sender 15 s per attempt, so another
tenant's first delivery queued behind a dead tenant's messages waited 15 s for each of them. The sender's
per-tenant circuit (``shared.runtime.webhook_circuit``) lets a failing host's attempts through only now and then
and records the others as not tried, with the usual backoff and conditional record.

The scenario drives a single-place sender over the real stores (the fake here, Azurite in the twin) with the
platform's clock: the dead receiver's transport moves the clock 15 s, so nothing depends on wall-clock time. The
queue is a list ordered by (visible at, sent), the FIFO the callbacks queue is.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter

import pytest

from shared.api.webhook_secrets import WebhookSecrets
from shared.core.jobs import Job
from shared.core.webhooks import WebhookMessage, WebhookStatus, delivery_id
from shared.runtime import webhook_circuit as circuit_mod
from shared.runtime import webhooks as runtime
from shared.runtime.webhook_circuit import HOST_FAILURES, NOT_TRIED, ReceiverCircuit
from shared.runtime.webhooks import DeliveryOutcome, WebhookSender
from tests.support.backends import Backend
from tests.support.webhooks import finished_job, public_dns, row

DEAD_JOBS = 20
DEADLINE = runtime.EXCHANGE_DEADLINE_SECONDS
#: A single place: every attempt ahead of the other tenant's message is waited for in full. The bound there is the
#: dead host's first failures in a row, plus one probe.
BOUND_SECONDS = (HOST_FAILURES + 1) * DEADLINE


class Sim:
    """A single-place sender over the stores, the callbacks queue as a (visible at, sent) heap on the clock."""

    def __init__(self, backend: Backend, circuit: bool) -> None:
        self.backend = backend
        self.queue: list[tuple[float, int, str]] = []
        self.seq = itertools.count()
        self.posts: Counter[str] = Counter()
        self.delivered: dict[str, float] = {}
        clock = lambda: backend.clock.now().timestamp()  # noqa: E731
        secrets = WebhookSecrets(backend.stores)
        for tenant in ("dead-tenant", "other-tenant"):
            if not secrets.list(tenant):
                secrets.create(tenant)
        self.sender = WebhookSender(backend.stores, transport=self.transport, send=self.send, clock=clock)
        if not circuit:  # the sender as it was: every attempt tried
            self.sender.circuit.admit = lambda tenant, host: circuit_mod.Ticket(tenant, host, False, clock())  # type: ignore[method-assign]

    def now(self) -> float:
        return float(self.backend.clock.now().timestamp())

    def transport(self, url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
        self.posts[url] += 1
        if "dead" in url:
            self.backend.clock.advance(DEADLINE)  # a receiver that never answers: the exchange deadline
            return DeliveryOutcome(False, f"failed: no complete answer within {DEADLINE:g} s")
        return DeliveryOutcome(True, "HTTP 204")

    def send(self, msg: WebhookMessage, delay: float) -> None:
        heapq.heappush(self.queue, (self.now() + delay, next(self.seq), msg.encode()))

    def run_until(self, job: Job, limit: float = 30 * 3600) -> float:
        """Deliver in queue order until ``job``'s webhook is delivered; its delay from the start."""
        t0 = self.now()
        while self.queue and self.now() - t0 < limit:
            at, _, text = heapq.heappop(self.queue)
            if at > self.now():
                self.backend.clock.advance(at - self.now())
            outcome = self.sender.handle(text)
            msg = WebhookMessage.decode(text)
            if outcome == "delivered":
                self.delivered[msg.job_id] = self.now() - t0
                if msg.job_id == job.id:
                    return self.delivered[msg.job_id]
        raise AssertionError(f"{job.id} not delivered")


def _scenario(backend: Backend, monkeypatch: pytest.MonkeyPatch, circuit: bool) -> tuple[Sim, list[Job], Job, float]:
    public_dns(monkeypatch)
    sim = Sim(backend, circuit)
    dead = [finished_job(backend, "dead-tenant", url="https://dead.example.com/h", index=False)
            for _ in range(DEAD_JOBS)]
    other = finished_job(backend, "other-tenant", url="https://ok.example.com/h", index=False)
    for job in [*dead, other]:  # the dead tenant's messages are all ahead of the other tenant's first delivery
        sim.send(WebhookMessage(job.tenant, job.id, delivery_id(job), 1, sim.now()), 0.0)
    return sim, dead, other, sim.run_until(other)


def test_another_tenants_first_delivery_goes_out_within_the_bound(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, dead, other, delay = _scenario(backend, monkeypatch, circuit=True)
    assert delay <= BOUND_SECONDS, f"the other tenant's first delivery waited {delay:.0f} s"
    assert row(backend, other).callback_status == WebhookStatus.DELIVERED
    # The dead tenant's webhooks were not dropped: each has an attempt recorded (tried or not) and its next queued.
    for job in dead:
        stored = row(backend, job)
        assert stored.callback_status == WebhookStatus.RETRYING and stored.callback_attempts == 1
    assert sum(row(backend, j).callback_error == NOT_TRIED for j in dead) == DEAD_JOBS - HOST_FAILURES
    assert sum(1 for _, _, t in sim.queue if WebhookMessage.decode(t).tenant == "dead-tenant") == DEAD_JOBS


def test_without_the_circuit_the_other_tenant_waited_for_every_dead_attempt(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same scenario with every attempt tried (the sender before webhooks45): 15 s per dead message ahead."""
    _, _, _, delay = _scenario(backend, monkeypatch, circuit=False)
    assert delay >= DEAD_JOBS * DEADLINE > BOUND_SECONDS


def test_the_dead_tenants_deliveries_still_end_within_their_24_hours(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not tried is a failed attempt like any other: the 24 h and the dead letter are unchanged, and the host is
    still probed now and then (a receiver that comes back is found)."""
    public_dns(monkeypatch)
    sim = Sim(backend, circuit=True)
    dead = [finished_job(backend, "dead-tenant", url="https://dead.example.com/h", index=False) for _ in range(3)]
    for job in dead:
        sim.send(WebhookMessage(job.tenant, job.id, delivery_id(job), 1, sim.now()), 0.0)
    t0 = sim.now()
    while sim.queue:
        at, _, text = heapq.heappop(sim.queue)
        if at > sim.now():
            backend.clock.advance(at - sim.now())
        sim.sender.handle(text)
    for job in dead:
        stored = row(backend, job)
        assert stored.callback_status == WebhookStatus.FAILED and "gave up after 24 h" in (stored.callback_error or "")
    assert sim.now() - t0 <= runtime.DEADLINE_SECONDS + 2 * 3600
    probes = sim.posts["https://dead.example.com/h"]
    # At most one probe per cooldown (15 min at most apart) after the first failures; far fewer than ~30 a job.
    assert HOST_FAILURES < probes < 3 * 30


def test_a_duplicated_message_of_an_attempt_not_tried_does_not_double_the_chain(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    public_dns(monkeypatch)
    sim = Sim(backend, circuit=True)
    job = finished_job(backend, "dead-tenant", url="https://dead.example.com/h", index=False)
    for _ in range(HOST_FAILURES):
        sim.sender.circuit.done(sim.sender.circuit.admit("dead-tenant", "dead.example.com"), False)  # type: ignore[arg-type]
    text = WebhookMessage(job.tenant, job.id, delivery_id(job), 1, sim.now()).encode()
    assert sim.sender.handle(text) == "retrying"
    assert sim.sender.handle(text) == "stale-attempt"  # the twin: recorded already, nothing queued
    assert len(sim.queue) == 1 and row(backend, job).callback_error == NOT_TRIED


# -- the circuit alone (pure) --------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_a_brief_trouble_is_retried_untouched_then_a_failing_host_is_probed_now_and_then() -> None:
    clock = Clock()
    c = ReceiverCircuit(clock)
    for _ in range(HOST_FAILURES):
        ticket = c.admit("t", "h")
        assert ticket is not None and not ticket.probe
        c.done(ticket, False)
    assert c.admit("t", "h") is None  # failing: spaced out
    clock.t += circuit_mod.cooldown(HOST_FAILURES)
    probe = c.admit("t", "h")
    assert probe is not None and probe.probe
    assert c.admit("t", "h") is None and c.admit("t", "other-failing-host-of-t") is not None  # unknown: goes
    assert ReceiverCircuit(clock).admit("u", "h") is not None
    c.done(probe, True)  # it answers again: good
    assert all(c.admit("t", "h") is not None for _ in range(5))


def test_a_tenant_with_many_dead_hosts_has_one_probe_at_a_time_and_another_tenant_is_untouched() -> None:
    clock = Clock()
    c = ReceiverCircuit(clock)
    for i in range(circuit_mod.TROUBLED_HOSTS):
        for _ in range(HOST_FAILURES):
            c.done(c.admit("t", f"dead{i}"), False)  # type: ignore[arg-type]
    clock.t += circuit_mod.COOLDOWN_CAP
    first = c.admit("t", "fresh-dead-host")
    assert first is not None and first.probe  # troubled: a host not known good is a probe too
    assert c.admit("t", "dead0") is None and c.admit("t", "another-fresh-one") is None  # one in flight
    c.done(first, False)
    assert c.admit("t", "dead1") is None, "one probe per PROBE_GAP"
    clock.t += circuit_mod.PROBE_GAP
    assert c.admit("t", "dead1") is not None
    assert c.admit("u", "dead0") is not None, "another tenant's attempts to the same host are its own"


def test_a_slow_2xx_counts_against_its_host() -> None:
    clock = Clock()
    c = ReceiverCircuit(clock)
    for _ in range(HOST_FAILURES):
        ticket = c.admit("t", "slow")
        clock.t += circuit_mod.SLOW_SECONDS
        c.done(ticket, True)  # type: ignore[arg-type]
    assert c.admit("t", "slow") is None


def test_the_circuit_remembers_a_bounded_number_of_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(circuit_mod, "MAX_OPEN_HOSTS", 4)
    c = ReceiverCircuit(Clock())
    for i in range(10):
        for _ in range(HOST_FAILURES):
            c.done(circuit_mod.Ticket("t", f"h{i}", False, 0.0), False)
    assert len(c._open) == 4 and c._tenants["t"].failing == 4




def test_tenants_with_nothing_to_remember_are_not_kept() -> None:
    # platform46: every tenant that ever had an attempt kept an entry for the life of the instance (10,000 here).
    clock = Clock()
    c = ReceiverCircuit(clock)
    for i in range(10_000):
        ok = c.admit(f"good{i}", "h")
        assert ok is not None
        c.done(ok, i % 2 == 0)  # a 2xx, or one failure (not yet failing)
    assert len(c._tenants) == 0
    # A tenant with an open circuit is kept, and so is one with a probe in flight or started within PROBE_GAP.
    for _ in range(HOST_FAILURES):
        c.done(c.admit("dead", "h"), False)  # type: ignore[arg-type]
    assert set(c._tenants) == {"dead"}
    clock.t += circuit_mod.cooldown(HOST_FAILURES)
    probe = c.admit("dead", "h")
    assert probe is not None and probe.probe
    c.done(probe, True)  # it answers again: the circuit closes, but the probe was started just now
    assert set(c._tenants) == {"dead"} and c.admit("dead", "h") is not None
    clock.t += circuit_mod.PROBE_GAP
    c.done(c.admit("dead", "h"), True)  # type: ignore[arg-type]
    assert c._tenants == {}


def test_idle_tenants_left_behind_are_swept_and_the_map_stays_bounded() -> None:
    clock = Clock()
    c = ReceiverCircuit(clock)
    for i in range(1_000):  # each opens a circuit, probes once, the host answers: idle PROBE_GAP later, never seen again
        tenant = f"t{i}"
        for _ in range(HOST_FAILURES):
            c.done(c.admit(tenant, "h"), False)  # type: ignore[arg-type]
        clock.t += circuit_mod.cooldown(HOST_FAILURES)
        probe = c.admit(tenant, "h")
        assert probe is not None and probe.probe
        c.done(probe, True)
        assert tenant in c._tenants  # its probe was just now
    assert len(c._tenants) <= circuit_mod.TENANTS_SWEEP_MIN, len(c._tenants)


def test_healthy_hosts_never_push_out_an_open_circuit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(circuit_mod, "MAX_HOSTS", 8)
    clock = Clock()
    c = ReceiverCircuit(clock)
    for _ in range(HOST_FAILURES):
        c.done(c.admit("dead", "h"), False)  # type: ignore[arg-type]
    for i in range(100):  # another tenant's many healthy receivers
        c.done(c.admit("busy", f"r{i}"), True)  # type: ignore[arg-type]
    assert len(c._closed) == 8
    assert c.admit("dead", "h") is None, "the failing host is still spaced out, not unknown again"
    assert c._tenants["dead"].failing == 1
