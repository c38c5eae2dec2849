"""A zygote that is alive but does not answer (here: really stopped with SIGSTOP) is replaced after it misses a
ping; one that answers its ping is kept when a request of its fails. Real zygote, real forked children."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from shared.runtime import prefork
from shared.runtime.prefork import ZygoteError, fork_supported, zygote
from tests.integration.prefork.test_prefork import alive, run
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(not fork_supported(), reason="fork attempts need Linux")


def test_a_wedged_zygote_is_replaced_once_it_misses_a_ping(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bounds, not assertions: how long a fork answer and a ping may take before the zygote counts as wedged.
    monkeypatch.setattr(prefork, "_FORK_ANSWER_TIMEOUT", 3.0)
    monkeypatch.setattr(prefork, "_PING_TIMEOUT", 3.0)
    assert run("echo", {}).kind == "succeeded"
    old = zygote().pid
    assert old is not None
    os.kill(old, signal.SIGSTOP)
    try:
        out = run("echo", {})
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(old, signal.SIGCONT)
    assert out.kind == "succeeded", out.error
    assert zygote().pid not in (None, old)
    wait_until(lambda: not alive(old), what="the wedged zygote's end")


def test_a_zygote_that_answers_its_ping_stays_when_a_request_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("echo", {}).kind == "succeeded"
    pid, started = zygote().pid, zygote().started
    assert zygote().ping()

    def lost_answer(conn: object) -> tuple[int, bytes]:
        raise TimeoutError("the answer did not come in time")

    with monkeypatch.context() as m:
        m.setattr(prefork, "read_fork_answer", lost_answer)
        with pytest.raises(ZygoteError):
            run_fork()
    assert (zygote().pid, zygote().started) == (pid, started), "a zygote that answers was replaced"
    assert run("echo", {}).kind == "succeeded"


def run_fork() -> None:
    r, w = os.pipe()
    try:
        zygote().fork(prefork.APP_ROOT / "nonexistent-spec.json", [r, w, w])
    finally:
        for fd in (r, w):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_a_gone_zygote_does_not_answer_a_ping() -> None:
    assert run("echo", {}).kind == "succeeded"
    z = zygote()
    old = z.pid
    assert old is not None and z.ping()
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), what="the killed zygote's end")
    assert not z.ping()
