"""host.json ``functionTimeout``, enforced as the Functions host does for an out-of-process worker.

An invocation still running at the timeout fails (the host's FunctionTimeoutException: an HTTP 500, a queue message
made visible again) and the worker process running it is restarted, because a running Python function cannot be
cancelled (WebScriptHostExceptionHandler.OnTimeoutExceptionAsync -> RestartWorkerWithInvocationIdAsync). The basic
app's own functions, with the timeout shortened through ``AzureFunctionsJobHost__functionTimeout``.
"""

from __future__ import annotations

import base64
import json
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from devhost import config
from devhost.process import HostProcess
from tests.support.devhost_helpers import BASIC_APP, BasicHost, queue_env, read_records, wait_for


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as r:
        return json.loads(r.read())


def test_function_timeout_is_read_from_host_json_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0", "functionTimeout": "00:10:00"}))
    assert config.load(tmp_path).function_timeout == 600
    monkeypatch.setenv("AzureFunctionsJobHost__functionTimeout", "-1")
    assert config.load(tmp_path).function_timeout is None
    monkeypatch.setenv("AzureFunctionsJobHost__functionTimeout", "00:00:00")
    with pytest.raises(ValueError, match="functionTimeout"):
        config.load(tmp_path)
    monkeypatch.delenv("AzureFunctionsJobHost__functionTimeout")
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0"}))
    assert config.load(tmp_path).function_timeout == 30 * 60  # the host's default off the Consumption plan


def test_an_invocation_over_function_timeout_fails_and_its_worker_is_restarted(azurite: str, tmp_path: Path) -> None:
    record = tmp_path / "records.jsonl"
    env = {"AzureWebJobsStorage": azurite, "RECORD_FILE": str(record), "SLOW_SECONDS": "600",
           "AzureFunctionsJobHost__functionTimeout": "00:00:05",
           "AzureFunctionsWebHost__hostid": f"timeout-{secrets.token_hex(4)}", **queue_env()}
    host = HostProcess(BASIC_APP, env=env, args=["--no-timer"], grace=1).start()
    try:
        first = host.worker_pid
        assert get(host.url + "/api/whoami")["pid"] == first
        # A call that finishes inside the limit is untouched.
        with urllib.request.urlopen(host.url + "/api/sleep?s=0", timeout=60) as r:
            assert r.read() == b"slept"
        # One that would run for ten minutes fails at the limit.
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(host.url + "/api/sleep?s=600", timeout=120)
        err.value.close()
        assert err.value.code == 500
        assert "Timeout value of 00:00:05 exceeded by function 'Functions.sleep'" in host.logs
        assert "Restarting worker process executing invocationId" in host.logs
        # The worker that ran it was replaced, and the new one serves.
        wait_for(lambda: host.worker_pid not in (None, first), timeout=120)
        assert get(host.url + "/api/whoami")["pid"] == host.worker_pid != first

        # A queue message whose function outlives the limit fails the same way and is delivered again.
        q = BasicHost(host, env, record, azurite).queue("SLOW_QUEUE")
        q.send_message(base64.b64encode(b"too slow").decode())

        def starts() -> list[dict[str, Any]]:
            return [r for r in read_records(record) if r.get("fn") == "queue_slow" and r["phase"] == "start"]

        one = wait_for(starts, timeout=120)[0]
        two = wait_for(lambda: starts()[1:], timeout=120)[0]
        assert (one["dequeue_count"], two["dequeue_count"]) == (1, 2)
        assert two["pid"] != one["pid"]  # the second delivery ran on the restarted worker
        assert host.running()
    finally:
        host.stop()
