"""Chaos: "accepted means tracked, never lost, never run twice" under ambiguous storage faults (issue 11, Proof).

Azurite sits behind :class:`devhost.faultproxy.FaultProxy`, which lets a share of table, queue and blob writes
commit and then resets the connection (the SDK sees ``ServiceResponseError`` for a write that happened), and
refuses another share with 503 ServerBusy. A real API host (HTTP + reaper) and one worker host
(``python -m devhost``) use the proxy as their ``AzureWebJobsStorage``. A well-behaved client submits N echo jobs,
each with its own ``Idempotency-Key``, retrying 5xx and connection errors with the same key and body. Then:
one job per key, every job ``succeeded`` with ``attempts == 1``, no pipeline run twice, the hosts never restarted.

:func:`run_chaos` is the scenario; ``bench/chaos.py`` runs it at several drop rates and prints the table.
How a run is counted, without relying on the platform's own bookkeeping:

* jobs: every job the API lists in this run's private table, plus every id the client was answered with;
  a job is tied to its key by the key echoed in its result, or by the answers to that key's requests.
* runs of a job: the number of distinct ``result-<attempt>`` blobs that reached Azurite through the proxy
  (dropped answers included), or the ``attempt ... started`` lines in the worker's log, whichever is larger.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from devhost.faultproxy import FaultProxy, Faults
from devhost.process import HostProcess
from tests.e2e.conftest import host_env

TERMINAL = {"succeeded", "failed", "cancelled"}
KEY_RE = re.compile(r"chaos-[0-9a-f]{8}-\d{4}")
RESULT_RE = re.compile(r"/([0-9a-f]{16,64})/result-(\d+)\.json")
STARTED_RE = re.compile(r"job ([0-9a-f]{16,64})\b.*\battempt (\d+)\b.*\bstarted\b")


def default_faults(table_drop: float = 0.12, table_refuse: float = 0.05) -> dict[str, Faults]:
    """The issue's Table faults; queue and blob writes at a third of the drop rate and 2 % refused."""
    other = Faults(drop=round(table_drop / 3, 4), refuse=0.02 if table_drop or table_refuse else 0.0)
    return {"table": Faults(table_drop, table_refuse), "queue": other, "blob": other}


# -- the client ---------------------------------------------------------------------------------------


@dataclass
class Submission:
    key: str
    attempts: int = 0
    final_status: int | None = None
    ids: list[str] = field(default_factory=list)  # every job id an answer named, in order
    answers: Counter[str] = field(default_factory=Counter)  # "202", "503", "conn", ...


class Client:
    """A small HTTP client of the API that never raises on transport errors."""

    def __init__(self, base: str, key: str) -> None:
        self.base = base
        self.key = key

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 30
    ) -> tuple[int | str, dict[str, str], Any]:
        data = None if body is None else json.dumps(body).encode()
        h = {"content-type": "application/json", "x-functions-key": self.key, **(headers or {})}
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                # The headers as http.client parsed them: names case-insensitive, as HTTP's are (the runtime answers
                # with lower-case names such as content-type, and so does Azure).
                return resp.status, resp.headers, _json(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, err.headers, _json(err.read())
        except (TimeoutError, urllib.error.URLError, OSError) as err:
            return "conn", {}, repr(err)

    def submit(self, key: str, body: dict[str, Any], give_up_after: float) -> Submission:
        """POST until answered 200/202 (or a 4xx), retrying 5xx and connection errors with the same key."""
        sub = Submission(key)
        t0 = time.monotonic()
        while True:
            sub.attempts += 1
            status, headers, resp = self.call("POST", "/api/jobs", body, {"Idempotency-Key": key})
            sub.answers[str(status)] += 1
            if isinstance(resp, dict) and isinstance(resp.get("id"), str):
                sub.ids.append(resp["id"])
            if status in (200, 202):
                sub.final_status = status
                return sub
            retryable = status == "conn" or (isinstance(status, int) and (status >= 500 or status in (408, 429)))
            if not retryable or time.monotonic() - t0 > give_up_after:
                sub.final_status = status if isinstance(status, int) else None
                return sub
            try:
                pause = float(headers.get("Retry-After", "0"))
            except ValueError:
                pause = 0.0
            time.sleep(min(2.0, max(pause, 0.2 * 2 ** min(sub.attempts - 1, 3))))

    def list_all(self) -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            path = "/api/jobs?limit=100" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
            status, _, body = self.call("GET", path)
            if status != 200 or not isinstance(body, dict):
                return None
            items.extend(body.get("items") or [])
            cursor = body.get("next_cursor")
            if not cursor:
                return items


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload.decode("utf-8", "replace")


# -- the scenario ---------------------------------------------------------------------------------------


def _prepare_storage(conn: str, env: dict[str, str]) -> None:
    """Create the run's table, queues and container straight on Azurite, so faults hit the work, not setup."""
    table = TableServiceClient.from_connection_string(conn)
    table.create_table_if_not_exists(env["JOBS_TABLE"])
    queues = QueueServiceClient.from_connection_string(conn)
    for name in (env["JOBS_QUEUE"], env["JOBS_QUEUE"] + "-poison", env["CHUNKS_QUEUE"], env["CHUNKS_QUEUE"] + "-poison"):
        try:
            queues.create_queue(name)
        except ResourceExistsError:
            pass
    try:
        BlobServiceClient.from_connection_string(conn).create_container(env["RESULTS_CONTAINER"])
    except ResourceExistsError:
        pass


def run_chaos(
    upstream: str,
    n_jobs: int = 30,
    faults: dict[str, Faults] | None = None,
    deadline_s: float = 120.0,
    clients: int = 6,
    seed: int = 11,
    heal_after_s: float | None = None,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the scenario against the Azurite at ``upstream`` (a connection string) and return the outcome.

    Faults stay on from the first submission until every job is terminal, ``heal_after_s`` seconds have passed
    (then rates drop to 0), or the deadline. Nothing is asserted here; :func:`violations` judges an outcome.

    The hosts get the e2e settings (1 s heartbeats, 30 s stale, a reaper every 2 s) except the lost-message pass,
    which stays at 15 minutes as in production: a job whose message was never sent shows as stuck ``queued``
    instead of being papered over by a 30-second re-enqueue. ``extra_env`` overrides any setting.
    """
    faults = default_faults() if faults is None else faults
    run_id = secrets.token_hex(4)
    t_start = time.monotonic()
    with FaultProxy(upstream, seed=seed) as proxy:
        env = host_env(proxy.connection_string, **{"QUEUED_STALE_SECONDS": "900", **(extra_env or {})})
        _prepare_storage(upstream, env)
        api_host = HostProcess(env=env, args=["--no-queue"])
        worker = HostProcess(env=env, args=["--no-http", "--no-timer"], grace=5)
        hosts = [api_host, worker]
        try:
            api_host.start(timeout=60)
            worker.start(timeout=60)
            pids = [h.pid for h in hosts]
            client = Client(api_host.url, env["DEVHOST_FUNCTION_KEY"])
            for service, f in faults.items():
                proxy.set_faults(service, drop=f.drop, refuse=f.refuse)
            t0 = time.monotonic()
            keys = [f"chaos-{run_id}-{i:04d}" for i in range(n_jobs)]

            def submit(key: str) -> Submission:
                body = {"pipeline": "echo", "params": {}, "input": {"key": key, "text": "accepted means tracked"}}
                return client.submit(key, body, give_up_after=max(30.0, deadline_s / 2))

            with ThreadPoolExecutor(clients) as pool:
                subs = {s.key: s for s in pool.map(submit, keys)}
            submitted_s = time.monotonic() - t0

            # Wait for every job we know of (listed, or named in an answer) to be terminal.
            deadline = t0 + deadline_s
            healed = False
            jobs: dict[str, dict[str, Any]] = {}
            terminal_at: dict[str, float] = {}
            while True:
                listed = client.list_all()
                for item in listed or []:
                    jobs[item["id"]] = item
                for job_id, job in jobs.items():
                    if job.get("status") in TERMINAL:
                        terminal_at.setdefault(job_id, time.monotonic() - t0)
                for s in subs.values():
                    for job_id in s.ids:
                        if job_id not in jobs:
                            status, _, body = client.call("GET", f"/api/jobs/{job_id}")
                            jobs[job_id] = body if status == 200 and isinstance(body, dict) else {"id": job_id, "status": f"http {status}"}
                if listed is not None and jobs and all(j.get("status") in TERMINAL for j in jobs.values()):
                    break
                now = time.monotonic()
                if heal_after_s is not None and not healed and now - t0 > heal_after_s:
                    proxy.heal()
                    healed = True
                if now > deadline:
                    break
                time.sleep(1.0)
            settled_s = time.monotonic() - t0
            proxy.heal()
            # Let in-flight work land before counting runs (a reaper pass, a redelivery).
            time.sleep(2.0)
            restarted = [h.pid != pid or not h.running() for h, pid in zip(hosts, pids, strict=True)]
            final = {}
            for job_id in jobs:
                status, _, body = client.call("GET", f"/api/jobs/{job_id}")
                final[job_id] = body if status == 200 and isinstance(body, dict) else {"id": job_id, "status": f"http {status}"}
            outcome = _judge(client, proxy, worker.logs + api_host.logs, subs, final, upstream, env)
            outcome.update(
                jobs_submitted=n_jobs,
                submit_s=round(submitted_s, 1),
                settled_s=round(settled_s, 1),
                wall_s=round(time.monotonic() - t_start, 1),
                host_restarted=any(restarted),
                last_terminal_s=round(max(terminal_at.values(), default=0.0), 1),
                logs=[str(h.log_path) for h in hosts],
                faults={s: (f.drop, f.refuse) for s, f in faults.items()},
                proxy={s: c.as_dict() for s, c in proxy.counters().items()},
                proxy_report=proxy.report(),
            )
            return outcome
        finally:
            for h in hosts:
                h.stop(timeout=15)


def _judge(
    client: Client,
    proxy: FaultProxy,
    logs: str,
    subs: dict[str, Submission],
    final: dict[str, dict[str, Any]],
    upstream: str,
    env: dict[str, str],
) -> dict[str, Any]:
    # Tie jobs to keys: the key echoed in the result, else the answers to that key's requests.
    key_of: dict[str, str] = {}
    for s in subs.values():
        for job_id in s.ids:
            key_of.setdefault(job_id, s.key)
    for job_id, job in final.items():
        if job.get("status") == "succeeded":
            status, _, result = client.call("GET", f"/api/jobs/{job_id}/result")
            m = KEY_RE.search(json.dumps(result)) if status == 200 else None
            if m:
                key_of[job_id] = m.group(0)
    jobs_per_key = Counter(key_of[j] for j in final if j in key_of)
    # Runs: result blobs that reached Azurite (the proxy saw every write), and "attempt N started" log lines.
    result_attempts: dict[str, set[int]] = defaultdict(set)
    for w in proxy.writes("blob"):
        m = RESULT_RE.search(urllib.parse.urlsplit(w.path).path)
        if m and w.method == "PUT" and w.action in ("forward", "drop"):
            result_attempts[m.group(1)].add(int(m.group(2)))
    started: Counter[str] = Counter(m.group(1) for m in STARTED_RE.finditer(logs))
    container = BlobServiceClient.from_connection_string(upstream).get_container_client(env["RESULTS_CONTAINER"])
    stored_results: Counter[str] = Counter()
    for b in container.list_blobs():
        m = RESULT_RE.search("/" + b.name)
        if m:
            stored_results[m.group(1)] += 1
    runs = {j: max(len(result_attempts.get(j, ())), started.get(j, 0), stored_results.get(j, 0)) for j in final}
    by_status = Counter(str(j.get("status")) for j in final.values())
    accepted = [s for s in subs.values() if s.final_status in (200, 202)]
    return {
        "accepted": len(accepted),
        "client_gave_up": {s.key: dict(s.answers) for s in subs.values() if s.final_status not in (200, 202)},
        "client_retries": sum(s.attempts - 1 for s in subs.values()),
        "client_answers": dict(sum((s.answers for s in subs.values()), Counter())),
        "jobs": len(final),
        "by_status": dict(by_status),
        "succeeded": by_status.get("succeeded", 0),
        "failed": by_status.get("failed", 0),
        "stuck": sum(v for k, v in by_status.items() if k not in TERMINAL),
        "run_twice": sum(1 for n in runs.values() if n > 1),
        "never_ran_but_succeeded": sum(
            1 for j, job in final.items() if job.get("status") == "succeeded" and runs.get(j, 0) == 0
        ),
        "attempts_gt1": sum(1 for j in final.values() if (j.get("attempts") or 0) > 1),
        "attempts_gt1_ids": {j: job.get("attempts") for j, job in final.items() if (job.get("attempts") or 0) > 1},
        "keys_with_duplicates": sum(1 for n in jobs_per_key.values() if n > 1),
        "keys_without_job": sum(1 for s in accepted if jobs_per_key.get(s.key, 0) == 0),
        "jobs_without_key": sum(1 for j in final if j not in key_of),
        "errors": sorted({str((j.get("error") or {}).get("message", ""))[:100] for j in final.values() if j.get("error")})[:5],
        "not_succeeded": [
            {k: j.get(k) for k in ("id", "status", "attempts", "error")} for j in final.values() if j.get("status") != "succeeded"
        ][:8],
        "runs_of": {j: n for j, n in runs.items() if n != 1},
    }


def violations(o: dict[str, Any]) -> list[str]:
    """What broke the promise in an outcome (empty when it held)."""
    out = []
    if o["accepted"] != o["jobs_submitted"]:
        out.append(f"{o['jobs_submitted'] - o['accepted']} keys never accepted: {o['client_gave_up']}")
    if o["keys_with_duplicates"] or o["jobs_without_key"]:
        out.append(f"{o['keys_with_duplicates']} keys with several jobs, {o['jobs_without_key']} jobs without a key")
    if o["keys_without_job"]:
        out.append(f"{o['keys_without_job']} accepted keys have no job")
    if o["succeeded"] != o["jobs"] or o["jobs"] != o["jobs_submitted"]:
        out.append(f"jobs by status {o['by_status']} (want {o['jobs_submitted']} succeeded): {o['not_succeeded']}")
    if o["attempts_gt1"]:
        out.append(f"{o['attempts_gt1']} jobs needed more than one attempt")
    if o["run_twice"]:
        out.append(f"{o['run_twice']} jobs ran more than once: {({j: n for j, n in o['runs_of'].items() if n > 1})}")
    if o["never_ran_but_succeeded"]:
        out.append(f"{o['never_ran_but_succeeded']} jobs succeeded with no run counted")
    if o["host_restarted"]:
        out.append("a host process exited or restarted")
    return out


COLUMNS = [
    ("drop", lambda o: f"{o['faults']['table'][0]:.0%}"),
    ("submitted", lambda o: o["jobs_submitted"]),
    ("accepted", lambda o: o["accepted"]),
    ("jobs", lambda o: o["jobs"]),
    ("succeeded", lambda o: o["succeeded"]),
    ("failed", lambda o: o["failed"]),
    ("stuck", lambda o: o["stuck"]),
    ("run twice", lambda o: o["run_twice"]),
    ("attempts>1", lambda o: o["attempts_gt1"]),
    ("dup keys", lambda o: o["keys_with_duplicates"]),
    ("restarted", lambda o: "yes" if o["host_restarted"] else "no"),
    ("wall s", lambda o: o["settled_s"]),
    ("table d/r", lambda o: f"{o['proxy']['table']['dropped']}/{o['proxy']['table']['refused']}"),
    ("queue d/r", lambda o: f"{o['proxy']['queue']['dropped']}/{o['proxy']['queue']['refused']}"),
    ("blob d/r", lambda o: f"{o['proxy']['blob']['dropped']}/{o['proxy']['blob']['refused']}"),
    ("writes", lambda o: sum(c["writes"] for c in o["proxy"].values())),
]


def outcome_table(outcomes: list[dict[str, Any]]) -> str:
    """Markdown table, one row per outcome."""
    head = [c for c, _ in COLUMNS]
    rows = [[str(f(o)) for _, f in COLUMNS] for o in outcomes]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def describe(o: dict[str, Any]) -> str:
    stuck = {k: v for k, v in o["by_status"].items() if k not in TERMINAL}
    return "\n".join(
        [
            outcome_table([o]),
            f"stuck by status: {stuck}; client answers: {o['client_answers']} (retries {o['client_retries']})",
            f"errors: {o['errors']}",
            f"runs != 1: {o['runs_of']}; attempts > 1: {o['attempts_gt1_ids']}",
            f"not succeeded: {o['not_succeeded']}",
            f"host logs: {o['logs']}",
            o["proxy_report"],
        ]
    )


# -- the test -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_accepted_jobs_survive_ambiguous_storage_faults(azurite: str) -> None:
    outcome = run_chaos(azurite, n_jobs=30, faults=default_faults(0.12, 0.05), deadline_s=90, clients=6)
    print(describe(outcome))
    problems = violations(outcome)
    assert not problems, "\n".join(problems)
    assert outcome["last_terminal_s"] < 90


@pytest.mark.slow
def test_chaos_harness_counts_a_clean_run(azurite: str) -> None:
    """The harness itself, with no faults: every job once, nothing flagged (so a failure above is the platform's)."""
    outcome = run_chaos(azurite, n_jobs=6, faults=default_faults(0.0, 0.0), deadline_s=60, clients=3)
    print(describe(outcome))
    assert not violations(outcome), violations(outcome)
    assert outcome["proxy"]["table"]["forwarded"] > 0 and outcome["proxy"]["blob"]["forwarded"] > 0
    assert sum(c["dropped"] + c["refused"] for c in outcome["proxy"].values()) == 0
