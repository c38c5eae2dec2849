"""Which of a receiver's addresses the sender dials (review44p): the resolver's order, families alternating.

``_getaddrinfo`` sorted the addresses as text and ``post`` dialled the first three. A dual-stack receiver (an AWS
dual-stack load balancer: ``2600:1f18:…`` ×3 and ``52.…``/``3.…`` ×3) then had only its IPv6 addresses dialled, which
an instance without outbound IPv6 (App Service, Flex Consumption) cannot reach: every attempt failed "could not
connect" and the webhook was a dead letter after 24 h, though the receiver was up on IPv4 all along. The resolver
orders destinations for the host it runs on (RFC 6724: IPv4 first where IPv6 is unreachable); that order is kept,
and the three dialled alternate the families (RFC 8305), so neither family can be crowded out.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from shared.core import webhooks as core
from shared.runtime.webhooks import dial_order

V6 = ["2600:1f18:1:1::1", "2600:1f18:1:2::2", "2600:1f18:1:3::3"]
V4 = ["52.1.2.3", "3.4.5.6", "54.7.8.9"]


def _infos(addresses: list[str]) -> list[tuple[Any, ...]]:
    return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
             (a, 443, 0, 0) if ":" in a else (a, 443)) for a in addresses]


def test_the_resolver_order_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # What glibc answers on an IPv4-only host: the IPv4 destinations first (RFC 6724 rule 1), one entry per address.
    answer = [*V4, *V6, V4[0]]
    monkeypatch.setattr(core.socket, "getaddrinfo", lambda host, *args, **kw: _infos(answer))
    assert core._getaddrinfo("hooks.example", 443) == [*V4, *V6]


def test_the_addresses_dialled_alternate_the_families() -> None:
    assert dial_order([*V6, *V4]) == [V6[0], V4[0], V6[1]]
    assert dial_order([*V4, *V6]) == [V4[0], V6[0], V4[1]]
    assert dial_order(V6) == V6 and dial_order(V4[:2]) == V4[:2] and dial_order([]) == []


def test_a_dual_stack_receivers_ipv4_is_dialled_whatever_the_resolver_puts_first() -> None:
    for answer in ([*V6, *V4], [*V4, *V6], sorted([*V6, *V4])):
        assert any(":" not in a for a in dial_order(answer)), answer
        assert any(":" in a for a in dial_order(answer)), answer
