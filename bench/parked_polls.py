"""What a poll of a queued job costs, parked or not, and what a poller honouring Retry-After spends a minute.

    .venv/bin/python bench/parked_polls.py [--window 2] [--parked 20] [--rounds 200] [--azurite]

On the in-memory fake (its clients count every request as the service would: ``Platform.in_memory``), a tenant
submits ``window + parked`` no-op jobs with ``TENANT_MAX_IN_FLIGHT=window``, so the first ``window`` are queued
with a message and the rest parked. For one windowed job, the first parked one and the last parked one, printed:
storage requests per poll (``JobService.get``: the row, and since review44p the look for the job in its tenant's
wait list), the Retry-After the poll answers, and so the requests a minute of a poller that honours it; beside
them the same with fairness off (one read a poll, Retry-After 1: what every queued job cost before). Also the
client CPU of a poll (mean over ``--rounds``). Counts, not time, are the point: the fake has no latency.
``--azurite`` runs the same on a private Azurite and adds each poll's wall time (p50 / p95, ms), the latency the
look adds to a poll.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows stdlib
sys.path.insert(0, str(_HERE.parent))

from bench.thread_budget import cpu, loadavg  # noqa: E402


def measure(window: int, parked: int, rounds: int, conn: str | None = None) -> list[tuple[str, float, int, float, float, str]]:
    import secrets
    import statistics

    from shared import platform as platform_mod
    from shared.api import polling
    from shared.observability.metering import TransactionMeter

    os.environ["TENANT_MAX_IN_FLIGHT"] = str(window)
    if conn is not None:
        tag = secrets.token_hex(4)
        os.environ.update({"AzureWebJobsStorage": conn, "JOBS_TABLE": f"pp{tag}", "JOBS_QUEUE": f"pp-{tag}",
                           "RESULTS_CONTAINER": f"pp-{tag}", "CHUNKS_QUEUE": f"pp-{tag}-chunks",
                           "CALLBACKS_QUEUE": f"pp-{tag}-callbacks"})
    platform_mod.reset_process()
    p = (platform_mod.Platform.in_memory() if conn is None else platform_mod.Platform.from_settings()).install()
    body = json.dumps({"pipeline": "echo", "params": {}, "input": [1]}).encode()
    ids = [p.service.submit("bench", body, None).job.id for _ in range(window + parked)]
    picks = [("queued, fairness off" if window == 0 else "queued, in the window", ids[0])]
    if window and parked:
        picks += [("parked, place 1", ids[window]), (f"parked, place {parked}", ids[-1])]
    out = []
    for label, job_id in picks:
        meter: TransactionMeter = p.meter
        before = TransactionMeter.billable(meter.snapshot())
        start = time.process_time()
        walls = []
        for _ in range(rounds):
            t = time.perf_counter()
            job = p.service.get("bench", job_id)
            walls.append((time.perf_counter() - t) * 1000)
        cpu_ms = (time.process_time() - start) / rounds * 1000
        per_poll = (TransactionMeter.billable(meter.snapshot()) - before) / rounds
        wait = polling.retry_after(job) or 1
        wall = (f"{statistics.median(walls):.1f} / {statistics.quantiles(walls, n=20)[-1]:.1f}"
                if conn is not None else "-")
        out.append((label, per_poll, wait, per_poll * 60 / wait, cpu_ms, wall))
    platform_mod.reset_process()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--parked", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--azurite", action="store_true", help="on a private Azurite, with each poll's wall time")
    args = ap.parse_args()
    print(f"cpu: {cpu()}; load average {loadavg()}")
    print(f"{'job':<28} {'requests/poll':>13} {'Retry-After':>11} {'requests/min':>12} {'CPU ms/poll':>11} "
          f"{'wall ms p50 / p95':>18}")
    az = None
    if args.azurite:
        from devhost.azurite import Azurite

        az = Azurite.private().start()
    try:
        for window in (0, args.window):
            got = measure(window, args.parked, args.rounds, az.connection_string if az else None)
            for label, per_poll, wait, per_min, cpu_ms, wall in got:
                print(f"{label:<28} {per_poll:>13.2f} {wait:>11} {per_min:>12.1f} {cpu_ms:>11.2f} {wall:>18}")
    finally:
        if az is not None:
            az.close()
    print(f"(load average at the end {loadavg()})")


if __name__ == "__main__":
    main()
