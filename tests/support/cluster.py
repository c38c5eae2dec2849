"""Fault and load scenarios against real local host processes and a real Azurite.

Each scenario takes its size as arguments, checks its invariants (raising
``AssertionError``) and returns a dict of measurements. ``tests/e2e/fault`` runs
them scaled down; ``bench/reliability.py`` runs them full size and prints a table.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient
from azure.storage.queue import QueueClient

from devhost.azurite import Azurite
from devhost.process import REPO_ROOT, HostProcess
from tests.e2e.conftest import QUICK_STALE, TERMINAL, Api, host_env
from tests.support.waiting import wait_until

PROBLEM = "application/problem+json"


# -- plumbing -----------------------------------------------------------------------


@dataclass
class Cluster:
    """An API host (HTTP + reaper timer) and ``workers`` worker hosts on one Azurite."""

    conn: str
    workers: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    api_host: HostProcess | None = None
    worker_hosts: list[HostProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.env = host_env(self.conn, **self.extra_env)

    @property
    def api(self) -> Api:
        assert self.api_host is not None
        return Api(self.api_host.url, self.env["DEVHOST_FUNCTION_KEY"])

    def start(self) -> Cluster:
        self.api_host = HostProcess(env=self.env, args=["--no-queue"]).start()
        for _ in range(self.workers):
            self.worker_hosts.append(self.new_worker())
        return self

    def new_worker(self) -> HostProcess:
        return HostProcess(env=self.env, args=["--no-http", "--no-timer"], grace=5).start()

    def stop(self) -> None:
        for h in [self.api_host, *self.worker_hosts]:
            if h is not None:
                h.stop(timeout=15)

    @property
    def logs(self) -> str:
        return "\n".join(h.logs for h in [self.api_host, *self.worker_hosts] if h is not None)

    # Direct storage clients (the test process reads what the hosts wrote).
    def container(self) -> ContainerClient:
        return ContainerClient.from_connection_string(self.conn, self.env["RESULTS_CONTAINER"])

    def table(self) -> TableClient:
        return TableClient.from_connection_string(self.conn, self.env["JOBS_TABLE"])

    def queue(self, poison: bool = False) -> QueueClient:
        name = self.env["JOBS_QUEUE"] + ("-poison" if poison else "")
        return QueueClient.from_connection_string(self.conn, name)


@contextmanager
def cluster(conn: str, workers: int = 1, **extra_env: str) -> Iterator[Cluster]:
    c = Cluster(conn, workers, dict(extra_env))
    try:
        yield c.start()
    finally:
        c.stop()


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def submit_many(api: Api, bodies: list[dict[str, Any]], clients: int) -> tuple[list[str], list[float], Counter[int]]:
    """Submit ``bodies`` from ``clients`` threads; returns ids, latencies (s) and status counts."""
    ids: list[str] = []
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def one(body: dict[str, Any]) -> None:
        t0 = time.monotonic()
        status, _, resp = api.call("POST", "/api/jobs", body)
        dt = time.monotonic() - t0
        with lock:
            statuses[status] += 1
            latencies.append(dt)
            if status == 202:
                ids.append(resp["id"])

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, bodies))
    return ids, latencies, statuses


def wait_all_terminal(api: Api, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Poll until every job is terminal (via the list endpoint, 200 at a time, plus GETs)."""
    deadline = time.monotonic() + timeout
    pending = set(ids)
    final: dict[str, dict[str, Any]] = {}
    while pending:
        for job_id in list(pending):
            status, _, body = api.call("GET", f"/api/jobs/{job_id}")
            if status == 200 and body["status"] in TERMINAL:
                final[job_id] = body
                pending.discard(job_id)
        if not pending:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(pending)} of {len(ids)} jobs not terminal after {timeout:.0f}s")
        time.sleep(0.5)
    return final


def check_results_once(c: Cluster, jobs: dict[str, dict[str, Any]], tenant: str = "local") -> dict[str, int]:
    """No job's effects written twice: result blobs are keyed on job + attempt, and the entity
    points at the blob of its last attempt. Returns counts for the report."""
    from azure.core.exceptions import ResourceNotFoundError

    blobs: dict[str, list[str]] = {}
    try:
        for b in c.container().list_blobs(name_starts_with=f"{tenant}/"):
            _, job_id, name = b.name.split("/", 2)
            if name.startswith("result-"):
                blobs.setdefault(job_id, []).append(name)
    except ResourceNotFoundError:
        pass  # every result was small enough to live in its row: no blob was ever written

    multi = 0
    for job_id, job in jobs.items():
        names = sorted(blobs.get(job_id, []), key=lambda n: int(n[len("result-") : -len(".json")]))
        if job["status"] != "succeeded":
            continue
        entity = c.table().get_entity(tenant, job_id, select=["result_blob", "result_inline"])
        if entity.get("result_inline"):
            # A small result lives in the row; the pointer still names the attempt that produced it, and a
            # blob exists only if the row could not take it at first (then it is that attempt's blob).
            assert entity["result_blob"] == f"{tenant}/{job_id}/result-{job['attempts']}.json", (job_id, entity)
            assert all(n == f"result-{job['attempts']}.json" for n in names) or job["attempts"] > 1, (job_id, names)
            multi += len(names) > 1
            continue
        assert names, f"job {job_id} succeeded without a result blob"
        assert names[-1] == f"result-{job['attempts']}.json", (job_id, names, job["attempts"])
        if len(names) > 1:
            multi += 1
            assert job["attempts"] > 1, (job_id, names)
        entity = c.table().get_entity(tenant, job_id, select=["result_blob"])
        assert entity["result_blob"] == f"{tenant}/{job_id}/{names[-1]}", (entity, names)
    return {"jobs_with_several_result_blobs": multi}


# -- worker killed ------------------------------------------------------------------


def worker_killed(conn: str, n_jobs: int = 40, seconds: float = 1.0, timeout: float = 150) -> dict[str, Any]:
    """N sleep jobs across two worker hosts; SIGKILL one mid-run, restart it; all terminal, no double effects.

    The hosts use the short stale threshold (``QUICK_STALE``): the killed host's attempts wait it out before the
    reaper hands them on, and ``recovery_s`` includes it."""
    with cluster(conn, workers=2, HEARTBEAT_STALE_SECONDS=QUICK_STALE) as c:
        api = c.api
        t0 = time.monotonic()
        ids, _, statuses = submit_many(
            api,
            [{"pipeline": "sleep", "params": {"seconds": seconds, "steps": 2}, "input": i} for i in range(n_jobs)],
            8,
        )
        assert statuses == Counter({202: n_jobs}), statuses
        victim = c.worker_hosts[0]
        marker = f":{victim.worker_pid}:"  # the functions run in the host's language worker process
        # Kill once the victim is running attempts (read straight from the table, owner = host:pid:...).
        deadline = time.monotonic() + 90
        while True:
            running = c.table().query_entities("status eq 'running'", select=["RowKey", "owner"])
            victims = [e["RowKey"] for e in running if marker in (e.get("owner") or "")]
            if victims and time.monotonic() - t0 > 3:
                break
            assert time.monotonic() < deadline, "the victim host never ran a job"
            time.sleep(0.1)
        victim.kill()
        killed = time.monotonic()
        c.worker_hosts[0] = c.new_worker()
        recovered_at: float | None = None
        while recovered_at is None:
            states = [api.job(j)["status"] for j in victims]
            if all(s in TERMINAL for s in states):
                recovered_at = time.monotonic()
            elif time.monotonic() - killed > timeout:
                raise AssertionError(f"victims not recovered after {timeout}s: {states}")
            else:
                time.sleep(0.25)
        final = wait_all_terminal(api, ids, timeout)
        total = time.monotonic() - t0
        by_status = Counter(j["status"] for j in final.values())
        assert by_status == Counter({"succeeded": n_jobs}), by_status
        for j in final.values():
            status, _, result = api.call("GET", f"/api/jobs/{j['id']}/result")
            assert status == 200 and result["attempt"] == j["attempts"], (j, result)
        counts = check_results_once(c, final)
        return {
            "jobs": n_jobs,
            "succeeded": by_status["succeeded"],
            "killed_mid_attempt": len(victims),
            "retried_jobs": sum(1 for j in final.values() if j["attempts"] > 1),
            "recovery_s": round(recovered_at - killed, 1),
            "total_s": round(total, 1),
            **counts,
        }


# -- storage outage -----------------------------------------------------------------


def storage_outage(
    n_jobs: int = 12, outage_s: float = 8.0, bound_s: float = 8.0, timeout: float = 150
) -> dict[str, Any]:
    """Stop a private Azurite mid-run, keep calling the API, start it again with the same data.

    The short stale threshold (``QUICK_STALE``): an attempt that cannot renew through the outage (and Azurite's
    restart) fences itself and waits out the threshold before the reaper hands it on."""
    az = Azurite.private().start()
    try:
        with cluster(az.connection_string, workers=1, HEARTBEAT_STALE_SECONDS=QUICK_STALE) as c:
            api = c.api
            ids, _, statuses = submit_many(
                api,
                [{"pipeline": "sleep", "params": {"seconds": 1.5, "steps": 3}, "input": i} for i in range(n_jobs)],
                4,
            )
            assert statuses == Counter({202: n_jobs}), statuses
            api.wait(ids[0], until=lambda j: j["status"] != "queued")
            az.stop()
            down = time.monotonic()
            seen: Counter[str] = Counter()
            worst = 0.0
            worst_by: dict[str, float] = {}
            bad: list[Any] = []
            calls: list[tuple[str, str, Any]] = [
                ("GET", f"/api/jobs/{ids[0]}", None),
                ("GET", "/api/jobs?limit=5", None),
                ("POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": "during outage"}),
                ("POST", f"/api/jobs/{ids[-1]}/cancel", None),
                ("GET", "/api/health", None),
            ]
            while time.monotonic() - down < outage_s:
                for method, path, body in calls:
                    t0 = time.monotonic()
                    status, headers, resp = api.call(method, path, body, key=not path.endswith("/health"))
                    dt = time.monotonic() - t0
                    worst = max(worst, dt)
                    label = f"{method} {path.split('?')[0].replace(ids[0], '{id}').replace(ids[-1], '{id}')}"
                    seen[f"{label} {status}"] += 1
                    worst_by[label] = max(worst_by.get(label, 0.0), round(dt, 2))
                    ctype = headers.get("Content-Type", "")
                    if status != 503 or PROBLEM not in ctype or not headers.get("Retry-After") or dt > bound_s:
                        bad.append((method, path, status, ctype, headers.get("Retry-After"), round(dt, 2), resp))
            az.start()
            up = time.monotonic()
            # The API answers again as soon as Storage does.
            while api.call("GET", "/api/health", key=False)[0] != 200:
                assert time.monotonic() - up < 30, "health never recovered"
                time.sleep(0.2)
            api_back = time.monotonic() - up
            final = wait_all_terminal(api, ids, timeout)
            done = time.monotonic() - up
            by_status = Counter(j["status"] for j in final.values())
            assert not bad, bad[:5]
            assert by_status == Counter({"succeeded": n_jobs}), (
                by_status,
                [j for j in final.values() if j["status"] != "succeeded"][:3],
            )
            counts = check_results_once(c, final)
            return {
                "jobs": n_jobs,
                "outage_s": round(up - down, 1),
                "api_calls_during_outage": sum(seen.values()),
                "all_503_problem_retry_after": not bad,
                "worst_latency_s": round(worst, 2),
                "worst_latency_by_call_s": worst_by,
                "api_back_after_s": round(api_back, 1),
                "all_terminal_after_s": round(done, 1),
                "succeeded": by_status["succeeded"],
                "retried_jobs": sum(1 for j in final.values() if j["attempts"] > 1),
                **counts,
            }
    finally:
        az.close()


# -- sustained load -----------------------------------------------------------------


def sustained_load(
    conn: str, n_jobs: int = 150, clients: int = 20, workers: int = 1, timeout: float = 240
) -> dict[str, Any]:
    """``n_jobs`` echo jobs from ``clients`` threads while other threads read statuses."""
    with cluster(conn, workers=workers) as c:
        api = c.api
        stop = threading.Event()
        read_lat: list[float] = []
        read_status: Counter[int] = Counter()
        known: list[str] = []
        lock = threading.Lock()

        def reader() -> None:
            i = 0
            while not stop.is_set():
                with lock:
                    job_id = known[i % len(known)] if known else None
                i += 1
                path = f"/api/jobs/{job_id}" if job_id else "/api/jobs?limit=20"
                t0 = time.monotonic()
                status, _, _ = api.call("GET", path)
                with lock:
                    read_lat.append(time.monotonic() - t0)
                    read_status[status] += 1
                time.sleep(0.05)  # a polling client, not a tight loop

        readers = [threading.Thread(target=reader, daemon=True) for _ in range(max(2, clients // 4))]
        for t in readers:
            t.start()
        sub_lat: list[float] = []
        sub_status: Counter[int] = Counter()
        ids: list[str] = []
        t0 = time.monotonic()

        def submit(i: int) -> None:
            s0 = time.monotonic()
            status, _, body = api.call(
                "POST", "/api/jobs", {"pipeline": "echo", "params": {}, "input": {"n": i, "text": "x" * 200}}
            )
            dt = time.monotonic() - s0
            with lock:
                sub_lat.append(dt)
                sub_status[status] += 1
                if status == 202:
                    ids.append(body["id"])
                    known.append(body["id"])

        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(submit, range(n_jobs)))
        submitted = time.monotonic() - t0
        try:
            final = wait_all_terminal(api, ids, timeout)
        finally:
            stop.set()
            for t in readers:
                t.join(timeout=35)
        elapsed = time.monotonic() - t0
        by_status = Counter(j["status"] for j in final.values())
        five_xx = sum(v for k, v in (sub_status + read_status).items() if k >= 500)
        assert five_xx == 0, (sub_status, read_status)
        assert sub_status == Counter({202: n_jobs}), sub_status
        assert by_status == Counter({"succeeded": n_jobs}), by_status
        return {
            "jobs": n_jobs,
            "clients": clients,
            "worker_hosts": workers,
            "submit_p50_ms": round(percentile(sub_lat, 50) * 1000),
            "submit_p99_ms": round(percentile(sub_lat, 99) * 1000),
            "submit_rate_per_s": round(n_jobs / submitted, 1),
            "reads": sum(read_status.values()),
            "read_p50_ms": round(percentile(read_lat, 50) * 1000),
            "read_p99_ms": round(percentile(read_lat, 99) * 1000),
            "http_5xx": five_xx,
            "all_terminal_s": round(elapsed, 1),
            "jobs_per_s": round(n_jobs / elapsed, 2),
            "mean_submit_ms": round(statistics.fmean(sub_lat) * 1000),
        }


# -- helpers that run code in separate Python processes -------------------------------------


def run_at_once(code: str, env: dict[str, str], n: int, start_in: float = 3.0) -> list[str]:
    """Run ``code`` in ``n`` Python processes that all start its work at the same wall-clock moment.

    ``code`` sees ``GO`` (a ``time.time()`` value) and must print one JSON line."""
    go = time.time() + start_in
    full_env = {**os.environ, **env, "PYTHONPATH": str(REPO_ROOT), "GO": str(go)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        outs.append(out.strip().splitlines()[-1])
    return outs


WAIT_FOR_GO = "import os, time\nwhile time.time() < float(os.environ['GO']): time.sleep(0.001)\n"


def storage_env(conn: str, **extra: str) -> dict[str, str]:
    """Settings for an in-test-process or subprocess use of ``shared`` (no host)."""
    return host_env(conn, **extra)


def apply_env(env: dict[str, str]) -> Callable[[], None]:
    """Point this process's ``shared`` settings at ``env``; returns an undo."""
    from shared.config import settings
    from shared.storage import connections

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    settings.get_settings.cache_clear()
    connections.reset_clients()

    def undo() -> None:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        settings.get_settings.cache_clear()
        connections.reset_clients()

    return undo


def drain_messages(q: QueueClient) -> list[dict[str, Any]]:
    out = []
    while True:
        batch = list(q.receive_messages(messages_per_page=32, max_messages=32, visibility_timeout=60))
        if not batch:
            return out
        for m in batch:
            out.append(json.loads(base64.b64decode(m.content)))


def reaper_race(conn: str, n_jobs: int = 40, reapers: int = 2) -> dict[str, Any]:
    """Stale running jobs; ``reapers`` separate processes run a reaper's ``run()`` at the same moment."""
    from datetime import timedelta

    env = storage_env(conn)
    undo = apply_env(env)
    try:
        from shared.core.jobs import Job, Status, new_job_id, utcnow
        from shared.storage.connections import get_queue_client
        from shared.storage.job_store import JobStore

        store = JobStore()
        now = utcnow()
        stale = now - timedelta(minutes=5)
        ids = []
        for i in range(n_jobs):
            job = Job(
                tenant="local",
                id=new_job_id(),
                pipeline="echo",
                status=Status.RUNNING,
                params={},
                created_at=now,
                available_at=now,
                max_attempts=3,
                attempts=1,
                owner="dead:1:x",
                started_at=stale,
                heartbeat_at=stale,
                input_inline=b"",
                request_hash=str(i),
            )
            store.create(job)
            ids.append(job.id)
        # Some queued jobs whose message was lost, too.
        lost = []
        for i in range(n_jobs // 4):
            job = Job(
                tenant="local",
                id=new_job_id(),
                pipeline="echo",
                status=Status.QUEUED,
                params={},
                created_at=stale,
                available_at=stale,
                max_attempts=3,
                request_hash=f"q{i}",
            )
            store.create(job)
            lost.append(job.id)
        get_queue_client()  # create the queue
        code = WAIT_FOR_GO + (
            "import json\nfrom shared.platform import Platform\nr = Platform.from_settings().reaper().run()\n"
            "print(json.dumps({'stale': len(r.requeued_stale), 'lost': len(r.requeued_lost), 'conflicts': r.conflicts}))"
        )
        outs = [json.loads(o) for o in run_at_once(code, env, reapers)]
        msgs = drain_messages(get_queue_client())
        per = Counter((m["j"], m["a"]) for m in msgs)
        dupes = {k: v for k, v in per.items() if v > 1}
        assert not dupes, dupes
        assert {j for j, _ in per} == set(ids) | set(lost), "every stale or lost job re-enqueued exactly once"
        for job_id in ids:
            stored = store.get("local", job_id)
            assert stored.status == Status.RETRYING and stored.requeues == 1, stored
            assert per[(job_id, 2)] == 1
        for job_id in lost:
            assert per[(job_id, 1)] == 1
        return {
            "stale_jobs": n_jobs,
            "lost_message_jobs": len(lost),
            "reapers": reapers,
            "requeued_by_each": [o["stale"] + o["lost"] for o in outs],
            "conflicts_by_each": [o["conflicts"] for o in outs],
            "messages": len(msgs),
            "duplicate_messages": sum(v - 1 for v in dupes.values()),
        }
    finally:
        undo()


def duplicate_delivery(conn: str, consumers: int = 3) -> dict[str, Any]:
    """One job message handed to ``consumers`` separate worker processes at the same moment."""
    env = storage_env(conn)
    undo = apply_env(env)
    try:
        from shared.platform import Platform
        from shared.storage.connections import get_container_client, get_queue_client
        from shared.storage.job_store import JobStore

        submitted = Platform.from_settings().service.submit(
            "local",
            json.dumps({"pipeline": "sleep", "params": {"seconds": 1, "steps": 2}, "input": "dup"}).encode(),
            None,
        )
        job_id = submitted.job.id
        msgs = list(get_queue_client().receive_messages(max_messages=1, visibility_timeout=120))
        assert len(msgs) == 1
        text = base64.b64decode(msgs[0].content).decode()
        code = WAIT_FOR_GO + (
            f"import json, os\nfrom shared.platform import Platform\nprint(json.dumps(Platform.from_settings().worker.handle({text!r}, 1)))"
        )
        t0 = time.monotonic()
        outcomes = sorted(json.loads(o) for o in run_at_once(code, env, consumers))
        stored = JobStore().get("local", job_id, with_input=True)
        blobs = [b.name for b in get_container_client().list_blobs(name_starts_with=f"local/{job_id}/")]
        assert outcomes.count("succeeded") == 1, outcomes
        assert all(o.startswith("noop") for o in outcomes if o != "succeeded"), outcomes
        assert stored.status.value == "succeeded" and stored.attempts == 1, stored
        assert stored.result_blob == f"local/{job_id}/result-1.json", stored.result_blob
        # One result: in the row when it is small, else in the one blob of attempt 1.
        assert blobs == ([] if stored.result_inline else [f"local/{job_id}/result-1.json"]), blobs
        return {
            "consumers": consumers,
            "outcomes": outcomes,
            "attempts": stored.attempts,
            "result_blobs": len(blobs),
            "elapsed_s": round(time.monotonic() - t0, 1),
        }
    finally:
        undo()


def poison(conn: str, good: int = 6) -> dict[str, Any]:
    """A job that crashes its pipeline process on every attempt, in a batch of good ones."""
    with cluster(conn, workers=1) as c:
        api = c.api
        t0 = time.monotonic()
        bad = api.submit("sleep", {"seconds": 0.2, "steps": 2, "fail": "kill"})
        raising = api.submit("sleep", {"seconds": 0.2, "steps": 2, "fail": "raise"})
        ok = [api.submit("echo", {}, {"n": i})["id"] for i in range(good)]
        final = wait_all_terminal(api, [bad["id"], raising["id"], *ok], 120)
        elapsed = time.monotonic() - t0

        def poison_copies() -> list[dict[str, Any]] | None:
            found = [
                json.loads(base64.b64decode(m.content))
                for m in c.queue(poison=True).peek_messages(max_messages=32)
            ]
            return found if {m["j"] for m in found} >= {bad["id"], raising["id"]} else None

        # The worker copies a message to the poison queue right after the FAILED write that the API shows, so
        # on a loaded machine the status can be read before the copy lands: wait for it (bounded), don't peek once.
        poisoned = wait_until(poison_copies, timeout=60, interval=0.2, what="both failed jobs' poison copies")
        for j in (bad, raising):
            f = final[j["id"]]
            assert f["status"] == "failed", f
            assert f["attempts"] == f["max_attempts"] == 5, f
            assert f["error"] and "attempts exhausted (5/5)" in f["error"]["message"], f
        assert "killed by SIGKILL" in final[bad["id"]]["error"]["message"]
        assert final[raising["id"]]["error"]["type"] == "RuntimeError"
        assert {m["j"] for m in poisoned} == {bad["id"], raising["id"]}, poisoned
        assert all(final[i]["status"] == "succeeded" and final[i]["attempts"] == 1 for i in ok)
        return {
            "crashing_jobs": 2,
            "good_jobs": good,
            "good_succeeded": sum(final[i]["status"] == "succeeded" for i in ok),
            "kill_error": final[bad["id"]]["error"]["message"][:120],
            "raise_error": final[raising["id"]]["error"]["message"][:120],
            "poison_messages": len(poisoned),
            "elapsed_s": round(elapsed, 1),
        }
