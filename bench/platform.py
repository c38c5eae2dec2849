"""Platform benchmark: storage transactions per no-op job, submit latency, worker throughput.

    .venv/bin/python bench/platform.py [--jobs 200] [--requests 400]

Prints three tables. Everything runs against a private Azurite on this machine,
so absolute latencies are Azurite's and this machine's; the transaction count
is exact and is what Azure bills.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# This file's name shadows the stdlib ``platform`` module, which the SDKs
# import; take the bench folder off the path before they load.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devhost.azurite import Azurite  # noqa: E402
from devhost.process import HostProcess  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def transactions_per_job(conn: str, n: int = 20) -> dict[str, float]:
    """Run no-op jobs in-process through the real functions, counting every Storage request."""
    os.environ.update({"AzureWebJobsStorage": conn, "DEFAULT_TENANT": "bench", "JOBS_TABLE": "benchtx",
                       "JOBS_QUEUE": "bench-tx", "RESULTS_CONTAINER": "bench-tx"})
    from shared.config import settings
    from shared.observability.metering import METER, TransactionMeter
    from shared.storage import connections
    from tests.platform.direct import http, run_worker_once

    settings.get_settings.cache_clear()
    connections.reset_clients()
    http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": 0})  # creates table/queue/container
    run_worker_once()
    METER.reset()
    for i in range(n):
        assert http("submit_job", "POST", "jobs", body={"pipeline": "echo", "input": {"i": i}}).status_code == 202
        run_worker_once()
    counts = METER.snapshot()
    per_op = {k: v / n for k, v in sorted(counts.items())}
    per_op["total (billable)"] = TransactionMeter.billable(counts) / n
    return per_op


def post(url: str, key: str, body: dict[str, object]) -> float:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"x-functions-key": key, "content-type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        assert resp.status == 202
    return (time.perf_counter() - started) * 1000


def submit_latency(api: HostProcess, key: str, requests: int, clients: int) -> tuple[float, float, float]:
    url = api.url + "/api/jobs"
    body = {"pipeline": "echo", "params": {}, "input": {"text": "a short survey answer"}}
    with ThreadPoolExecutor(clients) as pool:
        started = time.perf_counter()
        latencies = list(pool.map(lambda _: post(url, key, body), range(requests)))
        elapsed = time.perf_counter() - started
    return percentile(latencies, 50), percentile(latencies, 99), requests / elapsed


def count_terminal(conn: str, table: str) -> int:
    from azure.data.tables import TableClient

    client = TableClient.from_connection_string(conn, table)
    return sum(1 for e in client.query_entities("kind eq 'job' and status eq 'succeeded'", select=["RowKey"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200, help="no-op jobs for the throughput run")
    parser.add_argument("--requests", type=int, default=400, help="submissions per latency run")
    args = parser.parse_args()

    az = Azurite.private().start()
    try:
        print("## Storage transactions per no-op (echo) job, end to end\n")
        per_op = transactions_per_job(az.connection_string)
        print("| operation | per job |\n|---|---|")
        for op, v in per_op.items():
            print(f"| {op} | {v:.2f} |")

        key = "bench-key"
        env = {"AzureWebJobsStorage": az.connection_string, "DEVHOST_FUNCTION_KEY": key, "DEFAULT_TENANT": "bench",
               "JOBS_TABLE": "benchjobs", "JOBS_QUEUE": "bench-jobs", "RESULTS_CONTAINER": "bench-jobs"}
        print("\n## POST /api/jobs latency through the local host (API only, no worker)\n")
        print("| concurrent clients | requests | p50 ms | p99 ms | requests/s |\n|---|---|---|---|---|")
        with HostProcess(env=env, args=["--no-queue", "--no-timer"]) as api:
            for clients in (1, 20):
                n = args.requests if clients > 1 else args.requests // 2
                p50, p99, rps = submit_latency(api, key, n, clients)
                print(f"| {clients} | {n} | {p50:.1f} | {p99:.1f} | {rps:.0f} |")
            already = count_terminal(az.connection_string, "benchjobs")
            for _ in range(args.jobs - (args.requests + args.requests // 2)):
                post(api.url + "/api/jobs", key, {"pipeline": "echo", "input": 1})
        queued = max(args.jobs, args.requests + args.requests // 2)

        print("\n## No-op jobs per second through one worker host process\n")
        started = time.perf_counter()
        with HostProcess(env=env, args=["--no-http", "--no-timer"]):
            while count_terminal(az.connection_string, "benchjobs") - already < queued:
                time.sleep(0.5)
            elapsed = time.perf_counter() - started
        print("| jobs | seconds | jobs/s |\n|---|---|---|")
        print(f"| {queued} | {elapsed:.1f} | {queued / elapsed:.2f} |")
        print(f"\n(machine: {os.cpu_count()} cores; one run; the machine is noisy, rerun for variance)")
    finally:
        az.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
