"""The chaos outcome table: echo jobs through a fault proxy at several write-drop rates (issue 11, Proof).

    .venv/bin/python bench/chaos.py                          # 30 jobs per rate, 0/5/12/25 % (~2-6 min on 2 cores)
    .venv/bin/python bench/chaos.py --jobs 60 --deadline 300 # the issue's full size
    .venv/bin/python bench/chaos.py --rates 12 --json out.json

For each drop rate it starts a fault proxy in front of one private Azurite, an API host and a worker host, submits
``--jobs`` echo jobs with their own Idempotency-Key from a retrying client, waits up to ``--deadline`` seconds and
counts what happened (``tests/e2e/fault/test_chaos.py:run_chaos``). Table writes are dropped after commit at the given
rate and refused (503) at ``--refuse``; queue and blob writes at a third of the drop rate and 2 % refused. A rate of 0
turns every fault off (the baseline).

Columns: submitted keys, accepted keys (answered 200/202), jobs (rows the API lists or answered with), succeeded,
failed, stuck (queued/running/retrying at the deadline), run twice (a job whose pipeline ran more than once),
attempts>1, dup keys (keys with more than one job), restarted (a host process exited), wall s (submission to all
terminal, or the deadline), then the proxy's dropped/refused counts per service and all writes it saw.

    .venv/bin/python bench/chaos.py --webhooks               # webhook faults only (~1-2 min)

``--webhooks`` runs the webhook scenario instead (in this process, on a private Azurite, through the test fault
injection): finished jobs whose webhooks go half to a receiver that accepts and never answers, half to one that
answers 200, while the table refuses the first ``--webhook-jobs`` writes of a webhook's record (so deliveries fail
on their record, are delivered again, and some are poisoned after 5 deliveries). A stand-in host delivers the
webhooks queue (8 at a time, 5 deliveries then poison) and the sweep runs with the platform clock moved past each
window. Columns: receiver, jobs, delivered, retrying/pending (still indexed: will be retried), failed, lost (not
settled, no index row: never retried, must be 0), slowest attempt (must stay within the 15 s deadline), poisoned
messages, sweep re-sends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# bench/platform.py shadows the stdlib ``platform`` module (which the SDKs import via
# uuid): take the bench folder off the path before anything else loads.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from devhost.azurite import Azurite  # noqa: E402
from tests.e2e.fault.test_chaos import default_faults, describe, outcome_table, run_chaos, violations  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30, help="echo jobs (keys) per rate (default 30)")
    parser.add_argument("--deadline", type=float, default=90.0, help="seconds to wait for all jobs per rate (default 90)")
    parser.add_argument("--rates", default="0,5,12,25", help="table drop rates in percent (default 0,5,12,25)")
    parser.add_argument("--refuse", type=float, default=5.0, help="table writes refused with 503, percent (default 5)")
    parser.add_argument("--clients", type=int, default=6, help="concurrent submitting clients (default 6)")
    parser.add_argument("--seed", type=int, default=11, help="the proxy's RNG seed")
    parser.add_argument("--heal-after", type=float, default=None, help="turn faults off this many seconds in")
    parser.add_argument("--queued-stale", type=float, default=900, help="QUEUED_STALE_SECONDS of the hosts (900)")
    parser.add_argument("--verbose", action="store_true", help="print each run's details as it finishes")
    parser.add_argument("--json", type=Path, help="also write every outcome to this file")
    parser.add_argument("--webhooks", action="store_true", help="run the webhook fault scenario instead")
    parser.add_argument("--webhook-jobs", type=int, default=8, help="jobs with webhooks in that scenario (default 8)")
    parser.add_argument("--webhook-refusals", type=int, default=None,
                        help="record writes the table refuses (default 5 per job: enough to poison messages)")
    args = parser.parse_args(argv)
    if args.webhooks:
        refusals = args.webhook_refusals if args.webhook_refusals is not None else 5 * args.webhook_jobs
        return webhook_main(args.webhook_jobs, args.deadline, refusals)
    rates = [float(r) / 100 for r in args.rates.split(",") if r.strip()]

    az = Azurite.private().start()
    outcomes = []
    t0 = time.monotonic()
    try:
        for rate in rates:
            faults = default_faults(rate, args.refuse / 100 if rate else 0.0)
            print(f"chaos: drop {rate:.0%}, {args.jobs} jobs ...", file=sys.stderr, flush=True)
            outcome = run_chaos(
                az.connection_string,
                n_jobs=args.jobs,
                faults=faults,
                deadline_s=args.deadline,
                clients=args.clients,
                seed=args.seed,
                heal_after_s=args.heal_after,
                extra_env={"QUEUED_STALE_SECONDS": str(int(args.queued_stale))},
            )
            outcome["violations"] = violations(outcome)
            outcomes.append(outcome)
            if args.verbose:
                print(describe(outcome), file=sys.stderr, flush=True)
    finally:
        az.close()
    print(
        f"\nchaos: {args.jobs} echo jobs per rate, Table refuse {args.refuse:g} % (queue/blob: drop/3, refuse 2 %), "
        f"deadline {args.deadline:g} s, seed {args.seed}, {time.monotonic() - t0:.0f} s in all\n"
    )
    print(outcome_table(outcomes))
    print()
    for o in outcomes:
        verdict = "holds" if not o["violations"] else "BROKEN: " + "; ".join(v[:160] for v in o["violations"])
        print(f"- drop {o['faults']['table'][0]:.0%}: {verdict}")
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=2, default=str))
    return 0


# -- webhook faults: a receiver that hangs, a table that refuses the record write ----------------------------
def _receivers() -> dict[str, str]:
    import socket
    import threading

    urls: dict[str, str] = {}
    for kind in ("hang", "ok"):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)

        def serve(listener: socket.socket = listener, kind: str = kind) -> None:
            held = []
            while True:
                conn, _ = listener.accept()
                conn.recv(65536)
                if kind == "ok":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    conn.close()
                else:
                    held.append(conn)  # accepted, read, never answered

        threading.Thread(target=serve, daemon=True).start()
        urls[kind] = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    return urls


def webhook_main(n_jobs: int, deadline_s: float, refusals: int) -> int:
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from datetime import UTC, datetime, timedelta

    az = Azurite.private().start()
    t0 = time.monotonic()
    try:
        from tests.conftest import unique_names

        os.environ.update({"AzureWebJobsStorage": az.connection_string, "DEFAULT_TENANT": "local",
                           "WEBHOOK_SECRET": "chaos-secret", "WEBHOOK_ALLOW_PRIVATE": "true",
                           "CALLBACKS_QUEUE": "chaos-webhooks", **unique_names()})
        from shared.config.settings import get_settings
        from shared.core import jobs as jobs_module
        from shared.core.jobs import Job, Status, new_job_id
        from shared.core.registry import default_registry
        from shared.core.webhooks import SWEEP_AFTER, WebhookMessage, WebhookStatus, delivery_id
        from shared.platform import Platform, reset_process, use
        from shared.runtime import webhooks as runtime
        from shared.storage.webhook_store import IndexRow, WebhookStore, index_key
        from tests.support.backends import azurite_backend

        reset_process()  # the settings just set, fresh clients
        offset = [0.0]  # the platform clock runs ahead of real time so the sweep's windows pass in seconds
        backend = azurite_backend(az.connection_string)
        use(Platform(backend.stores, default_registry(), clock=lambda: datetime.now(UTC) + timedelta(seconds=offset[0])))
        store = WebhookStore.of(backend.stores)
        urls = _receivers()
        made: dict[str, str] = {}
        for i in range(n_jobs):
            kind = "hang" if i % 2 == 0 else "ok"
            now = jobs_module.utcnow()
            job_id = new_job_id()
            store.put_index_row(IndexRow("local", job_id, due_at=now + SWEEP_AFTER))
            backend.stores.jobs.create(Job(tenant="local", id=job_id, pipeline="echo", status=Status.SUCCEEDED,
                                           params={}, created_at=now, available_at=now, max_attempts=3,
                                           finished_at=now, callback_url=urls[kind], callback_status="pending"))
            made[job_id] = kind
        # The table refuses the first ``refusals`` record writes (503 on each of the SDK's 3 tries).
        rule = backend.faults.arm("table", "refuse", contains='"callback_status"', count=refusals * 3)
        slowest = {"hang": 0.0, "ok": 0.0}
        poisoned = [0]
        raised = [0]
        resent = [0]
        lock = threading.Lock()
        sender = runtime.WebhookSender(backend.stores)
        for job_id in made:
            job = backend.stores.jobs.get("local", job_id)
            backend.stores.messages.send(WebhookMessage("local", job_id, delivery_id(job)))  # to CALLBACKS_QUEUE
        queue = backend.raw_queue(get_settings().callbacks_queue)

        def deliver(msg: object) -> None:
            started = time.monotonic()
            text = msg.content  # type: ignore[attr-defined]
            kind = "ok"
            try:
                kind = made.get(json.loads(__import__("base64").b64decode(text)).get("j"), "ok")
                sender.handle(__import__("base64").b64decode(text).decode())
                queue.delete_message(msg)
            except Exception:  # the host's view: the function failed, the message comes back
                with lock:
                    raised[0] += 1
                if msg.dequeue_count >= 5:  # type: ignore[attr-defined]
                    queue.delete_message(msg)
                    with lock:
                        poisoned[0] += 1
                else:
                    queue.update_message(msg, visibility_timeout=1)
            with lock:
                slowest[kind] = max(slowest[kind], time.monotonic() - started)

        end = time.monotonic() + deadline_s
        next_sweep = time.monotonic() + 10
        with ThreadPoolExecutor(8) as pool:
            while time.monotonic() < end:
                batch = list(queue.receive_messages(messages_per_page=8, max_messages=8, visibility_timeout=60))
                list(pool.map(deliver, batch))
                if time.monotonic() >= next_sweep:
                    offset[0] += runtime.window(runtime.MAX_SWEEPS).total_seconds() + 60
                    resent[0] += len(sender.sweep().resent)
                    next_sweep = time.monotonic() + 10
                if not batch:
                    time.sleep(0.5)
        indexed = store.keys()
        counts: dict[str, dict[str, int]] = {k: {"jobs": 0, "delivered": 0, "open": 0, "failed": 0, "lost": 0}
                                             for k in ("hang", "ok")}
        for job_id, kind in made.items():
            job = backend.stores.jobs.get("local", job_id)
            status = WebhookStatus.of(job)
            c = counts[kind]
            c["jobs"] += 1
            if status == WebhookStatus.DELIVERED:
                c["delivered"] += 1
            elif status == WebhookStatus.FAILED:
                c["failed"] += 1
            elif index_key("local", job_id) in indexed:
                c["open"] += 1
            else:
                c["lost"] += 1
        print(f"\nwebhook chaos: {n_jobs} jobs, {refusals} record writes refused, {deadline_s:g} s, load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}, "
              f"{time.monotonic() - t0:.0f} s in all\n")
        print("| receiver | jobs | delivered | retrying/pending (indexed) | failed | lost | slowest delivery s |")
        print("|---|---|---|---|---|---|---|")
        for kind, c in counts.items():
            print(f"| {kind} | {c['jobs']} | {c['delivered']} | {c['open']} | {c['failed']} | {c['lost']} | "
                  f"{slowest[kind]:.1f} |")
        print(f"\ndeliveries that failed (record refused): {raised[0]}; messages poisoned after 5 deliveries: "
              f"{poisoned[0]}; webhooks re-sent by the sweep: {resent[0]}; refusals left unused: {rule.count // 3}")
        broken = [k for k, c in counts.items() if c["lost"]] + (["slow"] if max(slowest.values()) > 16 else [])
        print("\n- " + ("holds: no webhook lost, every attempt within the deadline" if not broken
                        else f"BROKEN: {broken}"))
        return 1 if broken else 0
    finally:
        az.close()


if __name__ == "__main__":
    raise SystemExit(main())
