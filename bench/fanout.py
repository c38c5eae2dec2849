"""Scale-out of one map-stage job over 1, 2 and 4 worker host processes.

    .venv/bin/python bench/fanout.py [--chunks 48] [--items-per-chunk 10]

Each worker host runs one chunk at a time (``AzureFunctionsJobHost__extensions__queues__batchSize=1``),
like one instance with per-instance concurrency 1, so adding hosts is adding instances. Two workloads:

* ``cpu``: 20 ms of CPU per item, the shape of local embedding. On this 2-core machine it cannot
  scale past 2 workers: the cores are the bottleneck, not the platform.
* ``wait``: 100 ms of waiting per item, the shape of LLM calls. It scales with workers until
  Azurite or the per-chunk process start-up becomes the bottleneck.

Prints wall time, speed-up and chunks/s per worker count, and where the time went.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

# bench/platform.py shadows the stdlib ``platform`` module: take this folder off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
sys.path.insert(0, str(ROOT))

from devhost.azurite import Azurite  # noqa: E402
from devhost.process import HostProcess  # noqa: E402
from tests.conftest import unique_names  # noqa: E402


def call(url: str, key: str, method: str = "GET", body: object = None) -> dict[str, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"x-functions-key": key, "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def run_once(conn: str, workers: int, params: dict[str, object], numbers: list[int]) -> tuple[float, dict[str, object]]:
    key = "bench-key"
    env = {
        "AzureWebJobsStorage": conn, "DEVHOST_FUNCTION_KEY": key, "DEFAULT_TENANT": "bench",
        "MAX_CHUNKS_IN_FLIGHT_PER_JOB": "16", "HEARTBEAT_SECONDS": "5", "PROGRESS_MIN_INTERVAL_SECONDS": "5",
        "AzureFunctionsJobHost__extensions__queues__batchSize": "1",
        "AzureFunctionsJobHost__extensions__queues__newBatchThreshold": "0",
        "AzureFunctionsJobHost__extensions__queues__maxPollingInterval": "00:00:00.500",
        **unique_names(),
    }
    api = HostProcess(env=env, args=["--no-queue", "--no-timer"]).start()
    hosts = [HostProcess(env=env, args=["--no-http", "--no-timer"]).start() for _ in range(workers)]
    try:
        started = time.perf_counter()
        job = call(api.url + "/api/jobs", key, "POST", {"pipeline": "fanout", "params": params, "input": numbers})
        while True:
            state = call(f"{api.url}/api/jobs/{job['id']}", key)
            if state["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        assert state["status"] == "succeeded", state
        return elapsed, state
    finally:
        for h in (api, *hosts):
            h.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=48)
    parser.add_argument("--items-per-chunk", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    numbers = list(range(args.chunks * args.items_per_chunk))
    workloads = {
        "cpu": {"chunk_size": args.items_per_chunk, "cpu_ms_per_item": 20},
        "wait": {"chunk_size": args.items_per_chunk, "seconds_per_item": 0.1},
    }
    az = Azurite.private().start()
    try:
        print(f"one job: {args.chunks} chunks x {args.items_per_chunk} items; {os.cpu_count()} cores\n")
        print("| workload | worker hosts | wall s | speed-up | chunks/s |\n|---|---|---|---|---|")
        for name, params in workloads.items():
            base = None
            for workers in [int(w) for w in args.workers.split(",")]:
                elapsed, _ = run_once(az.connection_string, workers, params, numbers)
                base = base or elapsed
                print(f"| {name} | {workers} | {elapsed:.1f} | {base / elapsed:.2f}x | {args.chunks / elapsed:.2f} |",
                      flush=True)
    finally:
        az.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
