"""Fixtures that run the real app in local Functions host processes (``python -m devhost``) on Azurite."""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devhost.process import HostProcess
from tests.conftest import unique_names

TERMINAL = {"succeeded", "failed", "cancelled"}


#: The test hosts' stale threshold. An attempt fences itself (kills its pipeline, reports ``lost``) once its lease
#: went unrenewed for 0.6 x this (shared/runtime/runner.py), and the reaper then hands the job on: at 4 s (a 2.4 s
#: fence) one renewal slowed by a loaded machine (load 10-18: a slow Azurite answer, a descheduled renewal thread, a
#: child's slow start) re-ran an attempt that was fine, and tests that assert ``attempts == 1`` (or 2) failed. At 30 s
#: (an 18 s fence) no test waits on it: nothing goes stale unless a host is killed.
HEARTBEAT_STALE_SECONDS = "30"

#: For the tests that SIGKILL a host and wait for the reaper to hand its attempts on (the only ones that wait out the
#: threshold): 8 s keeps their wait short (a 4.8 s fence, twice the old one, for the attempts that live on).
QUICK_STALE = "8"


def host_env(azurite: str, **extra: str) -> dict[str, str]:
    return {
        "AzureWebJobsStorage": azurite,
        "DEFAULT_TENANT": "local",
        "DEVHOST_FUNCTION_KEY": "e2e-" + secrets.token_hex(8),
        "HEARTBEAT_SECONDS": "1",
        "HEARTBEAT_STALE_SECONDS": HEARTBEAT_STALE_SECONDS,
        "PROGRESS_MIN_INTERVAL_SECONDS": "0.5",
        "CANCEL_GRACE_SECONDS": "2",
        "QUEUED_STALE_SECONDS": "30",
        "REAPER_SCHEDULE": "*/2 * * * * *",
        **unique_names(),
        **extra,
    }


@dataclass
class Api:
    base: str
    key: str

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             raw: bytes | None = None, key: bool = True) -> tuple[int, dict[str, str], Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        h = {"content-type": "application/json", **(headers or {})}
        if key:
            h["x-functions-key"] = self.key
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                payload = resp.read()
                # The headers as http.client parsed them: names case-insensitive, as HTTP's are (the runtime answers
                # with lower-case names such as content-type, and so does Azure).
                return resp.status, resp.headers, _json(payload)
        except urllib.error.HTTPError as err:
            payload = err.read()
            return err.code, err.headers, _json(payload)

    def submit(self, pipeline: str, params: dict[str, Any] | None = None, input_: Any = None, **kw: Any) -> dict[str, Any]:
        status, _, body = self.call("POST", "/api/jobs", {"pipeline": pipeline, "params": params or {}, "input": input_}, **kw)
        assert status == 202, body
        return dict(body)

    def job(self, job_id: str) -> dict[str, Any]:
        status, _, body = self.call("GET", f"/api/jobs/{job_id}")
        assert status == 200, body
        return dict(body)

    def wait(self, job_id: str, timeout: float = 60, until: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        check = until or (lambda j: j["status"] in TERMINAL)
        deadline = time.monotonic() + timeout
        while True:
            j = self.job(job_id)
            if check(j):
                return j
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {j['status']} after {timeout}s: {j}")
            time.sleep(0.2)


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload


@pytest.fixture(scope="module")
def env(azurite: str) -> dict[str, str]:
    return host_env(azurite)


@pytest.fixture(scope="module")
def host(env: dict[str, str]) -> Iterator[HostProcess]:
    with HostProcess(env=env) as h:
        yield h


@pytest.fixture(scope="module")
def api(host: HostProcess, env: dict[str, str]) -> Api:
    return Api(host.url, env["DEVHOST_FUNCTION_KEY"])
