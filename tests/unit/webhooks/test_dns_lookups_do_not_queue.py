"""A lookup never waits behind another receiver's hung DNS (review44p).

Every lookup ran on one pool of 4 threads under a 3 s deadline, and a hung ``getaddrinfo`` cannot be cancelled: it
keeps its thread until the resolver gives up (glibc: 5 s per try, two tries, A and AAAA). Four callback hosts whose
name servers do not answer (any tenant can submit such a URL) took every thread, and every other lookup queued
behind them and timed out unstarted: every tenant's submissions with a callback were a 422 "did not resolve within
3 s" and every delivery a failed attempt, for as long as such lookups kept coming. Now each lookup has a thread of
its own at once (concurrent lookups of one host share it), up to a cap far above what one tenant's rate can hang.
"""

from __future__ import annotations

import threading

import pytest

from shared.core import webhooks as core
from shared.core.webhooks import UnresolvedHost, check_url


def test_a_lookup_is_not_held_up_by_hung_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        if host.endswith(".dead.example"):
            release.wait(30)  # a name server that never answers: the lookup keeps its thread
        return ["93.184.216.34"]

    monkeypatch.setattr(core, "_getaddrinfo", resolver)
    monkeypatch.setattr(core, "DNS_TIMEOUT_SECONDS", 0.2)
    try:
        for i in range(8):
            with pytest.raises(UnresolvedHost, match="did not resolve within"):
                check_url(f"https://h{i}.dead.example/x", allow_private=False)
        # Another receiver's lookup answers at once: it must not wait behind the hung ones (a generous deadline,
        # so only queueing, never a loaded machine, makes it miss).
        monkeypatch.setattr(core, "DNS_TIMEOUT_SECONDS", 10.0)
        assert check_url("https://hooks.example.com/x", allow_private=False) == ["93.184.216.34"]
    finally:
        release.set()


def test_concurrent_lookups_of_one_host_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    release, started = threading.Event(), threading.Event()
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        started.set()
        release.wait(30)
        return ["93.184.216.34"]

    monkeypatch.setattr(core, "_getaddrinfo", resolver)
    monkeypatch.setattr(core, "DNS_TIMEOUT_SECONDS", 0.2)
    try:
        for _ in range(5):
            with pytest.raises(UnresolvedHost):
                check_url("https://slow.example/x", allow_private=False)
        assert started.wait(10)  # the one lookup is running (on a loaded machine its thread may start late)
        assert calls == ["slow.example"]  # one thread held by that host, not five
    finally:
        release.set()


def test_a_lookup_whose_thread_cannot_start_is_not_left_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(core, "_getaddrinfo", lambda host, port: ["93.184.216.34"])
    with monkeypatch.context() as m:
        m.setattr(threading.Thread, "start", no_thread)
        with pytest.raises(UnresolvedHost):
            check_url("https://hooks.example.com/x", allow_private=False)
    assert check_url("https://hooks.example.com/x", allow_private=False) == ["93.184.216.34"]
