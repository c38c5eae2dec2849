"""Per-tenant fairness on one host: how long tenant B's first job waits behind tenant A's backlog.

    .venv/bin/python bench/fairness.py [--jobs 500] [--seconds 2] [--windows 0,5] [--timeout 180]

For each window (``TENANT_MAX_IN_FLIGHT``; 0 is fairness off), one devhost host (Microsoft's runtime, host.json:
at most batchSize + newBatchThreshold = 5 attempts at once) on a private Azurite. Tenant A submits ``--jobs``
``sleep`` jobs of ``--seconds`` each over HTTP, then tenant B submits one. Printed: B's wait (its ``started_at``
minus its ``created_at``), one attempt's time (the median of A's finished attempts, claim to finish), their
ratio (the issue's target: B's first job starts within one attempt's time, ratio <= 1), how many of A's jobs
started before B's did, and the submit latency of A's parked jobs. With fairness off B's wait is bounded
below by the deadline when it had not started by then. Timings come from the job rows (the platform's clock).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows stdlib
ROOT = _HERE.parent
sys.path.insert(0, str(ROOT))

from bench.thread_budget import cpu, loadavg  # noqa: E402
from devhost.azurite import Azurite  # noqa: E402
from devhost.process import HostProcess  # noqa: E402


def submit(url: str, key: str, tenant: str, body: dict[str, Any]) -> tuple[str, float]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "x-functions-key": key, "content-type": "application/json", "x-thematiq-tenant": tenant})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        doc = json.loads(resp.read())
    return str(doc["id"]), time.perf_counter() - start


def run(conn: str, window: int, jobs: int, seconds: float, timeout: float) -> dict[str, Any]:
    from azure.data.tables import TableClient

    key = "bench-" + secrets.token_hex(4)
    s = secrets.token_hex(4)
    env = {"AzureWebJobsStorage": conn, "DEVHOST_FUNCTION_KEY": key, "DEFAULT_TENANT": "tenant-a",
           "JOBS_TABLE": f"fb{s}", "JOBS_QUEUE": f"fb-{s}", "RESULTS_CONTAINER": f"fb-{s}",
           "CHUNKS_QUEUE": f"fb-{s}-chunks", "CALLBACKS_QUEUE": f"fb-{s}-callbacks", "HEARTBEAT_SECONDS": "5",
           "TENANT_MAX_IN_FLIGHT": str(window)}
    body = {"pipeline": "sleep", "params": {"seconds": seconds, "steps": 1}, "input": None}
    rows = TableClient.from_connection_string(conn, env["JOBS_TABLE"])
    with HostProcess(env=env, args=["--no-timer"]) as host:
        url = host.url + "/api/jobs"
        with ThreadPoolExecutor(8) as pool:
            a = list(pool.map(lambda _: submit(url, key, "tenant-a", body), range(jobs)))
        b_id, b_latency = submit(url, key, "tenant-b", body)
        deadline = time.monotonic() + timeout
        b_row: Any = None
        while time.monotonic() < deadline:
            b_row = rows.get_entity("tenant-b", b_id) if _exists(rows, "tenant-b", b_id) else None
            if b_row is not None and b_row.get("started_at") is not None:
                break
            time.sleep(0.5)
        a_rows = list(rows.query_entities("PartitionKey eq 'tenant-a' and kind eq 'job'",
                                          select=["RowKey", "started_at", "finished_at", "created_at"]))
    done = [(r["finished_at"] - r["started_at"]).total_seconds() for r in a_rows
            if r.get("finished_at") and r.get("started_at")]
    started_b = b_row is not None and b_row.get("started_at") is not None
    b_wait = ((b_row["started_at"] - b_row["created_at"]).total_seconds() if started_b else timeout)
    b_started_at = b_row["started_at"] if started_b else None
    ahead = sum(1 for r in a_rows if r.get("started_at") and (b_started_at is None or r["started_at"] < b_started_at))
    return {"window": window, "b_wait": b_wait, "b_started": started_b,
            "attempt": statistics.median(done) if done else float("nan"), "a_done": len(done), "ahead": ahead,
            "a_submit_p50_ms": 1000 * statistics.median(t for _, t in a),
            "a_submit_max_ms": 1000 * max(t for _, t in a), "b_submit_ms": 1000 * b_latency}


def _exists(rows: Any, pk: str, rk: str) -> bool:
    return any(True for _ in rows.query_entities("PartitionKey eq @p and RowKey eq @r",
                                                 parameters={"p": pk, "r": rk}, select=["RowKey"]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--windows", default="0,5")
    p.add_argument("--timeout", type=float, default=180.0)
    args = p.parse_args()
    print(f"machine: {cpu()}; load average at start {loadavg()}")
    print(f"tenant A: {args.jobs} sleep jobs of {args.seconds} s, then tenant B: 1; one devhost host (5 attempts at "
          f"once)\n")
    print("| TENANT_MAX_IN_FLIGHT | B's wait s | one attempt s (median) | wait / attempt | A's jobs started "
          "before B | A submit p50 / max ms | B submit ms |\n|---|---|---|---|---|---|---|")
    az = Azurite.private().start()
    try:
        for window in (int(w) for w in args.windows.split(",")):
            r = run(az.connection_string, window, args.jobs, args.seconds, args.timeout)
            wait = f"{r['b_wait']:.1f}" if r["b_started"] else f"> {r['b_wait']:.0f} (not started)"
            print(f"| {window} | {wait} | {r['attempt']:.2f} | {r['b_wait'] / r['attempt']:.2f} | {r['ahead']} | "
                  f"{r['a_submit_p50_ms']:.0f} / {r['a_submit_max_ms']:.0f} | {r['b_submit_ms']:.0f} |", flush=True)
    finally:
        az.close()
    print(f"\n(load average at the end {loadavg()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
