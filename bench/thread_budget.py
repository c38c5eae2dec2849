"""HTTP latency while long attempts hold the runtime's sync thread pool, under Microsoft's runtime (devhost.worker).

    .venv/bin/python bench/thread_budget.py [--requests 200] [--clients 8] [--pools default,16]

For each pool setting (``default``: PYTHON_THREADPOOL_THREAD_COUNT unset, min(32, CPUs + 4) threads, 6 here, 5 on a 1-vCPU Flex
instance; or a number),
one host on a private Azurite serves ``GET /api/jobs/{id}``: first idle, then while 5 ``sleep`` jobs run (host.json
lets ``job_worker`` take batchSize 4 + newBatchThreshold 1 = 5 messages at once, and each attempt holds a pool
thread until the attempt's process ends). A fifth message is received only once the running ones drop to
newBatchThreshold, so five submitted at once start as 4 + 1 later; the bench sets batchSize 5 (an app-setting
override of host.json) to hold five at once. Prints p50/p99 of both and the ratio; the issue's target is p99 with 5
long attempts <= 1.5x idle. Ratios from one run are what to compare: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# bench/platform.py shadows the stdlib ``platform`` module, which the SDKs import: take the bench folder off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
sys.path.insert(0, str(ROOT))

from devhost.azurite import Azurite  # noqa: E402
from devhost.process import HostProcess  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def cpu() -> str:
    info = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = [f for f in ("avx2", "avx512_vnni", "avx_vnni") if f" {f} " in info]
    return f"{model}, {os.cpu_count()} cores, flags {' '.join(flags) or '-'}"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def call(url: str, key: str, method: str = "GET", body: Any = None, timeout: float = 120) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"x-functions-key": key, "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read() or b"null")


TIMEOUT_SECONDS = 20.0


def latencies(url: str, key: str, requests: int, clients: int) -> list[float]:
    """Milliseconds per request; a request not answered within TIMEOUT_SECONDS counts as that long (it is waiting
    for a pool thread that a long attempt holds)."""

    def one(_: int) -> float:
        started = time.perf_counter()
        try:
            status, _ = call(url, key, timeout=TIMEOUT_SECONDS)
            assert status == 200
        except (TimeoutError, urllib.error.URLError):
            return TIMEOUT_SECONDS * 1000
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(requests)))


def run(conn: str, pool: str, requests: int, clients: int) -> tuple[list[float], list[float]]:
    key = "bench-" + secrets.token_hex(4)
    s = secrets.token_hex(4)
    env = {"AzureWebJobsStorage": conn, "DEVHOST_FUNCTION_KEY": key, "DEFAULT_TENANT": "bench",
           "JOBS_TABLE": f"tb{s}", "JOBS_QUEUE": f"tb-{s}", "RESULTS_CONTAINER": f"tb-{s}",
           "CHUNKS_QUEUE": f"tb-{s}-chunks", "CALLBACKS_QUEUE": f"tb-{s}-callbacks", "HEARTBEAT_SECONDS": "5",
           "AzureFunctionsJobHost__extensions__queues__batchSize": "5",
           # The five are submitted one by one: a poll that finds only some of them must not wait, with the rest
           # queued, for the running count to drop to host.json's newBatchThreshold 1 (it never does).
           "AzureFunctionsJobHost__extensions__queues__newBatchThreshold": "4"}
    if pool != "default":
        env["PYTHON_THREADPOOL_THREAD_COUNT"] = pool
    with HostProcess(env=env, args=["--no-timer"]) as host:
        base = host.url + "/api/jobs"
        _, probe = call(base, key, "POST", {"pipeline": "echo", "params": {}, "input": {"text": "x"}})
        url = f"{base}/{probe['id']}"
        latencies(url, key, 20, clients)  # warm-up
        idle = latencies(url, key, requests, clients)
        long_jobs = [call(base, key, "POST", {"pipeline": "sleep", "params": {"seconds": 600, "steps": 600},
                                               "input": None})[1]["id"] for _ in range(5)]
        # Read from the table, not over HTTP: with a small pool the API itself waits behind the attempts.
        from azure.data.tables import TableClient

        rows = TableClient.from_connection_string(conn, env["JOBS_TABLE"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = sum(1 for _ in rows.query_entities("kind eq 'job' and status eq 'running'", select=["RowKey"]))
            if running == 5:
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"pool {pool}: the 5 long jobs did not all start ({running} running)")
        busy = latencies(url, key, requests, clients)
        for j in long_jobs:
            try:
                call(f"{base}/{j}/cancel", key, "POST", timeout=5)
            except (TimeoutError, urllib.error.URLError):
                pass  # the host is stopped next; its grace period ends the attempts
    return idle, busy


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=8)
    # 5: the default on a 1-vCPU Flex instance (min(32, CPUs + 4)); 32: the app's setting.
    p.add_argument("--pools", default="5,32")
    args = p.parse_args()
    print(f"machine: {cpu()}; load average at start {loadavg()}")
    print(f"GET /api/jobs/{{id}}, {args.requests} requests from {args.clients} clients, Microsoft's runtime "
          f"(devhost.worker)\n")
    print("| PYTHON_THREADPOOL_THREAD_COUNT | idle p50 ms | idle p99 ms | 5 long attempts p50 ms | "
          "p99 ms | p99 ratio |\n|---|---|---|---|---|---|")
    az = Azurite.private().start()
    try:
        for pool in args.pools.split(","):
            idle, busy = run(az.connection_string, pool, args.requests, args.clients)
            waited = sum(1 for x in busy if x >= TIMEOUT_SECONDS * 1000)
            print(f"| {pool} (unanswered after {TIMEOUT_SECONDS:.0f} s: {waited}) | {percentile(idle, 50):.1f} | {percentile(idle, 99):.1f} | {percentile(busy, 50):.1f} | "
                  f"{percentile(busy, 99):.1f} | {percentile(busy, 99) / percentile(idle, 99):.2f} |", flush=True)
    finally:
        az.close()
    print(f"\n(load average at the end {loadavg()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
