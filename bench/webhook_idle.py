"""Idle storage cost with webhooks configured, with 0 and with 10,000 finished jobs in the table.

    .venv/bin/python bench/webhook_idle.py [--finished 0,10000] [--runs 3]

An idle hour is 12 reaper runs (the active-jobs index), 12 webhook sweeps (the webhook index) and 1/24 of
the reaper's daily full sweep. Each is run ``--runs`` times against a private Azurite behind the counting
proxy (every request it forwards) with the meter on too (shared.observability.metering, what Azure bills).
The finished jobs all had webhooks, delivered, so a sweep that scanned them would show it; one tenant.
Target: reaper + webhook sweep <= 150 operations per idle hour, the same with 0 and 10,000 finished jobs.
The webhook sweep's daily heal is measured twice: as the first days after a deploy run it (a cross-partition query,
which Azurite answers in one page and Azure pages per 1,000 rows scanned) and once it is recorded done (platform46).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

# bench/platform.py shadows the stdlib ``platform`` module, which the SDKs import: take bench/ off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
sys.path.insert(0, str(ROOT))

from devhost.azurite import Azurite  # noqa: E402
from devhost.faultproxy import FaultProxy  # noqa: E402


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu() -> str:
    text = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return f"{model}; flags: {' '.join(f for f in ('avx2', 'avx512_vnni', 'avx_vnni') if f' {f}' in flags) or 'none'}"


def _use(conn: str, table: str) -> None:
    os.environ.update({"AzureWebJobsStorage": conn, "DEFAULT_TENANT": "bench", "JOBS_TABLE": table,
                       "JOBS_QUEUE": table + "-q", "RESULTS_CONTAINER": table + "-r", "CHUNKS_QUEUE": table + "-c",
                       "CALLBACKS_QUEUE": table + "-w", "WEBHOOK_SECRET": "bench-secret"})
    from shared.config import settings
    from shared.storage import connections

    settings.get_settings.cache_clear()
    connections.reset_clients()


def fill(conn: str, table: str, n: int) -> None:
    """``n`` finished jobs whose webhooks were delivered, written straight to Azurite (not counted)."""
    from azure.data.tables import TableServiceClient

    from shared.config.constants import KIND_TENANT, TENANTS_PARTITION
    from shared.core.jobs import Job, Status, new_job_id

    client = TableServiceClient.from_connection_string(conn).create_table_if_not_exists(table)
    client.upsert_entity({"PartitionKey": TENANTS_PARTITION, "RowKey": "bench", "kind": KIND_TENANT})
    done = datetime.now(UTC) - timedelta(hours=1)
    batch = []
    for i in range(n):
        job = Job(tenant="bench", id=new_job_id(1_700_000_000_000 + i), pipeline="echo", status=Status.SUCCEEDED,
                  params={}, created_at=done, available_at=done, max_attempts=3, finished_at=done,
                  callback_url="https://hooks.example.com/x", callback_status="delivered", callback_attempts=1)
        batch.append(("create", job.to_entity()))
        if len(batch) == 100:
            client.submit_transaction(batch)
            batch = []
    if batch:
        client.submit_transaction(batch)


def measure(proxy: FaultProxy, finished: int, runs: int) -> dict[str, float]:
    table = f"benchwh{finished}"
    fill(AZ.connection_string, table, finished)
    _use(proxy.connection_string, table)
    from shared.observability.metering import METER, TransactionMeter
    from shared.platform import Platform

    Platform.from_settings().reaper().run()  # the first run is the daily full sweep; it records itself
    out: dict[str, float] = {}
    proxy.reset_counters()
    Platform.from_settings().webhook_sender.sweep()  # the first sweep of the day also heals the index (one cross-partition query)
    t = proxy.totals()
    out["webhook sweep, first of the day"] = float(t.reads + t.writes)
    # Since platform46 the heal stops once HEAL_CLEAN_RUNS heals in a row found nothing: the days after, as the cursor
    # row says (its last heal a day ago), with the clean heals but the last already counted.
    from shared.runtime.webhooks import HEAL_CLEAN_RUNS, HEAL_EVERY
    from shared.storage.webhook_store import WebhookStore

    def a_day_later(clean: int) -> None:
        store = WebhookStore.of(Platform.from_settings().stores)
        store.set_cursor(healed_at=datetime.now(UTC) - HEAL_EVERY - timedelta(minutes=1), heals_clean=clean)

    a_day_later(HEAL_CLEAN_RUNS - 1)
    Platform.from_settings().webhook_sender.sweep()  # the last clean heal: recorded done
    done = WebhookStore.of(Platform.from_settings().stores).cursor().heal_done_at is not None
    a_day_later(HEAL_CLEAN_RUNS)
    proxy.reset_counters()
    Platform.from_settings().webhook_sender.sweep()
    t = proxy.totals()
    out["webhook sweep, first of the day once healed"] = float(t.reads + t.writes) if done else float("nan")
    for name, fn in (("reaper index run", lambda: Platform.from_settings().reaper(sweep=False).run()),
                     ("webhook sweep", lambda: Platform.from_settings().webhook_sender.sweep()),
                     ("reaper full sweep", lambda: Platform.from_settings().reaper(sweep=True).run())):
        proxy.reset_counters()
        METER.reset()
        for _ in range(runs):
            fn()
        t = proxy.totals()
        out[name] = (t.reads + t.writes) / runs
        out[name + " (meter)"] = TransactionMeter.billable(METER.snapshot()) / runs
    return out


AZ: Azurite


def main() -> int:
    global AZ
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finished", default="0,10000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"cpu: {cpu()}\nload average at start: {loadavg()}\n")
    AZ = Azurite.private().start()
    proxy = FaultProxy(AZ).open()
    try:
        print("| finished jobs in the table | reaper index run | webhook sweep | reaper full sweep (daily) | "
              "webhook sweep with its daily heal | the same once the heal is recorded done (platform46) | "
              "reaper + webhook sweep per idle hour (target ≤ 150) | with the daily runs' 1/24 |")
        print("|---|---|---|---|---|---|---|---|")
        for n in (int(x) for x in args.finished.split(",")):
            m = measure(proxy, n, args.runs)
            hourly = 12 * m["reaper index run"] + 12 * m["webhook sweep"]
            print(f"| {n:,} | {m['reaper index run']:.1f} (meter {m['reaper index run (meter)']:.1f}) | "
                  f"{m['webhook sweep']:.1f} (meter {m['webhook sweep (meter)']:.1f}) | "
                  f"{m['reaper full sweep']:.0f} | {m['webhook sweep, first of the day']:.0f} | "
                  f"{m['webhook sweep, first of the day once healed']:.0f} | **{hourly:.0f}** | "
                  f"{hourly + (m['reaper full sweep'] + m['webhook sweep, first of the day once healed']) / 24:.0f} |")
    finally:
        proxy.close()
        AZ.close()
    print(f"\nload average at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
