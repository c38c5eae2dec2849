"""One tenant's dead receiver and everyone else's webhooks: the other tenants' delivery delay and the operations per
delivery, without and with the per-tenant receiver circuit (webhooks45), as a simulation on an injected clock.

    .venv/bin/python bench/webhook_fairness.py [--dead 1000] [--places 5] [--hours 24] [--every 600]

The production ``WebhookSender`` runs over the in-memory fake storage (``shared.storage.fake``, which counts every
request as Azure would bill it). Time is simulated: the platform clock (``shared.core.jobs.set_clock``) is moved by
a discrete-event loop with ``--places`` deliveries at once (``batchSize + newBatchThreshold`` = 5 on one instance);
the callbacks queue is the FIFO of (visible at, sent). A receiver that never answers takes the exchange deadline
(15 s); one that answers takes 50 ms; each storage request 10 ms. At t = 0 ``--dead`` jobs of one tenant end, its
receiver dead; then one job of another tenant ends every ``--every`` seconds for ``--hours``. The circuit's view is
updated when an attempt ends in simulated time, not when the loop runs it, so what a place learns is what it could
know. Printed: the other tenants' first-delivery delay (max, median), the dead tenant's sender hours, and the
storage operations per delivery attempt and per webhook.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import itertools
import os
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]  # bench/platform.py shadows the stdlib's
sys.path.insert(0, str(_HERE.parent))

os.environ.update({"DEFAULT_TENANT": "bench", "WEBHOOK_SECRET": "bench-secret", "WEBHOOK_ALLOW_PRIVATE": "false"})

from shared.config.settings import get_settings  # noqa: E402
from shared.core import webhooks as core  # noqa: E402
from shared.core.jobs import Job, Status, new_job_id, set_clock  # noqa: E402
from shared.core.ports import Stores  # noqa: E402
from shared.core.webhooks import WebhookMessage, delivery_id  # noqa: E402
from shared.runtime import webhook_circuit  # noqa: E402
from shared.runtime.webhook_circuit import ReceiverCircuit, Ticket  # noqa: E402
from shared.runtime.webhooks import EXCHANGE_DEADLINE_SECONDS, DeliveryOutcome, WebhookSender  # noqa: E402
from shared.storage.blobs import BlobStore  # noqa: E402
from shared.storage.chunk_store import ChunkStore  # noqa: E402
from shared.storage.fake import FakeClock, FakeStorage  # noqa: E402
from shared.storage.job_store import JobStore  # noqa: E402
from shared.storage.queues import Queues  # noqa: E402

OP_SECONDS = 0.010
ANSWER_SECONDS = 0.050
START = datetime(2026, 12, 7, tzinfo=UTC)


def cpu() -> str:
    text = Path("/proc/cpuinfo").read_text()
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return f"{model}; flags: {' '.join(f for f in ('avx2', 'avx512_vnni', 'avx_vnni') if f' {f}' in flags) or 'none'}"


PUBLIC = "93.184.216.34"
core._resolve = lambda host, port: [PUBLIC]  # no DNS in a simulation: every host is public


class Sim:
    def __init__(self, circuit: bool, places: int) -> None:
        get_settings.cache_clear()
        self.fake = FakeStorage(FakeClock(START))
        set_clock(self.fake.clock.now)
        s = get_settings()
        self.stores = Stores(
            jobs=JobStore(table=self.fake.table(s.jobs_table)), chunks=ChunkStore(table=self.fake.table(s.jobs_table)),
            messages=Queues(queue_for=lambda name: self.fake.queue(name or s.jobs_queue)),
            blobs=BlobStore(container=self.fake.container(s.results_container)),
        )
        self.t0 = START.timestamp()
        self.t = self.t0  # when the message being handled started
        self.elapsed = 0.0  # how long its POST took (simulated)
        self.queue: list[tuple[float, int, str]] = []
        self.seq = itertools.count()
        self.places = [self.t0] * places
        self.pending: list[tuple[float, int, Ticket, bool | None]] = []
        self.dead_seconds = 0.0
        self.ended: dict[str, float] = {}
        self.delays: dict[str, float] = {}
        self.attempts: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.sends = 0
        sim = self

        class Deferred(ReceiverCircuit):
            """What an attempt taught the circuit counts from when it ended, in simulated time."""

            def admit(self, tenant: str, host: str) -> Ticket | None:
                sim.flush()
                if not circuit:
                    return Ticket(tenant, host, False, sim.now())
                return super().admit(tenant, host)

            def done(self, ticket: Ticket, ok: bool | None) -> None:
                heapq.heappush(sim.pending, (sim.now(), next(sim.seq), ticket, ok))

        self.circuit = Deferred(self.now)
        self.sender = WebhookSender(self.stores, transport=self.transport, send=self.send, clock=self.now,
                                    circuit=self.circuit)

    def now(self) -> float:
        return self.t + self.elapsed

    def flush(self) -> None:
        saved = self.elapsed
        while self.pending and self.pending[0][0] <= self.t:
            at, _, ticket, ok = heapq.heappop(self.pending)
            self.elapsed = at - self.t
            ReceiverCircuit.done(self.circuit, ticket, ok)
        self.elapsed = saved

    def transport(self, url: str, addresses: list[str], body: bytes, headers: dict[str, str]) -> DeliveryOutcome:
        if "dead" in url:
            self.elapsed += EXCHANGE_DEADLINE_SECONDS
            return DeliveryOutcome(False, "failed: no complete answer within 15 s")
        self.elapsed += ANSWER_SECONDS
        return DeliveryOutcome(True, "HTTP 204")

    def send(self, msg: WebhookMessage, delay: float) -> None:
        self.sends += 1  # a queue request, as the callbacks queue bills it
        heapq.heappush(self.queue, (self.now() + delay, next(self.seq), msg.encode()))

    def end_job(self, tenant: str, url: str, at: float) -> None:
        jid = new_job_id(int(at * 1000))
        finished = datetime.fromtimestamp(at, UTC)
        job = self.stores.jobs.create(Job(
            tenant=tenant, id=jid, pipeline="echo", status=Status.SUCCEEDED, params={}, created_at=finished,
            available_at=finished, max_attempts=3, finished_at=finished, callback_url=url, callback_status="pending"))
        if tenant != "dead":
            self.ended[jid] = at
        heapq.heappush(self.queue, (at, next(self.seq), WebhookMessage(tenant, jid, delivery_id(job), 1, at).encode()))

    def run(self, until: float) -> None:
        while self.queue:
            free = heapq.heappop(self.places)
            at, _, text = heapq.heappop(self.queue)
            self.t, self.elapsed = max(free, at), 0.0
            if self.t > until:
                break
            self.fake.clock.advance(self.t - self.fake.clock.now().timestamp())
            msg = WebhookMessage.decode(text)
            before, sends = self.fake.ops(), self.sends
            outcome = self.sender.handle(text)
            ops = self.fake.ops() - before
            n = sum(ops.values()) + self.sends - sends
            kind = "dead" if msg.tenant == "dead" else "other"
            self.ops[kind] += n
            self.attempts[kind] += 1
            busy = self.elapsed + n * OP_SECONDS
            if kind == "dead":
                self.dead_seconds += busy
            elif outcome == "delivered" and msg.job_id not in self.delays:
                self.delays[msg.job_id] = self.t + busy - self.ended[msg.job_id]
            heapq.heappush(self.places, self.t + busy)


def simulate(circuit: bool, dead: int, places: int, hours: float, every: float) -> dict[str, float]:
    sim = Sim(circuit, places)
    from shared.api.webhook_secrets import WebhookSecrets

    for tenant in ("dead", "other"):
        WebhookSecrets(sim.stores).create(tenant)
    for _ in range(dead):
        sim.end_job("dead", "https://dead.example.com/h", sim.t0)
    n_other = int(hours * 3600 // every)
    for i in range(n_other):
        sim.end_job("other", "https://ok.example.com/h", sim.t0 + 1 + i * every)
    wall = time.perf_counter()
    sim.run(sim.t0 + hours * 3600 + 3600)
    delays = [sim.delays.get(j, float("inf")) for j in sim.ended]
    done = [d for d in delays if d != float("inf")]
    return {
        "others": n_other, "others_delivered": len(done),
        "max_delay_s": max(delays) if delays else 0.0,
        "median_delay_s": statistics.median(delays) if delays else 0.0,
        "first_other_delay_s": delays[0] if delays else 0.0,
        "dead_sender_hours": sim.dead_seconds / 3600,
        "dead_attempts": sim.attempts["dead"], "dead_ops_per_attempt": sim.ops["dead"] / max(1, sim.attempts["dead"]),
        "other_ops_per_delivery": sim.ops["other"] / max(1, sim.attempts["other"]),
        "wall_s": time.perf_counter() - wall,
    }


def sweep_in_flight(in_flight: int, before: bool) -> dict[str, float]:
    """One tenant with ``in_flight`` jobs with webhooks still running (their rows looked at once already, as the
    sweep does), then one of its jobs ends and its first message is lost: how long until the sweep re-sends it,
    and the sweep's storage operations a run. ``before``: rows of jobs in flight due again every 5 minutes and no
    "due" write at the terminal write (the sweep before webhooks45, emulated on today's code)."""
    from shared.core.lifecycle import Ending, Lifecycle
    from shared.storage.webhook_store import IndexRow, WebhookStore

    sim = Sim(True, 1)
    store = WebhookStore.of(sim.stores)
    now = sim.fake.clock.now()
    jobs = []
    for i in range(in_flight):
        jid = new_job_id(int(now.timestamp() * 1000) - 1000 - i)
        store.put_index_row(IndexRow("busy", jid, due_at=now))
        jobs.append(sim.stores.jobs.create(Job(
            tenant="busy", id=jid, pipeline="echo", status=Status.RUNNING, params={}, created_at=now, available_at=now,
            max_attempts=3, callback_url="https://ok.example.com/h", callback_status="pending")))
    sender = WebhookSender(sim.stores, send=lambda m, d: None)
    saved = list(core._MARK_DUE)
    if before:
        put = sender.index.put_index_row

        def put_as_before(row: IndexRow) -> None:
            if row.due_at == core.IN_FLIGHT_DUE:
                row = IndexRow(row.tenant, row.job_id, sim.fake.clock.now() + core.SWEEP_AFTER, row.seen,
                               row.seen_at, row.sweeps)
            put(row)

        write = sender.index.write_index_row

        def write_as_before(current: IndexRow | None, fields: dict[str, Any]) -> IndexRow:
            # The sweep's "in flight" write (conditional since platform46): due again in 5 minutes, as before.
            if fields.get("due_at") == core.IN_FLIGHT_DUE:
                fields = {**fields, "due_at": sim.fake.clock.now() + core.SWEEP_AFTER}
            return write(current, fields)

        sender.index.put_index_row = put_as_before  # type: ignore[method-assign]
        sender.index.write_index_row = write_as_before  # type: ignore[method-assign]
        core._MARK_DUE.clear()
    try:
        for _ in range(-(-in_flight // 10)):  # the first pass over the rows (each looked at once)
            sim.fake.clock.advance(300.5)
            sender.sweep()
        ended = jobs[len(jobs) // 2]
        claimed = sim.stores.jobs.get(ended.tenant, ended.id, with_input=True)
        lost = dataclasses.replace(sim.stores, messages=type("Lost", (), {"send": lambda self, m, d=None: None})())
        Lifecycle(lost).finish(claimed.with_changes(owner=None), Ending(Status.SUCCEEDED))
        t_end = sim.fake.clock.now()
        ops_before, n_runs = sim.fake.ops(), 0
        while True:
            sim.fake.clock.advance(300.5)
            n_runs += 1
            if ended.id in sender.sweep().resent or n_runs > 20_000:
                break
        ops = sum((sim.fake.ops() - ops_before).values())
        return {"hours": (sim.fake.clock.now() - t_end).total_seconds() / 3600, "runs": n_runs,
                "ops_per_run": ops / n_runs}
    finally:
        core._MARK_DUE[:] = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dead", type=int, default=1000, help="jobs of the tenant whose receiver never answers")
    ap.add_argument("--places", type=int, default=5, help="deliveries at once (batchSize + newBatchThreshold)")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--every", type=float, default=600.0, help="seconds between the other tenant's jobs ending")
    ap.add_argument("--in-flight", type=int, default=10_000, help="one tenant's jobs in flight, for the sweep part")
    ap.add_argument("--skip-circuit", action="store_true", help="only the sweep part")
    args = ap.parse_args()
    print(f"CPU: {cpu()}; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(f"simulated: {args.dead} dead-receiver jobs at t=0, another tenant's job every {args.every:g} s for "
          f"{args.hours:g} h, {args.places} places; POST to a dead receiver {EXCHANGE_DEADLINE_SECONDS:g} s, an "
          f"answer {ANSWER_SECONDS * 1000:g} ms, a storage request {OP_SECONDS * 1000:g} ms "
          f"(circuit: {webhook_circuit.HOST_FAILURES} failures, probes {webhook_circuit.COOLDOWN_BASE:g}.."
          f"{webhook_circuit.COOLDOWN_CAP:g} s, tenant gap {webhook_circuit.PROBE_GAP:g} s)")
    for label, on in (() if args.skip_circuit else (("before (every attempt tried)", False),
                                                      ("after (per-tenant circuit)", True))):
        r = simulate(on, args.dead, args.places, args.hours, args.every)
        print(f"{label}:")
        print(f"  other tenant: {r['others_delivered']}/{r['others']} first deliveries; delay first "
              f"{r['first_other_delay_s']:.1f} s, median {r['median_delay_s']:.1f} s, max {r['max_delay_s']:.1f} s")
        print(f"  dead tenant: {r['dead_attempts']} attempts (tried or not), {r['dead_sender_hours']:.2f} sender-hours, "
              f"{r['dead_ops_per_attempt']:.2f} storage ops per attempt")
        print(f"  other tenant: {r['other_ops_per_delivery']:.2f} storage ops per delivery; sim wall {r['wall_s']:.1f} s")
    print(f"sweep: one tenant with {args.in_flight} jobs in flight, one of them ends and its first message is lost:")
    for label, before in (("before (in-flight rows due every 5 min)", True), ("after (in flight: never due)", False)):
        w = sweep_in_flight(args.in_flight, before)
        print(f"  {label}: re-sent after {w['hours']:.2f} h ({w['runs']} runs), {w['ops_per_run']:.1f} storage ops a run")


if __name__ == "__main__":
    main()
