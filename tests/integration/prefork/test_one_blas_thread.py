"""Every attempt's process runs numpy's BLAS on one thread, whatever the host's environment says
(``shared.runtime.blas``: a job's result must not depend on the instance's core count, and five attempts on one
instance must not spin each other's BLAS threads).

Real processes: the zygote (which pre-imports numpy, so its OpenBLAS pool is sized when it starts) and a spawned
attempt. OpenBLAS reads its thread count once, from the environment it is loaded under.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from shared.config.settings import get_settings
from shared.runtime.blas import ONE_BLAS_THREAD
from shared.runtime.prefork import fork_supported, zygote
from shared.runtime.runner import APP_ROOT, AttemptRunner, child_env
from tests.integration.prefork.test_prefork import Lease, alive, run, spec
from tests.support.waiting import wait_until

TWO = {name: "2" for name in ONE_BLAS_THREAD}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _attempt_children() -> list[int]:
    """This process's spawned attempt processes (not the zygote an earlier test may have left running)."""
    out, me = [], os.getpid()
    # /proc/PID/task/TID/children lists the children a thread made; the runner's Popen runs on the test's thread.
    kids = [int(p) for t in os.listdir(f"/proc/{me}/task") for p in _read(f"/proc/{me}/task/{t}/children").split()]
    for pid in kids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"shared.runtime.child" in cmd:
            out.append(pid)
    return out


def _environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` was exec'd with: what OpenBLAS read when it loaded there."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


@pytest.mark.skipif(not fork_supported(), reason="fork attempts need Linux")
def test_the_zygote_starts_with_one_blas_thread_when_the_host_asks_for_two(monkeypatch: pytest.MonkeyPatch) -> None:
    # The zygote pre-imports numpy, and OpenBLAS sizes its pool once, from the environment it is loaded under, so a
    # forked attempt's BLAS is the zygote's: its exec environment is what decides.
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)
    assert run("echo", {}).kind == "succeeded"
    old = zygote().pid
    assert old is not None
    os.kill(old, signal.SIGKILL)  # the next attempt starts a zygote under this environment
    wait_until(lambda: not alive(old), timeout=30, what="the killed zygote's end")
    assert run("echo", {}).kind == "succeeded"
    pid = zygote().pid
    assert pid is not None and pid != old
    assert "openblas" in Path(f"/proc/{pid}/maps").read_text()  # numpy is pre-imported there
    assert {name: _environ(pid).get(name) for name in ONE_BLAS_THREAD} == ONE_BLAS_THREAD


def test_a_spawned_attempt_gets_one_blas_thread_when_the_host_asks_for_two(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)
    box: dict[str, object] = {}
    runner = AttemptRunner(Lease(), spec("sleep", {"seconds": 5, "steps": 5}), 60, get_settings())
    worker = threading.Thread(target=lambda: box.setdefault("out", runner.run(None)), name="spawned attempt")
    worker.start()
    try:
        child = wait_until(lambda: next(iter(_attempt_children()), None), timeout=30, what="the attempt's process")
        assert {name: _environ(child).get(name) for name in ONE_BLAS_THREAD} == ONE_BLAS_THREAD
    finally:
        for pid in _attempt_children():
            os.killpg(pid, signal.SIGKILL)  # its own session (start_new_session): only the attempt
        worker.join(timeout=30)
    assert not worker.is_alive()


def test_openblas_takes_one_thread_from_an_attempt_s_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)
    probe = "import numpy; from shared.runtime.blas import loaded_openblas_threads as n; print(n())"
    asked = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                            cwd=str(APP_ROOT)).stdout.strip() for env in ({**os.environ, "PYTHONPATH": str(APP_ROOT)},
                                                                         child_env())]
    # Read back from the library itself: the host's 2 as asked (on a machine of 2+ cores), the attempt's 1.
    assert asked[1] == "1", asked
    assert asked[0] == ("2" if (os.cpu_count() or 1) >= 2 else asked[0]), asked
