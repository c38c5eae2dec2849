"""devhost as the Functions host of a separate language worker process (Microsoft's azure-functions-runtime).

The function runs in the worker, not in devhost; an app the runtime refuses does not start and devhost prints the
runtime's reason; a worker killed mid-invocation fails that invocation (its queue message is redelivered) and is
restarted; sync functions share the runtime's pool of PYTHON_THREADPOOL_THREAD_COUNT threads.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devhost.process import HostProcess
from tests.support.devhost_helpers import APPS, BASIC_APP, BasicHost, queue_env, read_records, wait_for


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def test_function_runs_in_the_worker_process(basic: BasicHost) -> None:
    who = get_json(basic.host.url + "/api/whoami")
    assert who["pid"] != basic.host.pid
    assert who["ppid"] == basic.host.pid  # devhost started it
    assert who["pid"] == basic.host.worker_pid  # the pid devhost reports for its worker


def test_refused_app_does_not_start_and_says_why(azurite: str) -> None:
    host = HostProcess(APPS / "refused", env={"AzureWebJobsStorage": azurite})
    with pytest.raises(RuntimeError, match="devhost exited with 3"):
        host.start()
    # The runtime's own reason, naming the function.
    assert 'cannot load the refused function: Python return annotation "NoneType" does not match binding type "http"' in host.logs
    assert "devhost ready" not in host.logs


def _hold(url: str, n: int, timeout: float) -> list[str]:
    with ThreadPoolExecutor(n) as pool:
        calls = [pool.submit(urllib.request.urlopen, f"{url}/api/hold?target={n}&timeout={timeout}", timeout=120)
                 for _ in range(n)]
        return [c.result().read().decode() for c in calls]


def test_default_pool_runs_four_sync_calls_at_once(basic: BasicHost) -> None:
    # The positive control for the test below: min(32, CPUs + 4) >= 5 threads, so 4 holds meet at once.
    assert _hold(basic.host.url, 4, timeout=60) == ["held"] * 4
    assert get_json(basic.host.url + "/api/held")["peak"] == 4


def test_thread_budget_caps_concurrent_sync_calls(azurite: str, tmp_path: Path) -> None:
    env = {"AzureWebJobsStorage": azurite, "PYTHON_THREADPOOL_THREAD_COUNT": "2",
           "AzureFunctionsWebHost__hostid": f"pool-{secrets.token_hex(4)}", **queue_env()}
    with HostProcess(BASIC_APP, env=env, args=["--no-timer", "--no-queue"]) as host:
        # Four calls that each wait (up to 2 s) for all four to run at once: with two threads they never do.
        assert _hold(host.url, 4, timeout=2) == ["held"] * 4
        stats = get_json(host.url + "/api/held")  # async: answers on the loop, not from the pool
        assert stats == {"active": 0, "peak": 2}


def test_killed_worker_fails_its_invocation_and_is_restarted(azurite: str, tmp_path: Path) -> None:
    record = tmp_path / "records.jsonl"
    env = {"AzureWebJobsStorage": azurite, "RECORD_FILE": str(record), "SLOW_SECONDS": "60",
           "AzureFunctionsWebHost__hostid": f"crash-{secrets.token_hex(4)}", **queue_env()}
    host = HostProcess(BASIC_APP, env=env, args=["--no-timer"], grace=1).start()
    try:
        q = BasicHost(host, env, record, azurite).queue("SLOW_QUEUE")
        q.send_message(base64.b64encode(b"survive").decode())

        def starts() -> list[dict[str, Any]]:
            return [r for r in read_records(record) if r.get("fn") == "queue_slow" and r["phase"] == "start"]

        first = wait_for(starts, timeout=60)[0]
        assert first["pid"] != host.pid and first["dequeue_count"] == 1
        os.kill(first["pid"], signal.SIGKILL)
        # The in-flight invocation failed, so the message became visible again (visibilityTimeout 1 s) and the
        # restarted worker, a new process, ran it again.
        second = wait_for(lambda: starts()[1:], timeout=90)[0]
        assert second["body"] == "survive" and second["dequeue_count"] == 2
        assert second["pid"] not in (first["pid"], host.pid)
        assert host.running()
        assert "restarting the language worker" in host.logs
        assert get_json(host.url + "/api/whoami")["pid"] == second["pid"]
    finally:
        host.stop()


def test_ctrl_c_to_the_process_group_still_lets_the_running_invocation_finish(azurite: str) -> None:
    # A terminal's Ctrl+C sends SIGINT to the whole foreground group: devhost and its worker. devhost drains (grace),
    # then ends the worker itself; a worker that died on the SIGINT would fail the invocation (500) and be restarted.
    env = {"AzureWebJobsStorage": azurite, "DEVHOST_LOG_LEVEL": "DEBUG",
           "AzureFunctionsWebHost__hostid": f"int-{secrets.token_hex(4)}", **queue_env()}
    host = HostProcess(BASIC_APP, env=env, args=["--no-timer", "--no-queue"], grace=60).start()
    try:
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(lambda: urllib.request.urlopen(host.url + "/api/sleep?s=3", timeout=60).read())
            wait_for(lambda: "Executing 'Functions.sleep'" in host.logs, timeout=30)
            assert host.pid is not None
            os.killpg(host.pid, signal.SIGINT)  # HostProcess starts devhost as its group's leader
            assert call.result() == b"slept"
        assert host.wait(60) == 0
        assert "restarting the language worker" not in host.logs
    finally:
        host.stop()
