"""Submit -> claim -> succeeded -> result end to end: HTTP into devhost, every function in its language worker
process (Microsoft's runtime over the Functions RPC protocol), Azurite behind a counting proxy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from azure.storage.queue import QueueClient

from devhost.faultproxy import FaultProxy
from devhost.process import HostProcess
from tests.e2e.conftest import Api, host_env
from tests.support.waiting import wait_until

#: Storage writes (table, queue and blob requests other than GET/HEAD, counted on the wire) of one no-op job once
#: its host is warm: submit = insert the row + send the message; the attempt = the claim and the finish (each one
#: entity-group transaction with the active-index row), one progress merge, and the message's delete.
#: Writes are billed per request, and a job that costs more is an N+1 somewhere.
WRITES_PER_NOOP_JOB = 6


@pytest.fixture(scope="module")
def proxy(azurite: str) -> Iterator[FaultProxy]:
    with FaultProxy(azurite) as p:
        yield p


@pytest.fixture(scope="module")
def env(proxy: FaultProxy) -> dict[str, str]:
    # No heartbeat inside a no-op attempt, however slowly a loaded machine runs it, and a stale threshold above it:
    # with a 4 s threshold (host_env's, until 2026-12) the attempt fenced itself (no renewal within the threshold)
    # whenever the zygote took over 2 s to start, and the job was left running.
    return host_env(proxy.connection_string, PROGRESS_MIN_INTERVAL_SECONDS="0", HEARTBEAT_SECONDS="60",
                    HEARTBEAT_STALE_SECONDS="180")


@pytest.fixture(scope="module")
def host(env: dict[str, str]) -> Iterator[HostProcess]:
    # No timers: the reaper's runs would add their own operations to the count.
    with HostProcess(env=env, args=["--no-timer"]) as h:
        yield h


@pytest.fixture(scope="module")
def api(host: HostProcess, env: dict[str, str]) -> Api:
    return Api(host.url, env["DEVHOST_FUNCTION_KEY"])


def test_echo_end_to_end_in_the_worker_process(api: Api, host: HostProcess, env: dict[str, str]) -> None:
    status, headers, job = api.call("POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": {"hello": ["world", 1]}})
    assert status == 202, job
    assert headers["Location"] == f"/api/jobs/{job['id']}"
    assert job["status"] == "queued"
    got = api.wait(job["id"])
    assert got["status"] == "succeeded", got
    assert got["attempts"] == 1
    assert got["progress"]["stage"] == "echo"
    assert got["started_at"] and got["finished_at"] and got["heartbeat_at"]
    status, _, result = api.call("GET", f"/api/jobs/{job['id']}/result")
    assert status == 200
    assert result == {"echo": {"hello": ["world", 1]}}
    queue = QueueClient.from_connection_string(env["AzureWebJobsStorage"], env["JOBS_QUEUE"])
    # The host deletes the message once the function returned, i.e. after the job reads succeeded: wait for the
    # delete (bounded). The count includes an invisible message; a peek does not, so it held before the delete too.
    wait_until(lambda: queue.get_queue_properties().approximate_message_count == 0, timeout=60,
               what="the host's delete of the job's message")
    # Every function ran in the worker, a separate process that devhost started.
    assert host.worker_pid not in (None, host.pid)
    assert f"worker pid {host.worker_pid}" in host.logs


def _wait_for_message_delete(proxy: FaultProxy) -> None:
    # The host deletes a job's message after the function returned, i.e. after the job reads succeeded: wait for
    # that write too, not for a time.
    deadline = time.monotonic() + 30
    while not any(w.method == "DELETE" and w.service == "queue" for w in proxy.writes()) and time.monotonic() < deadline:
        time.sleep(0.05)


def _writes_of_one_job(api: Api, proxy: FaultProxy) -> dict[str, int]:
    proxy.reset_counters()
    job = api.submit("echo", input_={"n": 1})
    api.wait(job["id"], until=lambda j: j["status"] == "succeeded")
    _wait_for_message_delete(proxy)
    counts = {s: c.writes for s, c in proxy.counters().items()}
    return counts


def test_storage_writes_per_noop_job_within_budget(api: Api, proxy: FaultProxy) -> None:
    proxy.reset_counters()
    api.wait(api.submit("echo", input_=1)["id"])  # warm: tables, queues, the tenant's row exist
    _wait_for_message_delete(proxy)  # else the warm job's delete lands in the next job's count
    counts = _writes_of_one_job(api, proxy)
    writes = [(w.service, w.method, w.path.split("?")[0]) for w in proxy.writes()]
    print(json.dumps(counts), writes)
    assert sum(counts.values()) <= WRITES_PER_NOOP_JOB, writes
    assert counts["queue"] == 2, writes  # one send, one delete: no visibility renewals or re-sends
