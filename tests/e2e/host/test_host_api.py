"""The real app through real HTTP in a local host process: submit, progress, result, auth, cancel, idempotency."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.e2e.conftest import Api


def test_submit_progress_result(api: Api) -> None:
    started = time.perf_counter()
    job = api.submit("sleep", {"seconds": 3, "steps": 6})
    # The submission answers before the job runs: its answer says queued, and it came sooner than the 3 s the
    # pipeline takes (not a 1 s stopwatch, which a loaded machine overruns).
    assert job["status"] == "queued", job
    assert time.perf_counter() - started < 3.0
    seen_progress = api.wait(job["id"], until=lambda j: j["progress"]["processed"] > 0 and j["status"] == "running")
    assert seen_progress["progress"]["stage"] == "sleep" and seen_progress["progress"]["total"] == 6
    assert seen_progress["heartbeat_at"]
    done = api.wait(job["id"])
    assert done["status"] == "succeeded" and done["attempts"] == 1
    status, _, result = api.call("GET", done["links"]["result"])
    assert status == 200 and result == {"slept_seconds": 3.0, "steps": 6, "attempt": 1}


def test_auth_levels(api: Api) -> None:
    assert api.call("GET", "/api/jobs", key=False)[0] == 401
    assert api.call("POST", "/api/jobs", {"pipeline": "echo", "input": 1}, key=False)[0] == 401
    assert api.call("GET", "/api/health", key=False)[0] == 200
    wrong = Api(api.base, "wrong-key")
    assert wrong.call("GET", "/api/jobs")[0] == 401


def test_problem_json_over_http(api: Api) -> None:
    status, headers, body = api.call("POST", "/api/jobs", raw=b"{nope")
    assert status == 400 and headers["Content-Type"].startswith("application/problem+json")
    assert body["errors"][0]["field"] == "body"


def test_fifty_concurrent_idempotent_requests_over_http(api: Api) -> None:
    payload = {"pipeline": "echo", "params": {}, "input": {"survey": "q4"}}

    def post(_: int) -> tuple[int, str]:
        status, _, body = api.call("POST", "/api/jobs", payload, headers={"Idempotency-Key": "e2e-idem-1"})
        return status, body["id"]

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(post, range(50)))
    assert len({job_id for _, job_id in results}) == 1
    assert sorted(s for s, _ in results) == [200] * 49 + [202]
    assert api.wait(results[0][1])["status"] == "succeeded"


def test_cancel_running_job_over_http(api: Api) -> None:
    job = api.submit("sleep", {"seconds": 60, "steps": 60})
    api.wait(job["id"], until=lambda j: j["status"] == "running")
    status, _, body = api.call("POST", f"/api/jobs/{job['id']}/cancel")
    assert status == 202 and body["cancel_requested"]
    assert api.wait(job["id"], timeout=60)["status"] == "cancelled"
