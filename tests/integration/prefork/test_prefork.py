"""Pre-forked attempts (``ATTEMPT_PROCESS=fork``): each attempt a fresh fork of the host's zygote, isolated as before.

These run the real zygote and real forked children with a stand-in lease (no storage is
needed: the sleep and echo pipelines never touch it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from shared.config.settings import get_settings
from shared.core.jobs import Progress
from shared.core.registry import default_registry
from shared.runtime.prefork import ForkRunner, fork_supported, zygote
from shared.runtime.protocol import AttemptSpec
from shared.runtime.runner import AttemptResult, default_runner
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(not fork_supported(), reason="fork attempts need Linux")
ROOT = Path(__file__).resolve().parents[3]


class Lease:
    label = "test attempt"

    def __init__(self, cancel_after: float | None = None) -> None:
        self.cancel_at = None if cancel_after is None else time.monotonic() + cancel_after
        self.renewals = 0

    def renew(self, progress: Progress | None) -> bool:
        self.renewals += 1
        return self.cancel_at is not None and time.monotonic() >= self.cancel_at


def spec(pipeline: str, params: dict[str, Any], job_id: str = "fe5dcf1cfd2e8b0a0177784c1eb0") -> AttemptSpec:
    return AttemptSpec(
        mode="run", job_id=job_id, tenant="local", attempt=1, pipeline=pipeline,
        pipeline_ref=default_registry().ref(pipeline), params=params, max_attempts=3,
    )


def run(pipeline: str, params: dict[str, Any], timeout: float = 30, lease: Lease | None = None) -> AttemptResult:
    return ForkRunner(lease or Lease(), spec(pipeline, params), timeout, get_settings()).run({"x": 1})


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_fork_is_the_default_runner_on_linux() -> None:
    assert default_runner() is ForkRunner


def test_a_forked_attempt_succeeds_and_the_zygote_stays() -> None:
    out = run("echo", {})
    assert out.kind == "succeeded" and out.result == b'{"echo":{"x":1}}'
    pid = zygote().pid
    assert run("echo", {}).kind == "succeeded"
    assert zygote().pid == pid, "one zygote serves every attempt"


@pytest.mark.parametrize(
    ("fail", "reason"),
    [
        ("segv", "the pipeline process was killed by SIGSEGV"),
        ("exit", "the pipeline process exited with code 3"),
        ("kill", "the pipeline process was killed by SIGKILL"),
    ],
)
def test_a_crashing_forked_attempt_fails_only_itself(fail: str, reason: str) -> None:
    healthy: list[AttemptResult] = []
    neighbour = threading.Thread(target=lambda: healthy.append(run("sleep", {"seconds": 1.5, "steps": 3})))
    neighbour.start()
    # The crash must happen beside a running attempt: wait for the neighbour's fork, not for a guessed 0.3 s.
    wait_until(lambda: children_of(zygote().pid or 0), timeout=30, what="the neighbour attempt's fork")
    out = run("sleep", {"seconds": 0.4, "steps": 2, "fail": fail})
    neighbour.join()
    assert out.kind == "failed" and out.retryable
    assert out.error is not None and out.error.type == "ProcessDied" and out.error.message.startswith(reason)
    assert healthy and healthy[0].kind == "succeeded", "the attempt beside it carried on"
    assert zygote().alive() and run("echo", {}).kind == "succeeded", "the zygote carried on"


def test_a_hanging_forked_attempt_is_killed_with_its_process_group_at_the_timeout() -> None:
    seen: dict[str, int] = {}
    zpid = zygote().pid or 0

    def watch() -> None:
        deadline = time.monotonic() + 30  # ends once the child is seen; a loaded machine forks slowly
        while time.monotonic() < deadline and not seen:
            for child in children_of(zygote().pid or zpid):
                seen["pid"] = child
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    out = run("sleep", {"seconds": 60, "fail": "hang"}, timeout=2)
    watcher.join()
    assert out.kind == "failed" and out.error is not None and out.error.type == "Timeout"
    # Killed at its 2 s timeout, not at the pipeline's 60 s end; generous, as a loaded machine forks slowly.
    assert time.monotonic() - started < 30
    assert seen, "the attempt ran as a child of the zygote"
    with pytest.raises(ProcessLookupError):
        os.killpg(seen["pid"], 0)  # the whole group is gone


def test_a_cancel_that_is_ignored_kills_the_attempt_after_the_grace_period(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANCEL_GRACE_SECONDS", "1")
    monkeypatch.setenv("HEARTBEAT_SECONDS", "0.2")
    get_settings.cache_clear()
    try:
        out = run("sleep", {"seconds": 60, "fail": "hang"}, lease=Lease(cancel_after=0.3))
    finally:
        get_settings.cache_clear()
    assert out.kind == "cancelled"


def test_a_cooperative_cancel_reaches_the_forked_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTBEAT_SECONDS", "0.2")
    get_settings.cache_clear()
    try:
        started = time.monotonic()
        out = run("sleep", {"seconds": 30, "steps": 300}, lease=Lease(cancel_after=0.3))
    finally:
        get_settings.cache_clear()
    # Stopped by the cancel, long before the pipeline's 30 s end (generous: a loaded machine forks slowly).
    assert out.kind == "cancelled" and time.monotonic() - started < 15


def test_a_dead_zygote_is_replaced() -> None:
    assert run("echo", {}).kind == "succeeded"
    old = zygote().pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 30  # ends once it is gone; a loaded machine reaps slowly
    while alive(old) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run("echo", {}).kind == "succeeded"
    assert zygote().pid not in (None, old)


def test_a_zygote_slow_to_start_does_not_let_the_claim_go_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zygote that takes longer than the fence to come up (its first imports on a loaded CI machine)
    used to fence the attempt as soon as it started: the lease was not renewed while it waited."""
    monkeypatch.setenv("HEARTBEAT_SECONDS", "0.2")
    monkeypatch.setenv("HEARTBEAT_STALE_SECONDS", "2")  # the fence: 0.6 × 2 s
    get_settings.cache_clear()
    z = zygote()
    z.close()
    stalled = threading.Event()

    def stall_the_zygote() -> None:
        deadline = time.monotonic() + 60  # ends once the zygote has a pid; a loaded machine starts it slowly
        while z.pid is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert z.pid is not None
        os.kill(z.pid, signal.SIGSTOP)  # a real process, really not running: 2.5 s, past the fence
        time.sleep(2.5)
        os.kill(z.pid, signal.SIGCONT)
        stalled.set()

    lease = Lease()
    staller = threading.Thread(target=stall_the_zygote)
    staller.start()
    try:
        out = run("echo", {}, lease=lease)
    finally:
        staller.join()
        get_settings.cache_clear()
    assert stalled.is_set()
    assert out.kind == "succeeded", out
    assert lease.renewals >= 5  # heartbeats every 0.2 s while it waited


def test_the_attempt_sees_the_hosts_environment_of_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """The zygote started earlier; an attempt still gets the host's current settings, as a spawned one would."""
    assert run("echo", {}).kind == "succeeded"
    monkeypatch.setenv("DISABLED_PIPELINES", "nothing-real")
    code = run("sleep", {"seconds": 0, "steps": 1})
    assert code.kind == "succeeded"


def test_the_zygote_has_no_python_threads_and_no_sockets_but_its_own() -> None:
    assert run("echo", {}).kind == "succeeded"
    pid = zygote().pid
    assert pid is not None
    comms = [Path(f"/proc/{pid}/task/{t}/comm").read_text().strip() for t in os.listdir(f"/proc/{pid}/task")]
    # The main thread, and at most OpenBLAS's pool (numpy), which is fork-aware (pthread_atfork).
    assert len(comms) <= 2, comms
    sockets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    inet = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    own_inodes = {s[len("socket:[") : -1] for s in sockets if s.startswith("socket:")}
    # No TCP connection (no storage client) belongs to the zygote: only its Unix listening socket.
    assert not [line for line in inet if line.split()[9] in own_inodes]


HOST = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from shared.config.settings import get_settings
    from shared.core.registry import default_registry
    from shared.runtime.prefork import ForkRunner, zygote
    from shared.runtime.protocol import AttemptSpec

    class Lease:
        label = "host"
        def renew(self, progress):
            return False

    spec = AttemptSpec(mode="run", job_id="fe5dcf1cfd2e8b0a0177784c1eb1", tenant="local", attempt=1,
                       pipeline="sleep", pipeline_ref=default_registry().ref("sleep"),
                       params={{"seconds": 120, "steps": 120}}, max_attempts=1)
    zygote().ensure()
    print(zygote().pid, flush=True)
    ForkRunner(Lease(), spec, 300, get_settings()).run(None)
    """
)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_killing_the_host_kills_its_zygote_and_its_attempts(how: str) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST.format(root=str(ROOT))], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert host.stdout is not None
        zpid = int(host.stdout.readline())
        deadline = time.monotonic() + 20
        attempts: list[int] = []
        while not attempts and time.monotonic() < deadline:
            attempts = children_of(zpid)
            time.sleep(0.05)
        assert attempts, "the attempt should be running"
        host.send_signal(getattr(signal, how))
        host.wait(30)
        deadline = time.monotonic() + 30  # ends once both are gone (PR_SET_PDEATHSIG); a loaded machine reaps slowly
        while any(alive(p) for p in [zpid, *attempts]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(zpid), "the zygote outlived its host"
        assert not any(alive(p) for p in attempts), "an attempt outlived its host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()  # the pipe we read the zygote's pid from (unclosed, a ResourceWarning)


def test_an_attempt_that_ends_before_the_host_reads_its_pid_keeps_the_zygote() -> None:
    """The zygote's ``pid N`` and ``exit 0`` can arrive in one read when the child is quick. The host used to
    take that for a broken zygote and replace it, which SIGKILLed every other attempt running on it."""
    from shared.runtime.prefork import ForkedProcess, read_fork_answer

    host, zyg = __import__("socket").socketpair()
    control_r, control_w = os.pipe()
    control = os.fdopen(control_w, "wb")  # the attempt's stdin; closing it is its owner's job, as with Popen
    try:
        zyg.sendall(b"pid 4242\nexit 0\n")
        pid, rest = read_fork_answer(host)
        proc = ForkedProcess(host, pid, control, rest)
        assert (pid, proc.poll(), proc.wait(1)) == (4242, 0, 0)
    finally:
        control.close()
        os.close(control_r)
        zyg.close()
        host.close()


def test_many_quick_concurrent_attempts_share_one_zygote() -> None:
    assert run("echo", {}).kind == "succeeded"
    pid, started = zygote().pid, zygote().started
    outcomes: list[str] = []

    def worker() -> None:
        for _ in range(8):
            outcomes.append(run("echo", {}).kind)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == ["succeeded"] * 32
    assert (zygote().pid, zygote().started) == (pid, started), "no attempt made the host replace its zygote"


def test_a_failed_fork_request_among_8_concurrent_attempts_fails_only_itself() -> None:
    """A request the host could not hand over (here: descriptors already closed, so ``send_fds`` fails) used to make
    the host replace a healthy zygote, SIGKILLing every attempt on it (each then 'likely the out-of-memory killer')."""
    from shared.runtime.prefork import ZygoteError

    assert run("echo", {}).kind == "succeeded"
    pid, started = zygote().pid, zygote().started
    outcomes: list[AttemptResult] = []
    threads = [threading.Thread(target=lambda: outcomes.append(run("sleep", {"seconds": 2.0, "steps": 4})))
               for _ in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(children_of(pid or 0)) < 8:  # all 8 are forked and running
        assert time.monotonic() < deadline, "the 8 attempts did not start"
        time.sleep(0.05)
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(ZygoteError):
        zygote().fork(Path("/nonexistent/spec.json"), [r, w, r])
    for t in threads:
        t.join()
    assert [o.kind for o in outcomes] == ["succeeded"] * 8, [o.error for o in outcomes]
    assert (zygote().pid, zygote().started) == (pid, started), "the zygote was not replaced"


def test_a_fork_that_fails_inside_the_zygote_is_an_answer_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.fork`` failing (EAGAIN: out of processes) answers ``error …`` to that request; the zygote goes on."""
    import errno
    import socket

    from shared.runtime import zygote as zygote_module
    from shared.runtime.prefork import ForkRefused, read_fork_answer

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(zygote_module.os, "fork", no_fork)
    host, zyg = socket.socketpair()
    r, w = os.pipe()
    try:
        assert zygote_module._fork_one(zyg, {"spec": "x", "env": {}, "cwd": "/"}, [r, w], os.getpid()) is None
        with pytest.raises(OSError):
            os.fstat(r)  # the request's descriptors were closed, not leaked
        with pytest.raises(ForkRefused, match="EAGAIN"):
            read_fork_answer(host)
    finally:
        host.close()
        zyg.close()
