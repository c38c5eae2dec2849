"""The receiver circuit's bookkeeping under a random interleaving of attempts (review46m, after platform46 split
the hosts into a closed and an open map and dropped idle tenants): a tenant's ``failing`` is the number of its hosts
in the open map, every tenant with an open host or a probe in flight is remembered, ``in_flight`` is its outstanding
probe tickets, no host is in both maps, and both maps stay within their bounds. Small bounds, so the evictions of
both maps and the tenants' sweep run thousands of times."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import shared.runtime.webhook_circuit as C


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_circuit_bookkeeping_holds_under_random_attempts(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(C, "MAX_HOSTS", 7)
    monkeypatch.setattr(C, "MAX_OPEN_HOSTS", 5)
    monkeypatch.setattr(C, "TENANTS_SWEEP_MIN", 4)
    now = [0.0]
    circuit = C.ReceiverCircuit(clock=lambda: now[0])
    rnd = random.Random(seed)
    tickets: list[C.Ticket] = []
    for step in range(20_000):
        now[0] += rnd.choice([0.0, 0.1, 1.0, 5.0, 40.0])
        if tickets and rnd.random() < 0.5:
            circuit.done(tickets.pop(rnd.randrange(len(tickets))), rnd.choice([True, False, False, None]))
        elif (ticket := circuit.admit(f"T{rnd.randrange(6)}", f"h{rnd.randrange(5)}")) is not None:
            tickets.append(ticket)
        opened = Counter(tenant for tenant, _ in circuit._open)
        probes = Counter(t.tenant for t in tickets if t.probe)
        for name in opened.keys() | probes.keys():
            assert name in circuit._tenants, (step, name)
        for name, t in circuit._tenants.items():
            assert (t.failing, t.in_flight) == (opened.get(name, 0), probes.get(name, 0)), (step, name, t)
        assert not set(circuit._open) & set(circuit._closed), step
        assert len(circuit._open) <= 5 and len(circuit._closed) <= 7, step
